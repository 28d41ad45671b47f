"""The share-partition states of one ``__share_group_state`` partition (Kafka's
``ShareCoordinatorShard``), sans-IO.

Each share-partition key (group id, topic id, partition) has a state: snapshot epoch,
state epoch, leader epoch, start offset and state batches. The share-partition leaders
read and write it through five operations; each answers with the records to append
and the result to give once they are written. The state changes only by
:meth:`ShareCoordinatorShard.replay` of those records (after their append, or when a
partition loads), so replaying a partition's log rebuilds exactly the state that was.

Rules, as Kafka 4's shard has them:

- A negative partition: INVALID_REQUEST. A topic or partition the metadata does not
  have: UNKNOWN_TOPIC_OR_PARTITION.
- InitializeShareGroupState writes a snapshot (fresh batches, leader epoch -1, the
  next snapshot epoch, created and written now); a state epoch below the one held is
  FENCED_STATE_EPOCH.
- ReadShareGroupState and WriteShareGroupState of a key never initialized:
  INVALID_REQUEST. A leader epoch below the highest seen (-1: not given) is
  FENCED_LEADER_EPOCH; a write's state epoch below the one held (-1: not given) is
  FENCED_STATE_EPOCH. A read with a newer leader epoch writes it (a record with no
  batches); a write keeps the state and leader epochs held.
- A write is a ShareUpdate with its batches merged (start offset -1: unchanged), or,
  once more than ``snapshot.update.records.per.snapshot`` updates followed the last
  snapshot, a ShareSnapshot of the whole merged state with the next snapshot epoch (its
  creation time kept, written now).
- DeleteShareGroupState writes a tombstone (nothing for a key without state).
- ReadShareGroupStateSummary answers the state epoch, leader epoch and start offset
  (-1 and epochs 0 for a key never initialized).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable

from broker_py.coordinator.share.share_coordinator_records import (
    SharePartitionKey,
    ShareRecord,
    ShareSnapshot,
    ShareTombstone,
    ShareUpdate,
    StateBatch,
)
from broker_py.coordinator.share.state_batch_combiner import combine
from logstore.protocol.error_codes import ErrorCode

UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."

# The partitions a topic id has in the metadata, None for a topic it does not have.
TopicPartitions = Callable[[uuid.UUID], "int | None"]


@dataclasses.dataclass(frozen=True)
class ShareGroupOffset:
    """The state held for one share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """An operation's records to append, and its answer once they are written."""

    records: list[ShareRecord]
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    # Read and summary answers.
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    state_batches: tuple[StateBatch, ...] = ()


def failed(error: ErrorCode, message: str | None = None) -> Outcome:
    """An operation's failure: no records, ``error`` with ``message`` (by default the
    error's own description)."""
    return Outcome([], error, message if message is not None else error.description)


