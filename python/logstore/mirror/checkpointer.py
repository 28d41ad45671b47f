"""Checkpoints and group offset sync for one flow.

Every ``emit.checkpoints.interval.seconds``: the offset-syncs topic is read to its end
into an :class:`.offset_syncs.OffsetSyncStore`; for each source consumer group passing
the group filter (never the mirror's own group), its committed offsets on the replicated
partitions this process copies are translated and, when changed, written as
:class:`.checkpoints.Checkpoint` records to ``<source>.checkpoints.internal`` on the
target. Several mirror processes each checkpoint the partitions assigned to them.

Every ``sync.group.offsets.interval.seconds`` (when ``sync.group.offsets.enabled``): the
latest checkpoints are committed to the same group on the target, as
:func:`.group_plan.offsets_to_write` allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

try:
    from confluent_kafka import ConsumerGroupTopicPartitions
except ImportError:  # pragma: no cover - older confluent-kafka
    from confluent_kafka.admin import ConsumerGroupTopicPartitions  # type: ignore

from logstore.mirror.checkpoints import Checkpoint
from logstore.mirror.clients import TopicReader
from logstore.mirror.config import Flow
from logstore.mirror.group_plan import offsets_to_write
from logstore.mirror.offset_syncs import OffsetSync, OffsetSyncStore
from logstore.mirror.sensors import Sensors
from logstore.mirror.structs import FormatError
from logstore.mirror.topic_sync import TopicSync

TIMEOUT = 30.0


class Checkpointer:
    def __init__(
        self,
        flow: Flow,
        source_admin: AdminClient,
        target_admin: AdminClient,
        producer: Producer,
        syncs: TopicReader,
        topics: TopicSync,
        sensors: Sensors,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.flow = flow
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.producer = producer
        self.syncs = syncs
        self.topics = topics
        self.sensors = sensors
        self.clock = clock
        self.store = OffsetSyncStore()
        self.group_filter = flow.group_filter()
        self.checkpoints_topic = flow.policy().checkpoints_topic(flow.source)
        self.emitted: dict[tuple[str, str, int], Checkpoint] = {}

    def _read_syncs(self) -> None:
        for m in self.syncs.read_to_end():
            try:
                self.store.add(OffsetSync.decode(m.key(), m.value()))
            except FormatError:
                continue

    def _groups(self) -> list[str]:
        result = self.source_admin.list_consumer_groups(request_timeout=TIMEOUT).result()
        return sorted(
            g.group_id
            for g in result.valid
            if g.group_id != self.flow.group_id and self.group_filter.should_replicate(g.group_id)
        )

    def _group_offsets(
        self, adm: AdminClient, group: str
    ) -> dict[tuple[str, int], tuple[int, str]]:
        req = [ConsumerGroupTopicPartitions(group)]
        try:
            got = adm.list_consumer_group_offsets(req, request_timeout=TIMEOUT)[group].result()
        except KafkaException:
            return {}
        return {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in got.topic_partitions
            if tp.error is None and tp.offset >= 0
        }

    def emit(self, owned: set[tuple[str, int]]) -> int:
        """Writes the changed checkpoints of ``owned`` source partitions; returns how many."""
        self._read_syncs()
        written = 0
        for group in self._groups():
            read_at = self.clock()
            for (topic, partition), (offset, metadata) in self._group_offsets(
                self.source_admin, group
            ).items():
                if (topic, partition) not in owned or topic not in self.topics.topics:
                    continue
                downstream = self.store.translate(topic, partition, offset)
                if downstream is None or downstream < 0:
                    continue
                remote = self.topics.topics[topic][0]
                cp = Checkpoint(group, remote, partition, offset, downstream, metadata)
                key = (group, remote, partition)
                if self.emitted.get(key) != cp:
                    self.producer.produce(self.checkpoints_topic, cp.value(), cp.key(), partition=0)
                    self.emitted[key] = cp
                    written += 1
                self.sensors.checkpointed(group, remote, partition, read_at)
        self.producer.poll(0)
        return written

    def sync_groups(self) -> int:
        """Commits translated offsets to idle groups on the target; returns how many
        partitions' offsets were written."""
        by_group: dict[str, dict[tuple[str, int], int]] = {}
        for (group, topic, partition), cp in self.emitted.items():
            by_group.setdefault(group, {})[(topic, partition)] = cp.downstream_offset
        written = 0
        for group, translated in sorted(by_group.items()):
            state = self._target_state(group)
            current = {
                tp: off for tp, (off, _) in self._group_offsets(self.target_admin, group).items()
            }
            todo = offsets_to_write(state, translated, current)
            if not todo:
                continue
            tps = [TopicPartition(t, p, off) for (t, p), off in sorted(todo.items())]
            fut = self.target_admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)], request_timeout=TIMEOUT
            )
            try:
                fut[group].result()
                written += len(tps)
            except KafkaException:
                continue  # the group became active meanwhile: next time
        return written

    def _target_state(self, group: str) -> str | None:
        try:
            desc: Any = self.target_admin.describe_consumer_groups(
                [group], request_timeout=TIMEOUT
            )[group].result()
        except KafkaException:
            return None
        if desc.members:
            return "STABLE"
        return str(desc.state.name)
