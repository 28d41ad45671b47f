"""MirrorMaker 2's filters: which topics, consumer groups and topic config properties a
flow replicates.

A filter setting is a list (comma-separated, whitespace around items ignored) of regular
expressions; a name matches the list when one expression matches the *whole* name
(Java's ``Matcher.matches``). Defaults are MM2's:

- ``topics`` ``.*``; ``topics.exclude`` ``.*[\\-\\.]internal, .*\\.replica, __.*``
- ``groups`` ``.*``; ``groups.exclude`` ``console-consumer-.*, connect-.*, __.*``
- ``config.properties.exclude``: the throttled-replicas lists,
  ``message.timestamp.difference.max.ms``, ``message.timestamp.type``,
  ``unclean.leader.election.enable``, ``min.insync.replicas``.

A topic is replicated when it matches ``topics`` (or is a heartbeats topic), does not
match ``topics.exclude``, is not internal to the replication policy, and is not a cycle
(:func:`logstore.mirror.replication_policy.is_cycle`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from logstore.mirror.replication_policy import DefaultReplicationPolicy, is_cycle

TOPICS_DEFAULT = ".*"
TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
GROUPS_DEFAULT = ".*"
GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas, "
    r"leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, "
    r"message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, "
    r"min\.insync\.replicas"
)


def split_list(value: str) -> list[str]:
    """A ConfigDef LIST: comma-separated, items trimmed, empty value = empty list."""
    value = value.strip()
    return [] if not value else [item.strip() for item in value.split(",")]


class PatternList:
    """Full-match of any expression of a list; an empty list matches nothing."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = list(patterns)
        try:
            self._re = re.compile("|".join(f"(?:{p})" for p in self.patterns)) if patterns else None
        except re.error as exc:
            raise ValueError(f"bad regular expression in {', '.join(patterns)!r}: {exc}") from None

    def matches(self, name: str) -> bool:
        return self._re is not None and self._re.fullmatch(name) is not None


class TopicFilter:
    def __init__(
        self,
        policy: DefaultReplicationPolicy,
        target_alias: str,
        include: Sequence[str] = (TOPICS_DEFAULT,),
        exclude: Sequence[str] = tuple(split_list(TOPICS_EXCLUDE_DEFAULT)),
    ) -> None:
        self.policy = policy
        self.target_alias = target_alias
        self.include = PatternList(include)
        self.exclude = PatternList(exclude)

    def should_replicate(self, topic: str) -> bool:
        matched = (
            self.include.matches(topic) and not self.exclude.matches(topic)
        ) or self.policy.is_heartbeats_topic(topic)
        return (
            matched
            and not self.policy.is_internal_topic(topic)
            and not is_cycle(self.policy, topic, self.target_alias)
        )


class GroupFilter:
    def __init__(
        self,
        include: Sequence[str] = (GROUPS_DEFAULT,),
        exclude: Sequence[str] = tuple(split_list(GROUPS_EXCLUDE_DEFAULT)),
    ) -> None:
        self.include = PatternList(include)
        self.exclude = PatternList(exclude)

    def should_replicate(self, group: str) -> bool:
        return self.include.matches(group) and not self.exclude.matches(group)


class ConfigPropertyFilter:
    def __init__(
        self, exclude: Sequence[str] = tuple(split_list(CONFIG_PROPERTIES_EXCLUDE_DEFAULT))
    ) -> None:
        self.exclude = PatternList(exclude)

    def should_replicate(self, name: str) -> bool:
        return not self.exclude.matches(name)
