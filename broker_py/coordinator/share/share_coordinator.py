"""The share coordinator (Kafka's ``ShareCoordinatorService``): the durable state of share
partitions in ``__share_group_state``, for the share-partition leaders of the cluster.

- ``__share_group_state`` is created on first use with
  ``share.coordinator.state.topic.num.partitions`` partitions and its replication
  factor, min ISR and segment size from the ``share.coordinator.state.topic.*`` keys,
  ``cleanup.policy=delete`` and ``retention.ms=-1`` as Kafka creates it: compaction
  would keep only the last of the ShareUpdate records following a snapshot. A
  share-partition key lives in partition
  :func:`~broker_py.coordinator.share.share_coordinator_records.state_partition_for` of
  ``"group:topicId:partition"``.
- The keys of a partition are this broker's while it leads that partition: on election
  a :class:`~broker_py.coordinator.share.share_coordinator_shard.ShareCoordinatorShard`
  is rebuilt by replaying the partition's log (requests get COORDINATOR_LOAD_IN_PROGRESS
  meanwhile), on resignation it is dropped (NOT_COORDINATOR). An empty partition is owned
  at once.
- An operation runs against its partition's shard, one at a time per partition: the
  shard answers with records, they are appended as one batch with acks=-1
  (``share.coordinator.write.timeout.ms``), and only once written are they replayed
  and the answer given. A failed append answers the coordinator error Kafka maps it to.
- Pruning, every ``share.coordinator.state.topic.prune.interval.ms``: a partition led
  here and written to since its last prune gets a snapshot of every state it holds
  (one batch), then its records before them are deleted (the log start offset moves
  up), so a load replays at most one snapshot per key and the updates after it. The
  states of topics the metadata no longer has (deleted topics) get tombstones in the
  same batch, once the metadata is known (``metadata_ready``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import logstore
from broker_py.common.internal_topics import SHARE_GROUP_STATE_TOPIC
from broker_py.coordinator.operation_errors import operation_error
from broker_py.coordinator.partition_loads import PartitionLoads
from broker_py.coordinator.share.share_coordinator_records import (
    InvalidShareRecordError,
    SharePartitionKey,
    StateBatch,
    deserialize,
    serialize,
    state_partition_for,
)
from broker_py.coordinator.share.share_coordinator_shard import (
    Outcome,
    ShareCoordinatorShard,
    failed,
)
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.partition_writer import PartitionWriter, TopicMetadata

log = logging.getLogger(__name__)


def append_error(error: ErrorCode) -> ErrorCode:
    """A failed append of share state as the share-partition leader gets it: a
    coordinator's operation error, NOT_ENOUGH_REPLICAS_AFTER_APPEND retried as
    COORDINATOR_NOT_AVAILABLE too."""
    if error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return operation_error(error)


class ShareCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        writer: PartitionWriter,
        topic_partitions: Callable[[uuid.UUID], int | None],
        *,
        cluster: bool,
        metadata_ready: Callable[[], bool] = lambda: True,
        time: Time = SYSTEM_TIME,
    ) -> None:
        """``topic_partitions(topic id)``: how many partitions the metadata gives the
        topic, None when it has no such topic; ``cluster``: this broker is one of a
        cluster (a key whose partition does not exist yet is nobody's);
        ``metadata_ready()``: the metadata holds every topic (a topic missing from it
        was deleted)."""
        self.config = config
        self._writer = writer
        self._topic_partitions = topic_partitions
        self.cluster = cluster
        self._metadata_ready = metadata_ready
        self.time = time
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self.loads = PartitionLoads(
            SHARE_GROUP_STATE_TOPIC, writer, self._load, self.shards.__contains__, self._own_empty
        )
        self.loading = self.loads.loading
        self._locks: dict[int, asyncio.Lock] = {}
        # partition -> its log end offset after its last prune
        self._pruned_at: dict[int, int] = {}
        self._prune_task: asyncio.Task[None] | None = None
        self.active = False

    # ---- lifecycle ----

    async def start(self) -> None:
        self._writer.add_leadership_listener(self._leadership_changed)
        for p in self.led_partitions():
            await self._load(p)
        self._prune_task = asyncio.get_running_loop().create_task(
            self._prune_loop(), name=f"prune-{SHARE_GROUP_STATE_TOPIC}"
        )
        self.active = True

    async def stop(self) -> None:
        self.active = False
        self._writer.remove_leadership_listener(self._leadership_changed)
        tasks = self.loads.cancel()
        if self._prune_task is not None:
            self._prune_task.cancel()
            tasks.append(self._prune_task)
            self._prune_task = None
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---- the topic ----

    def ensure_topic(self) -> TopicMetadata:
        return self._writer.ensure_topic(
            SHARE_GROUP_STATE_TOPIC,
            self.config["share.coordinator.state.topic.num.partitions"],
            {
                "cleanup.policy": "delete",
                "retention.ms": "-1",
                "compression.type": "producer",
                "segment.bytes": str(self.config["share.coordinator.state.topic.segment.bytes"]),
                "min.insync.replicas": str(self.config["share.coordinator.state.topic.min.isr"]),
            },
        )

    def num_partitions(self) -> int:
        topic = self._writer.topic(SHARE_GROUP_STATE_TOPIC)
        if topic is not None:
            return topic.partitions
        return int(self.config["share.coordinator.state.topic.num.partitions"])

    def partition_for(self, key: SharePartitionKey) -> int:
        return state_partition_for(key, self.num_partitions())

    def led_partitions(self) -> list[int]:
        return self.loads.led_partitions()

    # ---- leadership ----

    def _leadership_changed(
        self, leaders: list[tuple[str, int]], followers: list[tuple[str, int]]
    ) -> None:
        for topic, index in leaders:
            if topic == SHARE_GROUP_STATE_TOPIC:
                self.on_election(index)
        for topic, index in followers:
            if topic == SHARE_GROUP_STATE_TOPIC:
                self.on_resignation(index)

    def _new_shard(self) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(
            self.config["share.coordinator.snapshot.update.records.per.snapshot"],
            self._topic_partitions,
            self.time.milliseconds,
        )

    def _own_empty(self, p: int) -> None:
        self.shards[p] = self._new_shard()

    def on_election(self, p: int) -> None:
        """This broker now leads ``__share_group_state`` partition ``p``: its states load
        (at once when the partition is empty)."""
        self.loads.on_election(p)

    async def _load(self, p: int) -> None:
        """Rebuilds partition ``p``'s shard by replaying its log from start to end."""
        read = await self.loads.read(p, self.config["share.coordinator.load.buffer.size"])
        if read is None:
            return
        records, _open_txns = read
        shard = self._new_shard()
        for key, value in records:
            try:
                record = deserialize(key, value)
            except InvalidShareRecordError as e:
                log.error("skipping unreadable %s record: %s", SHARE_GROUP_STATE_TOPIC, e)
                continue
            if record is None:
                log.warning(
                    "skipping a %s record of unknown type %d",
                    SHARE_GROUP_STATE_TOPIC,
                    int.from_bytes(key[:2], "big", signed=True),
                )
                continue
            shard.replay(record)
        self.loading.discard(p)
        self.shards[p] = shard
        if shard.states:
            log.info(
                "loaded %d share-partition states from %s-%d",
                len(shard.states),
                SHARE_GROUP_STATE_TOPIC,
                p,
            )

    def on_resignation(self, p: int) -> None:
        """This broker no longer leads partition ``p``: its states go."""
        self.loads.on_resignation(p)
        self._pruned_at.pop(p, None)
        shard = self.shards.pop(p, None)
        if shard is not None and shard.states:
            log.info(
                "dropped %d share-partition states of %s-%d: this broker no longer leads it",
                len(shard.states),
                SHARE_GROUP_STATE_TOPIC,
                p,
            )

    # ---- pruning ----

    async def _prune_loop(self) -> None:
        while True:
            await asyncio.sleep(
                self.config["share.coordinator.state.topic.prune.interval.ms"] / 1000
            )
            for p in sorted(self.shards):
                try:
                    await self.prune(p)
                except KafkaError as e:  # no longer the leader, ...: the next round retries
                    log.warning("pruning %s-%d: %s", SHARE_GROUP_STATE_TOPIC, p, e)
                except Exception:  # the loop goes on for the other partitions
                    log.exception("pruning %s-%d", SHARE_GROUP_STATE_TOPIC, p)

    async def prune(self, p: int) -> int | None:
        """Snapshots every state of partition ``p`` and deletes the records before them;
        the new log start offset, None when there was nothing to prune or the snapshots
        were not written."""
        lock = self._locks.setdefault(p, asyncio.Lock())
        async with lock:
            shard = self.shards.get(p)
            partition = self._writer.partition((SHARE_GROUP_STATE_TOPIC, p))
            if shard is None or partition is None or not partition.is_leader:
                return None
            below = partition.log_end_offset
            gone: set[uuid.UUID] = set()
            if self._metadata_ready():
                topics = {key.topic_id for key in shard.states}
                gone = {t for t in topics if self._topic_partitions(t) is None}
            if not gone and (
                below <= partition.log_start_offset or self._pruned_at.get(p) == below
            ):
                return None
            records = shard.delete_topics(gone) + [
                r for r in shard.snapshot_all() if r.key.topic_id not in gone
            ]
            if records:
                error = await self._append(p, [serialize(r) for r in records])
                if error != ErrorCode.NONE or self.shards.get(p) is not shard:
                    return None
                shard.replay_all(records)
            self._pruned_at[p] = partition.log_end_offset
            start = partition.delete_records_on_leader(min(below, partition.high_watermark))
            log.debug("pruned %s-%d below %d", SHARE_GROUP_STATE_TOPIC, p, start)
            return start

    # ---- operations ----

    async def _run(
        self, key: SharePartitionKey, operation: Callable[[ShareCoordinatorShard], Outcome]
    ) -> Outcome:
        """Runs ``operation`` on the shard of ``key``'s partition, appends its records and
        replays them once written."""
        if not self.active:
            return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            topic = self.ensure_topic()
        except KafkaError as e:
            return failed(e.errno if self.cluster else ErrorCode.COORDINATOR_NOT_AVAILABLE)
        p = state_partition_for(key, topic.partitions)
        if not self.cluster and p not in self.shards and p not in self.loading:
            self.on_election(p)  # a broker alone leads the partitions it just created
        error = self.loads.coordinator_error(p)
        if error is not None:
            return failed(error)
        lock = self._locks.setdefault(p, asyncio.Lock())
        async with lock:
            shard = self.shards.get(p)
            if shard is None:
                return failed(self.loads.coordinator_error(p) or ErrorCode.NOT_COORDINATOR)
            outcome = operation(shard)
            if not outcome.records:
                return outcome
            error = await self._append(p, [serialize(r) for r in outcome.records])
            if error != ErrorCode.NONE:
                return failed(error)
            if self.shards.get(p) is shard:
                shard.replay_all(outcome.records)
            return outcome

    async def _append(self, p: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        now = self.time.milliseconds()
        data = logstore.encode_batch([(k, v, [], now) for k, v in records])
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def appended(error: ErrorCode, message: str | None) -> None:
            if error != ErrorCode.NONE:
                log.warning(
                    "append to %s-%d failed (%s): %s",
                    SHARE_GROUP_STATE_TOPIC,
                    p,
                    error.name,
                    message,
                )
            if not done.done():
                done.set_result(append_error(error))

        self._writer.append(
            (SHARE_GROUP_STATE_TOPIC, p),
            data,
            self.config["share.coordinator.write.timeout.ms"],
            appended,
        )
        return await done

    async def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> Outcome:
        return await self._run(key, lambda s: s.initialize_state(key, state_epoch, start_offset))

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        return await self._run(key, lambda s: s.read_state(key, leader_epoch))

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
    ) -> Outcome:
        batches = tuple(batches)
        return await self._run(
            key, lambda s: s.write_state(key, state_epoch, leader_epoch, start_offset, batches)
        )

    async def delete_state(self, key: SharePartitionKey) -> Outcome:
        return await self._run(key, lambda s: s.delete_state(key))

    async def read_state_summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        return await self._run(key, lambda s: s.read_state_summary(key, leader_epoch))
