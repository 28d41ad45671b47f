"""Keeps a flow's remote topics in step with their source topics: which source topics
are replicated (the topic filter), and creating, growing and reconfiguring the remote
topics on the target as :mod:`.topic_plan` decides."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from logstore.mirror.config import Flow
from logstore.mirror.topic_plan import TopicActions, TopicState, plan

TIMEOUT = 30.0


def _topic_configs(adm: AdminClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """The configs set on each topic itself (DYNAMIC_TOPIC_CONFIG)."""
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    if not resources:
        return {}
    out: dict[str, dict[str, str]] = {}
    for res, fut in adm.describe_configs(resources, request_timeout=TIMEOUT).items():
        try:
            entries = fut.result()
        except KafkaException:
            continue  # deleted meanwhile
        out[res.name] = {
            name: e.value
            for name, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None
        }
    return out


def _partition_counts(adm: AdminClient) -> dict[str, int]:
    meta = adm.list_topics(timeout=TIMEOUT)
    return {
        name: len(t.partitions)
        for name, t in meta.topics.items()
        if t.error is None and t.partitions
    }


class TopicSync:
    def __init__(self, flow: Flow, source_admin: AdminClient, target_admin: AdminClient) -> None:
        self.flow = flow
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.policy = flow.policy()
        self.topic_filter = flow.topic_filter()
        self.config_filter = flow.config_filter()
        self.replication_factor = flow.integer("replication.factor")
        # source topic -> (remote topic, partitions on the target)
        self.topics: dict[str, tuple[str, int]] = {}

    def remote(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.source, topic)

    def refresh(self, sync_configs: bool) -> dict[str, tuple[str, int]]:
        """Creates and grows remote topics (and syncs configs when ``sync_configs``);
        returns source topic -> (remote topic, remote partition count)."""
        source_counts = _partition_counts(self.source_admin)
        wanted = sorted(t for t in source_counts if self.topic_filter.should_replicate(t))
        target_counts = _partition_counts(self.target_admin)
        src_cfg = _topic_configs(self.source_admin, wanted)
        remotes = {t: self.remote(t) for t in wanted}
        existing = [remotes[t] for t in wanted if remotes[t] in target_counts]
        tgt_cfg = _topic_configs(self.target_admin, existing) if sync_configs else {}
        topics: dict[str, tuple[str, int]] = {}
        for t in wanted:
            r = remotes[t]
            source = TopicState(source_counts[t], src_cfg.get(t, {}))
            target = (
                TopicState(target_counts[r], tgt_cfg.get(r, {})) if r in target_counts else None
            )
            actions = plan(source, target, self.config_filter, sync_configs or target is None)
            count = self._apply(r, actions)
            topics[t] = (r, count if count else target_counts.get(r, source.partitions))
        self.topics = topics
        return topics

    def ensure_partition(self, topic: str, partition: int) -> None:
        """Grows the remote topic of ``topic`` so ``partition`` exists on the target."""
        remote, count = self.topics.get(topic, (self.remote(topic), 0))
        if partition < count:
            return
        target_counts = _partition_counts(self.target_admin)
        have = target_counts.get(remote, 0)
        if partition >= have:
            self._apply(remote, TopicActions(grow_to=partition + 1))
            have = partition + 1
        self.topics[topic] = (remote, have)

    def _apply(self, remote: str, actions: TopicActions) -> int | None:
        if actions.empty():
            return None
        count: int | None = None
        if actions.create_partitions is not None:
            count = actions.create_partitions
            new = NewTopic(
                remote,
                actions.create_partitions,
                self.replication_factor,
                config=dict(actions.set_configs),
            )
            _result(
                self.target_admin.create_topics([new], request_timeout=TIMEOUT),
                "TOPIC_ALREADY_EXISTS",
            )
            return count
        if actions.grow_to is not None:
            count = actions.grow_to
            fut = self.target_admin.create_partitions(
                [NewPartitions(remote, actions.grow_to)], request_timeout=TIMEOUT
            )
            _result(fut, "INVALID_PARTITIONS")
        ops = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in sorted(actions.set_configs.items())
        ] + [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
            for k in actions.delete_configs
        ]
        if ops:
            res = ConfigResource(ResourceType.TOPIC, remote, incremental_configs=ops)
            _result(self.target_admin.incremental_alter_configs([res], request_timeout=TIMEOUT))
        return count


def _result(futures: dict[Any, Any], tolerated: str = "") -> None:
    for f in futures.values():
        try:
            f.result()
        except KafkaException as exc:
            if not tolerated or exc.args[0].name() != tolerated:
                raise
