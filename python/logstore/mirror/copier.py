"""The record copier: reads the assigned source partitions with a consumer of the flow's
source group and writes each record to the same partition of its remote topic, keeping
key, value, headers and timestamp; emits MM2 offset syncs from the target offsets the
producer reports.

Delivery:

- at-least-once (default): the idempotent producer writes; the source group's offset of
  a partition is committed (every ``offset.flush.interval.ms``, on revocation and at
  shutdown) only up to records the target acknowledged. After a crash the records
  since the last commit are copied again.
- exactly-once (``exactly.once.source.support = enabled``): :meth:`Copier.transfer_exactly_once`
  writes each polled batch in one target transaction together with the source offsets it
  came from (:mod:`.source_offsets`, topic ``mm2-offsets.<source>.internal``); on
  assignment, positions come from that topic read with read_committed after
  ``init_transactions`` aborted whatever this instance's previous incarnation left open.
  A failed transaction is aborted and its partitions are rewound to the batch's start.

Offset syncs: the producer reports the target offset of the first and last record of
each run of consecutive source offsets in a batch (two delivery callbacks per run, not
one per record); :meth:`.offset_syncs.PartitionState.update_run` applies MM2's rule to the
whole run at once. Syncs are sent at the end of each loop turn (in
exactly-once mode, after the transaction committed); the newest other pair of each
partition at each periodic commit.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from logstore.mirror import source_offsets
from logstore.mirror.offset_syncs import OffsetSync, PartitionState
from logstore.mirror.sensors import Sensors
from logstore.mirror.topic_sync import TopicSync

TP = tuple[str, int]
BATCH = 5000
TXN_TIMEOUT_S = 60.0
PRODUCE_WAIT_S = 300.0  # a target that takes nothing for this long fails the flow


class MirrorError(RuntimeError):
    """The copy cannot go on (a fatal producer error); the process exits and a restart
    resumes from the committed progress."""


class _Run:
    __slots__ = ("topic", "partition", "remote", "first", "count", "first_down", "timestamp")

    def __init__(self, topic: str, partition: int, remote: str, first: int) -> None:
        self.topic = topic
        self.partition = partition
        self.remote = remote
        self.first = first
        self.count = 0
        self.first_down = -1
        self.timestamp = 0


class Copier:
    def __init__(
        self,
        *,
        source_alias: str,
        consumer: Consumer,
        producer: Producer,
        topics: TopicSync,
        sensors: Sensors,
        offset_lag_max: int,
        sync_producer: Producer | None,
        offset_syncs_topic: str,
        offsets_topic: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source_alias = source_alias
        self.consumer = consumer
        self.producer = producer
        self.topics = topics
        self.sensors = sensors
        self.offset_lag_max = offset_lag_max
        self.sync_producer = sync_producer
        self.offset_syncs_topic = offset_syncs_topic
        self.offsets_topic = offsets_topic  # set in exactly-once mode
        self.clock = clock
        self.states: dict[TP, PartitionState] = {}
        self.pending: dict[TP, list[OffsetSync]] = {}
        self.delayed: dict[TP, OffsetSync] = {}
        self.next_offset: dict[TP, int] = {}  # confirmed on the target, not yet committed
        self.committed: dict[TP, int] = {}
        self.error: KafkaError | None = None
        self.copied = 0

    # -- producing ---------------------------------------------------------------------

    def _on_first(self, run: _Run, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.error = self.error or err
        else:
            run.first_down = msg.offset()

    def _on_last(self, run: _Run, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.error = self.error or err
            return
        tp = (run.topic, run.partition)
        last_up = run.first + run.count - 1
        last_down = msg.offset()
        first_down = last_down if run.count == 1 else run.first_down
        state = self.states.get(tp)
        if state is None:
            state = self.states[tp] = PartitionState(self.offset_lag_max)
        fired: list[tuple[int, int]] = []
        if first_down >= 0 and last_down - first_down == run.count - 1:
            fired = state.update_run(run.first, first_down, run.count)
        else:
            if first_down >= 0 and state.update(run.first, first_down):
                fired.append((run.first, first_down))
            if run.count > 1 and state.update(last_up, last_down):
                fired.append((last_up, last_down))
        if fired:
            queue = self.pending.setdefault(tp, [])
            queue += [OffsetSync(run.topic, run.partition, u, d) for u, d in fired]
        if not fired or fired[-1] != (last_up, last_down):
            self.delayed[tp] = OffsetSync(run.topic, run.partition, last_up, last_down)
        else:
            self.delayed.pop(tp, None)
        self.next_offset[tp] = last_up + 1
        self.sensors.acknowledged(run.remote, run.partition, run.timestamp)

    def _send(self, topic: str, partition: int, remote: str, m: Any, cb: Any) -> None:
        ts_type, ts = m.timestamp()
        try:
            self.producer.produce(
                remote,
                m.value(),
                m.key(),
                partition,
                on_delivery=cb,
                timestamp=ts if ts_type else 0,
                headers=m.headers(),
            )
        except (BufferError, KafkaException):
            self._produce(topic, partition, remote, m, cb)

    def _produce(self, topic: str, partition: int, remote: str, m: Any, cb: Any) -> None:
        """produce() that waits while the producer's queue is full (the target's pace)
        and grows the remote topic when the partition is new; gives up after
        :data:`PRODUCE_WAIT_S` seconds."""
        ts_type, ts = m.timestamp()
        deadline = time.monotonic() + PRODUCE_WAIT_S
        while time.monotonic() < deadline:
            try:
                self.producer.produce(
                    remote,
                    m.value(),
                    m.key(),
                    partition,
                    on_delivery=cb,
                    timestamp=ts if ts_type else 0,
                    headers=m.headers(),
                )
                return
            except BufferError:
                self.producer.poll(0.005)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                    raise
                # a partition the producer has not seen: grow the remote topic if the
                # source grew first, and refresh the producer's metadata
                self.topics.ensure_partition(topic, partition)
                self.producer.list_topics(remote, timeout=10)
                self.producer.poll(0.05)
        raise MirrorError(f"could not produce to {remote} [{partition}]")

    @staticmethod
    def check_consumed(msgs: list[Any]) -> None:
        """Raises MirrorError for a fatal consumer error among ``msgs`` (e.g. another
        process runs with this one's static member id); other errors (a topic deleted
        meanwhile) are skipped by :meth:`copy`."""
        for m in msgs:
            err = m.error()
            if err is not None and (err.fatal() or err.code() == KafkaError.FENCED_INSTANCE_ID):
                raise MirrorError(
                    f"the source consumer failed: {err} (does another process of this flow "
                    "run with the same mirror.instance.id?)"
                )

    def copy(self, msgs: list[Any]) -> int:
        """Produces ``msgs`` (one consume() result); returns how many were records.

        consume() returns each partition's records as contiguous stretches; a stretch
        is split into runs of consecutive offsets, each with a delivery callback on its
        first and last record."""
        msgs = [m for m in msgs if m.error() is None]
        total = len(msgs)
        if not total:
            return 0
        offs = [m.offset() for m in msgs]
        parts = [m.partition() for m in msgs]
        topics = [m.topic() for m in msgs]
        produce = self.producer.produce
        i = 0
        while i < total:
            topic, partition = topics[i], parts[i]
            known = self.topics.topics.get(topic)
            remote = known[0] if known else self.topics.remote(topic)
            j = i + 1  # [i, j): this stretch of one partition
            while j < total and parts[j] == partition and topics[j] == topic:
                j += 1
            start = i
            while start < j:
                end = start + 1  # [start, end): a run of consecutive offsets
                while end < j and offs[end] == offs[end - 1] + 1:
                    end += 1
                run = _Run(topic, partition, remote, offs[start])
                run.count = end - start
                last = msgs[end - 1]
                run.timestamp = last.timestamp()[1]
                if end - start > 1:
                    cb = functools.partial(self._on_first, run)
                    self._send(topic, partition, remote, msgs[start], cb)
                    for m in msgs[start + 1 : end - 1]:
                        ts_type, ts = m.timestamp()
                        try:
                            produce(
                                remote,
                                m.value(),
                                m.key(),
                                partition,
                                timestamp=ts if ts_type else 0,
                                headers=m.headers(),
                            )
                        except (BufferError, KafkaException):
                            self._produce(topic, partition, remote, m, None)
                self._send(topic, partition, remote, last, functools.partial(self._on_last, run))
                start = end
            # MM2's byte count: the records' values (len(Message) is its value's length)
            size = sum(map(len, msgs[i:j]))
            oldest, newest = msgs[i].timestamp()[1], msgs[j - 1].timestamp()[1]
            self.sensors.copied(remote, partition, j - i, size, oldest, newest)
            i = j
        self.copied += total
        self.producer.poll(0)
        if self.error is not None:
            raise MirrorError(f"the target refused a record: {self.error}")
        return total

    # -- offset syncs ------------------------------------------------------------------

    def send_syncs(self) -> None:
        if self.sync_producer is None:
            self.pending.clear()
            return
        for syncs in self.pending.values():
            for sync in syncs:
                self._send_sync(sync)
        self.pending.clear()
        self.sync_producer.poll(0)

    def _send_sync(self, sync: OffsetSync) -> None:
        assert self.sync_producer is not None
        for _ in range(600):
            try:
                self.sync_producer.produce(
                    self.offset_syncs_topic, sync.value(), sync.key(), partition=0
                )
                return
            except BufferError:
                self.sync_producer.poll(0.05)
        raise MirrorError("the offset-syncs producer's queue stays full")

    def promote_delayed(self) -> None:
        for tp, sync in self.delayed.items():
            self.pending.setdefault(tp, []).append(sync)
        self.delayed.clear()

    # -- at-least-once commits ---------------------------------------------------------

    def commit(self, partitions: list[TP] | None = None, wait: bool = False) -> None:
        """Commits the source group's offsets up to what the target acknowledged."""
        todo = [
            TopicPartition(t, p, off)
            for (t, p), off in self.next_offset.items()
            if (partitions is None or (t, p) in partitions) and self.committed.get((t, p)) != off
        ]
        if not todo:
            return
        try:
            self.consumer.commit(offsets=todo, asynchronous=not wait)
        except KafkaException as exc:
            if exc.args[0].code() not in (
                KafkaError._NO_OFFSET,
                KafkaError.REBALANCE_IN_PROGRESS,
                KafkaError.ILLEGAL_GENERATION,
                KafkaError.UNKNOWN_MEMBER_ID,
            ):
                raise
            return
        for tp in todo:
            self.committed[(tp.topic, tp.partition)] = tp.offset

    def forget(self, partitions: list[TP]) -> None:
        for tp in partitions:
            self.states.pop(tp, None)
            self.next_offset.pop(tp, None)
            self.committed.pop(tp, None)
            self.delayed.pop(tp, None)
            self.pending.pop(tp, None)

    # -- exactly-once ------------------------------------------------------------------

    def transfer_exactly_once(self, msgs: list[Any]) -> int:
        """One transaction: ``msgs`` and, per source partition, the offset of its last
        record in :attr:`offsets_topic`. On failure the transaction is aborted and the
        partitions rewound to their first offset in ``msgs``."""
        assert self.offsets_topic is not None
        firsts: dict[TP, int] = {}
        lasts: dict[TP, int] = {}
        for m in msgs:
            if m.error() is None:
                tp = (m.topic(), m.partition())
                firsts.setdefault(tp, m.offset())
                lasts[tp] = m.offset()
        if not lasts:
            return 0
        self.producer.begin_transaction()
        try:
            n = self.copy(msgs)
            for (t, p), off in lasts.items():
                self.producer.produce(
                    self.offsets_topic,
                    source_offsets.value(off),
                    source_offsets.key(self.source_alias, t, p),
                )
            self.producer.flush(TXN_TIMEOUT_S)
            if self.error is not None:
                raise MirrorError(f"the target refused a record: {self.error}")
            self.producer.commit_transaction(TXN_TIMEOUT_S)
        except (KafkaException, MirrorError) as exc:
            self._abort(exc, firsts)
            return 0
        self.send_syncs()
        for tp, off in lasts.items():
            self.next_offset[tp] = off + 1
        self.commit()
        return n

    def _abort(self, exc: Exception, firsts: dict[TP, int]) -> None:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None and err.fatal():
            raise MirrorError(f"the transactional producer failed: {err}") from None
        try:
            self.producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as abort_exc:
            raise MirrorError(f"could not abort a failed transaction: {abort_exc}") from None
        self.error = None
        for (t, p), off in firsts.items():
            self.consumer.seek(TopicPartition(t, p, off))
        self.forget(list(firsts))

    def exactly_once_positions(
        self, stored: dict[tuple[str, str, int], int], partitions: list[Any]
    ) -> list[Any]:
        """The assignment ``partitions`` with each position set from the stored offsets
        (the last copied offset + 1); the group's committed offset where none is stored."""
        out = []
        for tp in partitions:
            off = stored.get((self.source_alias, tp.topic, tp.partition))
            out.append(
                TopicPartition(
                    tp.topic, tp.partition, off + 1 if off is not None else OFFSET_STORED
                )
            )
        return out
