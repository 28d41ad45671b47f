"""What to change on the target so a remote topic matches its source topic (pure).

A remote topic is created with the source's partition count and the source's replicated
configs (those set on the source topic itself, ``DYNAMIC_TOPIC_CONFIG``, that pass the
``config.properties.exclude`` filter). Later:

- more source partitions than remote ones: the remote topic grows to that count
  (partitions are never removed);
- a replicated config whose value differs on the target: set;
- a config the mirror may replicate that is set on the target topic but no longer on the
  source: deleted (back to the target's default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from logstore.mirror.filters import ConfigPropertyFilter


@dataclass(frozen=True)
class TopicState:
    """A topic as described by one cluster: partition count and the configs set on the
    topic itself (name -> value)."""

    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicActions:
    create_partitions: int | None = None  # create the topic with this many
    grow_to: int | None = None  # add partitions up to this total
    set_configs: Mapping[str, str] = field(default_factory=dict)
    delete_configs: tuple[str, ...] = ()

    def empty(self) -> bool:
        return (
            self.create_partitions is None
            and self.grow_to is None
            and not self.set_configs
            and not self.delete_configs
        )


def replicated_configs(source: TopicState, config_filter: ConfigPropertyFilter) -> dict[str, str]:
    return {k: v for k, v in source.configs.items() if config_filter.should_replicate(k)}


def plan(
    source: TopicState,
    target: TopicState | None,
    config_filter: ConfigPropertyFilter,
    sync_configs: bool = True,
) -> TopicActions:
    wanted = replicated_configs(source, config_filter) if sync_configs else {}
    if target is None:
        return TopicActions(create_partitions=source.partitions, set_configs=wanted)
    grow = source.partitions if source.partitions > target.partitions else None
    if not sync_configs:
        return TopicActions(grow_to=grow)
    changed = {k: v for k, v in wanted.items() if target.configs.get(k) != v}
    gone = tuple(
        sorted(k for k in target.configs if k not in wanted and config_filter.should_replicate(k))
    )
    return TopicActions(grow_to=grow, set_configs=changed, delete_configs=gone)