class ShareCoordinatorShard:
    def __init__(
        self,
        updates_per_snapshot: int,
        topic_partitions: TopicPartitions,
        now_ms: Callable[[], int],
    ) -> None:
        """``topic_partitions``: the metadata's partition count of a topic id;
        ``now_ms``: the clock of the snapshots' timestamps."""
        self.updates_per_snapshot = updates_per_snapshot
        self._topic_partitions = topic_partitions
        self._now_ms = now_ms
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        # Updates replayed since the last snapshot (absent until the first one).
        self.update_counts: dict[SharePartitionKey, int] = {}

    # ---- replay ----

    def replay(self, record: ShareRecord) -> None:
        key = record.key
        if isinstance(record, ShareTombstone):
            self.states.pop(key, None)
            self.leader_epochs.pop(key, None)
            self.state_epochs.pop(key, None)
            self.update_counts.pop(key, None)
        elif isinstance(record, ShareSnapshot):
            self._raise_leader_epoch(key, record.leader_epoch)
            held = self.state_epochs.get(key)
            if held is None or held < record.state_epoch:
                self.state_epochs[key] = record.state_epoch
            self.states[key] = ShareGroupOffset(
                record.snapshot_epoch,
                record.state_epoch,
                record.leader_epoch,
                record.start_offset,
                record.state_batches,
                record.create_timestamp,
                record.write_timestamp,
            )
            if self.update_counts.get(key, -1) >= self.updates_per_snapshot:
                self.update_counts[key] = 0
        else:
            self._raise_leader_epoch(key, record.leader_epoch)
            current = self.states.get(key)
            if current is None:
                self.states[key] = ShareGroupOffset(
                    record.snapshot_epoch,
                    -1,
                    record.leader_epoch,
                    record.start_offset,
                    record.state_batches,
                )
            else:
                start = current.start_offset if record.start_offset == -1 else record.start_offset
                self.states[key] = ShareGroupOffset(
                    current.snapshot_epoch,
                    current.state_epoch,
                    current.leader_epoch if record.leader_epoch == -1 else record.leader_epoch,
                    start,
                    combine(current.state_batches, record.state_batches, start),
                    current.create_timestamp,
                    current.write_timestamp,
                )
            count = self.update_counts.get(key)
            self.update_counts[key] = 0 if count is None else count + 1

    def replay_all(self, records: Iterable[ShareRecord]) -> None:
        for record in records:
            self.replay(record)

    def _raise_leader_epoch(self, key: SharePartitionKey, epoch: int) -> None:
        held = self.leader_epochs.get(key)
        if held is None or held < epoch:
            self.leader_epochs[key] = epoch

    # ---- checks ----

    def _unknown(self, key: SharePartitionKey) -> bool:
        partitions = self._topic_partitions(key.topic_id)
        return partitions is None or key.partition >= partitions

    def _fenced_leader(self, key: SharePartitionKey, leader_epoch: int) -> bool:
        held = self.leader_epochs.get(key)
        return leader_epoch != -1 and held is not None and held > leader_epoch

    # ---- operations ----

    def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> Outcome:
        if key.partition < 0:
            return failed(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        held = self.state_epochs.get(key)
        if held is not None and held > state_epoch:
            return failed(ErrorCode.FENCED_STATE_EPOCH)
        if self._unknown(key):
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.states.get(key)
        snapshot_epoch = 0 if current is None else current.snapshot_epoch + 1
        now = self._now_ms()
        return Outcome(
            [ShareSnapshot(key, snapshot_epoch, state_epoch, -1, start_offset, (), now, now)]
        )

    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
    ) -> Outcome:
        if key.partition < 0:
            return failed(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if key not in self.states:
            return failed(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
        if self._fenced_leader(key, leader_epoch):
            return failed(ErrorCode.FENCED_LEADER_EPOCH)
        held = self.state_epochs.get(key)
        if state_epoch != -1 and held is not None and held > state_epoch:
            return failed(ErrorCode.FENCED_STATE_EPOCH)
        if self._unknown(key):
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        # Only an initialization sets the state epoch and only a read the leader epoch: a
        # write keeps those held (Kafka 4.1, KAFKA-19456).
        current = self.states[key]
        return Outcome(
            [
                self._state_record(
                    key, current.state_epoch, current.leader_epoch, start_offset, batches
                )
            ]
        )

    def _state_record(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
    ) -> ShareRecord:
        """A snapshot of the merged state when enough updates followed the last one,
        else an update with the write's batches (merged among themselves)."""
        new = tuple(batches)
        current = self.states.get(key)
        now = self._now_ms()
        if current is None:
            batches = combine((), new, start_offset)
            return ShareSnapshot(key, 0, state_epoch, leader_epoch, start_offset, batches, now, now)
        if self.update_counts.get(key, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            return ShareSnapshot(
                key,
                current.snapshot_epoch + 1,
                current.state_epoch if state_epoch == -1 else state_epoch,
                current.leader_epoch if leader_epoch == -1 else leader_epoch,
                start,
                combine(current.state_batches, new, start),
                current.create_timestamp,
                now,
            )
        return ShareUpdate(
            key,
            current.snapshot_epoch,
            leader_epoch,
            start_offset,
            combine((), new, start_offset),
        )

    def read_state(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        if key.partition < 0:
            return failed(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        current = self.states.get(key)
        if current is None:
            return failed(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
        if self._fenced_leader(key, leader_epoch):
            return failed(ErrorCode.FENCED_LEADER_EPOCH)
        if self._unknown(key):
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        records: list[ShareRecord] = []
        if leader_epoch != -1 and self.leader_epochs.get(key) != leader_epoch:
            records.append(
                self._state_record(key, current.state_epoch, leader_epoch, current.start_offset, ())
            )
        return Outcome(
            records,
            state_epoch=current.state_epoch,
            leader_epoch=current.leader_epoch,
            start_offset=current.start_offset,
            state_batches=current.state_batches,
        )

    def read_state_summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        if key.partition < 0:
            return failed(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown(key):
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.states.get(key)
        if current is None:
            return Outcome([], leader_epoch=0)
        return Outcome(
            [],
            state_epoch=current.state_epoch,
            leader_epoch=current.leader_epoch,
            start_offset=current.start_offset,
        )

    def delete_topics(self, topic_ids: set[uuid.UUID]) -> list[ShareRecord]:
        """Tombstones for every state of those topics (Kafka's cleanup of the share state
        of deleted topics)."""
        return [ShareTombstone(key) for key in self.states if key.topic_id in topic_ids]

    def snapshot_all(self) -> list[ShareRecord]:
        """A snapshot of every state held (the next snapshot epoch, written now): once
        appended, every record before them is redundant, and a log that starts with
        them replays to the same states."""
        now = self._now_ms()
        return [
            ShareSnapshot(
                key,
                s.snapshot_epoch + 1,
                self.state_epochs.get(key, s.state_epoch),
                self.leader_epochs.get(key, s.leader_epoch),
                s.start_offset,
                s.state_batches,
                s.create_timestamp,
                now,
            )
            for key, s in self.states.items()
        ]

    def delete_state(self, key: SharePartitionKey) -> Outcome:
        if key.partition < 0:
            return failed(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)
        if self._unknown(key):
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if key not in self.states:
            return Outcome([])
        return Outcome([ShareTombstone(key)])
