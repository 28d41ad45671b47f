"""MirrorMaker 2's replication policies: how a remote topic is named, which cluster a
topic came from, and the names of the internal topics.

- :class:`DefaultReplicationPolicy` (``replication.policy.class`` =
  ``org.apache.kafka.connect.mirror.DefaultReplicationPolicy``, the default): the remote
  topic of ``t`` from cluster ``A`` is ``A<sep>t`` (``replication.policy.separator``,
  default ``.``); a topic's source is the part before the first separator.
- :class:`IdentityReplicationPolicy` (``...IdentityReplicationPolicy``): remote topics
  keep their names, except heartbeats topics, which are named as by the default policy;
  a topic's source is the configured source alias (so it cannot detect cycles).

Internal topics: ``heartbeats``; ``mm2-offset-syncs<sep>B<sep>internal``;
``A<sep>checkpoints<sep>internal`` (``<sep>`` is ``.`` when
``replication.policy.internal.topic.separator.enabled`` is false). A topic is internal
when it starts with ``__`` or ``.``, or ends with ``.internal`` or ``-internal``.
"""

from __future__ import annotations

DEFAULT_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
HEARTBEATS = "heartbeats"


class DefaultReplicationPolicy:
    def __init__(self, separator: str = ".", internal_separator_enabled: bool = True) -> None:
        if not separator:
            raise ValueError("replication.policy.separator must not be empty")
        self.separator = separator
        self._internal = separator if internal_separator_enabled else "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        parts = [p for p in topic.split(self.separator)]
        # Java's String.split drops trailing empty strings.
        while parts and parts[-1] == "":
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def heartbeats_topic(self) -> str:
        return HEARTBEATS

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self._internal + cluster_alias + self._internal + "internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._internal + "checkpoints" + self._internal + "internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal + "checkpoints" + self._internal + "internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal + "internal")

    def is_internal_topic(self, topic: str) -> bool:
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    def __init__(
        self,
        source_alias: str | None = None,
        separator: str = ".",
        internal_separator_enabled: bool = True,
    ) -> None:
        super().__init__(separator, internal_separator_enabled)
        self.source_alias = source_alias

    def _heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._heartbeat(topic):
            return super().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


def is_cycle(policy: DefaultReplicationPolicy, topic: str, target_alias: str) -> bool:
    """True when ``topic`` came (through any number of hops) from ``target_alias``:
    mirroring it there would send records back where they came from."""
    seen = 0
    while seen < 1000:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
        seen += 1
    return True


def make(
    class_name: str, source_alias: str, separator: str = ".", internal_separator: bool = True
) -> DefaultReplicationPolicy:
    """The policy named by ``replication.policy.class`` (a fully qualified Java class
    name, or its simple name); ValueError for another."""
    simple = class_name.rsplit(".", 1)[-1]
    if simple == "DefaultReplicationPolicy":
        return DefaultReplicationPolicy(separator, internal_separator)
    if simple == "IdentityReplicationPolicy":
        return IdentityReplicationPolicy(source_alias, separator, internal_separator)
    raise ValueError(
        f"replication.policy.class {class_name!r}: only {DEFAULT_CLASS} and {IDENTITY_CLASS}"
    )
