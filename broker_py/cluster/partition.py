"""One partition as this broker holds it (Kafka's ``cluster/Partition``): its log, and
the replication state the leader owns: leader epoch, assigned replicas, in-sync
replicas (ISR) and the high watermark.

Invariants (on the leader):
- high watermark ≤ the least log end offset (LEO) over the ISR, the leader included;
- the high watermark never moves back;
- the leader epoch only grows;
- while the ISR is smaller than ``min(min.insync.replicas, replication factor)`` the
  high watermark does not move (an acks=all produce then waits, and fails after its
  timeout), and an acks=all produce is refused before it appends.

A follower's LEO is known only from its fetches (:meth:`update_follower_fetch_state`,
:mod:`broker_py.cluster.replica`); the leader proposes ISR changes to the controller
(AlterPartition, one at a time), and the high watermark counts a proposed addition at
once, a removal only once committed;
a broker alone is its partitions' only replica, so there the high watermark follows
every append at once. Waiting requests (delayed produce and fetch) are completed
through the replica manager's purgatories, which :meth:`Partition.append_records_to_leader`
and :meth:`Partition.append_marker` notify through ``on_append``.

Transactions: the last stable offset (LSO) is the first offset of the earliest open
transaction, or the high watermark when none is open.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_py.cluster.replica import PendingIsrChange, Replica
from broker_py.cluster.truncation import EpochEndOffset, diverging_epoch
from broker_py.log.producer_state import CompletedTxn, ProducerEntry
from broker_py.log.transaction_index import AbortedTxn
from broker_py.log.unified_log import UnifiedLog
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)

if TYPE_CHECKING:
    from logstore import FileSlice
    from logstore._native import BytesLike


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        log: UnifiedLog,
        local_broker_id: int,
        on_append: Callable[[Partition], None] | None = None,
        min_insync_replicas: Callable[[], int] = lambda: 1,
    ) -> None:
        self.topic = topic
        self.index = index
        self.key = (topic, index)
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_epoch = -1
        self.partition_epoch = -1  # the state node's zkVersion the controller last sent
        self.leader_epoch_start_offset = -1
        self.leader_id = -1
        # Its log dir failed: it neither leads nor follows, and waiting produces answer
        # KAFKA_STORAGE_ERROR.
        self.offline = False
        self.assigned_replicas: list[int] = []
        self.isr: set[int] = set()
        # Derived from isr and assigned_replicas whenever either changes:
        # isr_full: every assigned replica is in sync; alone: the ISR is this broker only.
        self.isr_full = False
        self._alone = False
        # the followers as the leader sees them (their LEO from their fetches)
        self.remote_replicas: dict[int, Replica] = {}
        # The ISR change sent to the controller and not yet answered (one at a time), and
        # the replicas the high watermark waits for: the ISR plus a pending addition.
        self.pending_isr_change: PendingIsrChange | None = None
        self.maximal_isr: set[int] = set()
        # Sends a proposed ISR to the controller (AlterPartition); None: no controller to
        # ask (a broker alone), so the ISR is only what the controller says.
        self.alter_isr: Callable[[Partition, PendingIsrChange], None] | None = None
        # Whether a broker may join an ISR (alive in the metadata); None: any may.
        self.isr_eligible: Callable[[int], bool] | None = None
        # Read by everyone, changed only here (maybe_increment_leader_hw, make_leader).
        self.high_watermark = 0
        self._on_append = on_append
        self._min_insync_replicas = min_insync_replicas

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    # ---- leadership ----

    def make_leader(
        self, leader_epoch: int, isr: list[int], replicas: list[int], now_ms: int = 0
    ) -> None:
        """Becomes the partition's leader in ``leader_epoch`` (not below the current one)
        with the given ISR and assignment; the high watermark may then advance. Any ISR
        change still pending is dropped: the controller's state is the truth."""
        if leader_epoch < self.leader_epoch:
            raise ValueError(
                f"{self.name}: leader epoch {leader_epoch} is below {self.leader_epoch}"
            )
        new_epoch = leader_epoch > self.leader_epoch
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            latest = self.log.latest_epoch
            # Kafka's maybeAssignEpochStartOffset: the new epoch starts at the LEO, so
            # OffsetForLeaderEpoch answers for it before anything is appended in it. A
            # broker alone always leads in epoch 0, which its first batch records.
            if leader_epoch > 0 and (latest is None or leader_epoch > latest):
                self.log.assign_epoch_start_offset(leader_epoch, self.leader_epoch_start_offset)
        self.leader_epoch = leader_epoch
        self.leader_id = self.local_broker_id
        self.assigned_replicas = list(replicas)
        self.isr = set(isr)
        self.isr_full = len(self.isr) >= len(self.assigned_replicas)
        self._alone = self.isr == {self.local_broker_id}
        leo = self.log.log_end_offset
        followers = {}
        for r in replicas:
            if r != self.local_broker_id:
                known = self.remote_replicas.get(r)
                followers[r] = known or Replica(r)
                if new_epoch or known is None:  # what a follower showed counts within one epoch
                    followers[r].reset(r in self.isr, now_ms, leo)
        self.remote_replicas = followers
        self.pending_isr_change = None
        self.maximal_isr = set(self.isr)
        self.high_watermark = min(max(self.high_watermark, 0), leo)
        self.maybe_increment_leader_hw()

    def make_follower(
        self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int]
    ) -> bool:
        """Follows ``leader_id`` (-1: none) in ``leader_epoch`` (not below the current
        one); True if the leader or the epoch changed. A follower keeps no follower
        state and does not move its high watermark itself."""
        if leader_epoch < self.leader_epoch:
            raise ValueError(
                f"{self.name}: leader epoch {leader_epoch} is below {self.leader_epoch}"
            )
        changed = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.leader_epoch = leader_epoch
        self.leader_id = leader_id
        self.assigned_replicas = list(replicas)
        self.isr = set(isr)
        self.isr_full = len(self.isr) >= len(self.assigned_replicas)
        self._alone = False
        self.remote_replicas = {}
        self.pending_isr_change = None
        self.maximal_isr = set(self.isr)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        return changed

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def mark_offline(self) -> None:
        """Its log dir failed (Kafka's ``markPartitionOffline``)."""
        self.offline = True
        self.leader_id = -1
        self.pending_isr_change = None

    def leader_epoch_error(self, current_leader_epoch: int, leader_only: bool = True) -> ErrorCode:
        """The error for a request made under ``current_leader_epoch`` (-1: not checked):
        an older epoch is fenced, a newer one is not known here yet; then leadership
        (``leader_only``), or for a read a follower may serve, that there is a leader."""
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            return (
                ErrorCode.FENCED_LEADER_EPOCH
                if current_leader_epoch < self.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
        if self.is_leader or (not leader_only and self.leader_id >= 0):
            return ErrorCode.NONE
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    # ---- ISR and high watermark ----

    @property
    def log_start_offset(self) -> int:
        return self.log.local_log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.local_log.log_end_offset

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first_unstable = self.log.producer_state.first_unstable_offset()
        return hw if first_unstable is None else min(first_unstable, hw)

    def _min_isr_reached(self, min_insync_replicas: int | None = None) -> bool:
        """Whether the ISR holds ``min(min.insync.replicas, replication factor)``
        replicas (the topic's ``min.insync.replicas`` unless given)."""
        if self.isr_full:
            return True
        in_sync, assigned = len(self.isr), len(self.assigned_replicas)
        if min_insync_replicas is None:
            min_insync_replicas = self._min_insync_replicas()
        return in_sync >= min(min_insync_replicas, assigned)

    def maybe_increment_leader_hw(self) -> bool:
        """Moves the high watermark up to the least LEO over the ISR; True if it moved."""
        if self.leader_id != self.local_broker_id or not (self.isr_full or self._min_isr_reached()):
            return False
        new_hw = self.log.local_log.log_end_offset
        if not self._alone or self.pending_isr_change is not None:  # a pending addition counts
            for replica in self.maximal_isr:
                if replica != self.local_broker_id:
                    follower = self.remote_replicas.get(replica)
                    new_hw = min(new_hw, -1 if follower is None else follower.log_end_offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int = -1, now_ms: int = 0
    ) -> bool:
        """Records a follower's LEO from its fetch (Kafka's ``updateFollowerFetchState``),
        proposes adding it to the ISR when it qualifies, and moves the high watermark;
        True if the high watermark moved."""
        follower = self.remote_replicas.get(replica_id)
        if follower is None:
            return False
        follower.update_fetch_state(
            fetch_offset, log_start_offset, self.log.local_log.log_end_offset, now_ms
        )
        self.maybe_expand_isr(follower)
        return self.maybe_increment_leader_hw()

    # ---- ISR changes (proposed by the leader, committed by the controller) ----

    def maybe_expand_isr(self, follower: Replica) -> None:
        """Proposes adding ``follower`` once its LEO reached both the high watermark and
        the start of this leader epoch (so it holds every committed record and this
        epoch's history), with no other ISR change pending."""
        if not self.is_leader or self.alter_isr is None or self.pending_isr_change is not None:
            return
        if follower.broker_id in self.isr or follower.broker_id not in self.assigned_replicas:
            return
        if self.isr_eligible is not None and not self.isr_eligible(follower.broker_id):
            return  # not a live broker as metadata says (Kafka's isReplicaIsrEligible)
        if (
            follower.log_end_offset < self.high_watermark
            or follower.log_end_offset < self.leader_epoch_start_offset
        ):
            return
        change = PendingIsrChange(frozenset(self.isr | {follower.broker_id}), expanding=True)
        self.pending_isr_change = change
        self.maximal_isr = set(change.proposed_isr)
        self.alter_isr(self, change)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> set[int]:
        leo = self.log.local_log.log_end_offset
        return {
            r
            for r in self.isr
            if r != self.local_broker_id
            and (f := self.remote_replicas.get(r)) is not None
            and not f.is_caught_up(leo, now_ms, max_lag_ms)
        }

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> bool:
        """Proposes removing the followers not caught up for ``max_lag_ms``; True if one
        was proposed. The high watermark counts the smaller ISR only once committed."""
        if not self.is_leader or self.alter_isr is None or self.pending_isr_change is not None:
            return False
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not lagging:
            return False
        change = PendingIsrChange(frozenset(self.isr - lagging), expanding=False)
        self.pending_isr_change = change
        self.alter_isr(self, change)
        return True

    def on_isr_change_result(
        self,
        change: PendingIsrChange,
        error: ErrorCode,
        leader_epoch: int = -1,
        isr: list[int] | None = None,
        partition_epoch: int = -1,
    ) -> None:
        """The controller's answer to ``change``: the committed ISR and partition epoch, or
        an error. Fenced or stale answers drop the change (the controller's next
        LeaderAndIsr is the truth); others drop it too, to be proposed again."""
        if self.pending_isr_change is not change:
            return  # a new leadership came in between
        self.pending_isr_change = None
        if (
            error == ErrorCode.NONE
            and isr is not None
            and leader_epoch == self.leader_epoch
            and partition_epoch > self.partition_epoch
        ):
            self.isr = set(isr)
            self.partition_epoch = partition_epoch
            self.isr_full = len(self.isr) >= len(self.assigned_replicas)
            self._alone = self.isr == {self.local_broker_id}
        self.maximal_isr = set(self.isr)
        moved = self.maybe_increment_leader_hw()
        if (moved or error == ErrorCode.NONE) and self._on_append is not None:
            self._on_append(self)  # waiting produces see the new high watermark or ISR

    def check_enough_replicas_reached_offset(
        self, required_offset: int, min_insync_replicas: int | None = None
    ) -> tuple[bool, ErrorCode]:
        """For an acks=all produce waiting for ``required_offset`` (its last offset + 1):
        (done, error). Done with NONE once the high watermark passed it, with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then below the minimum or shrank
        below it before (the high watermark then stays where it is, so waiting longer
        would only end in a timeout), with NOT_LEADER_OR_FOLLOWER once this broker no
        longer leads (KAFKA_STORAGE_ERROR once its log dir failed)."""
        if self.offline:
            return True, ErrorCode.KAFKA_STORAGE_ERROR
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        enough = self._min_isr_reached(min_insync_replicas)
        if self.high_watermark >= required_offset:
            return True, ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if not enough:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # ---- appends ----

    def append_records_to_leader(
        self,
        records: BytesLike | None,
        required_acks: int,
        min_insync_replicas: int | None = None,
        idempotent: bool | None = None,
        verify_transaction: Callable[[int, int], ErrorCode] | None = None,
    ) -> tuple[int, int, int, int]:
        """Appends producer batches as leader: (base offset, last offset, log append
        time or -1, log start offset). acks=all with the ISR below
        ``min.insync.replicas`` raises NotEnoughReplicasError before anything is written."""
        if self.leader_id != self.local_broker_id:
            raise NotLeaderOrFollowerError(f"this broker does not lead {self.name}")
        if (
            required_acks == -1
            and not self.isr_full
            and not self._min_isr_reached(min_insync_replicas)
        ):
            if min_insync_replicas is None:
                min_insync_replicas = self._min_insync_replicas()
            raise NotEnoughReplicasError(
                f"the ISR of {self.name} has {len(self.isr)} replicas, "
                f"below min.insync.replicas {min_insync_replicas}"
            )
        result = self.log.append_as_leader(
            records, self.leader_epoch, idempotent, verify_transaction
        )
        if self._alone and self.isr_full:
            # The only replica: the high watermark is the log end (a retried duplicate
            # answers older offsets, so never move it back).
            if result[1] >= self.high_watermark:
                self.high_watermark = result[1] + 1
        else:
            self.maybe_increment_leader_hw()
        if self._on_append is not None:
            self._on_append(self)
        return result

    def append_records(self, data: bytes) -> tuple[int, int]:
        """Appends batches the broker wrote itself (coordinator records) as leader:
        (first offset, last offset)."""
        if self.leader_id != self.local_broker_id:
            raise NotLeaderOrFollowerError(f"this broker does not lead {self.name}")
        result = self.log.append_records(data, self.leader_epoch)
        self._appended()
        return result

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> tuple[int, CompletedTxn | None]:
        """Appends, as leader, a COMMIT or ABORT control batch ending the producer's
        transaction: (its offset, the transaction or None when it had no data here)."""
        if self.leader_id != self.local_broker_id:
            raise NotLeaderOrFollowerError(f"this broker does not lead {self.name}")
        offset, txn = self.log.append_control_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, self.leader_epoch
        )
        self._appended()
        return offset, txn

    def _appended(self) -> None:
        self.maybe_increment_leader_hw()
        if self._on_append is not None:
            self._on_append(self)

    # ---- follower ----

    def append_records_to_follower(self, records: BytesLike) -> tuple[int, int]:
        """Appends the leader's batches with their offsets: (first, last offset)."""
        if self.is_leader:
            raise NotLeaderOrFollowerError(
                f"this broker leads {self.name}: it does not replicate it"
            )
        return self.log.append_as_follower(records)

    def update_follower_high_watermark(
        self, leader_high_watermark: int, leader_log_start_offset: int
    ) -> bool:
        """A follower takes the leader's high watermark, bounded by its own log end, and
        moves its log start up to the leader's (not past that high watermark); True if
        the high watermark changed."""
        hw = max(0, min(leader_high_watermark, self.log.log_end_offset))
        changed = hw != self.high_watermark
        self.high_watermark = hw
        if leader_log_start_offset > self.log.log_start_offset:
            self.log.delete_records(min(leader_log_start_offset, hw))
        return changed

    def truncate_to(self, offset: int) -> None:
        """Cuts the follower's log at ``offset`` (never below what the leader holds)."""
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    # ---- the leader serving followers ----

    def read_for_follower(
        self, fetch_offset: int, last_fetched_epoch: int, max_bytes: int, min_one_batch: bool
    ) -> tuple[EpochEndOffset | None, FileSlice | None]:
        """(DivergingEpoch or None, a FileSlice of whole batches from ``fetch_offset`` up
        to the log end, or None). A follower whose last epoch disagrees with this log
        gets the epoch and end offset to truncate to, and no records."""
        if last_fetched_epoch >= 0:
            end = EpochEndOffset(*self.log.end_offset_for_epoch(last_fetched_epoch))
            diverging = diverging_epoch(end, last_fetched_epoch, fetch_offset)
            if diverging is not None:
                return diverging, None
        leo = self.log.log_end_offset
        if fetch_offset == leo:
            return None, None
        return None, self.log.read(fetch_offset, max_bytes, leo, min_one_batch)

    # ---- reads ----

    def read_records(
        self, fetch_offset: int, max_bytes: int, read_committed: bool, min_one_batch: bool
    ) -> FileSlice | None:
        """A ``logstore.FileSlice`` of whole batches from ``fetch_offset`` up to the high
        watermark (read_committed: the last stable offset); None when nothing is there."""
        bound = self.last_stable_offset if read_committed else self.high_watermark
        found: FileSlice | None = self.log.read(fetch_offset, max_bytes, bound, min_one_batch)
        return found

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.log.aborted_transactions(fetch_offset, upper_bound_offset)

    def fetch_offset_for_timestamp(
        self, timestamp: int, read_committed: bool
    ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp`` below the
        high watermark (read_committed: the LSO); None when no record qualifies."""
        bound = self.last_stable_offset if read_committed else self.high_watermark
        found = self.log.offset_for_timestamp(timestamp)
        return (found[1], found[0]) if found and found[0] < bound else None

    def active_producers(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, its state entry) of each producer the log remembers, by id."""
        return sorted(self.log.producer_state.producers.items())

    def legacy_fetch_offsets_before(
        self, timestamp: int, max_num_offsets: int, from_consumer: bool, now_ms: int
    ) -> list[int]:
        """ListOffsets v0's answer, offsets descending (Kafka's
        ``legacyFetchOffsetsBefore``): the log's segments as (first offset, last modified)
        pairs plus (log end, now) when the active segment holds data; -1 (latest) takes
        the last pair and those before it, -2 (earliest) the first, a time the last pair
        modified at or before it and those before; at most ``max_num_offsets``. A
        consumer never sees an offset past the high watermark (the newest ones become
        the high watermark)."""
        segments = self.log.local_log.segments()
        log_start = self.log_start_offset
        pairs = [(max(s.base_offset, log_start), _modified_ms(s.log_path)) for s in segments]
        if segments and segments[-1].size > 0:
            pairs.append((self.log_end_offset, now_ms))
        if timestamp == -1:
            start = len(pairs) - 1
        elif timestamp == -2:
            start = 0
        else:
            start = len(pairs) - 1
            while start >= 0 and pairs[start][1] > timestamp:
                start -= 1
        offsets = sorted(
            (pairs[i][0] for i in range(start, start - min(max_num_offsets, start + 1), -1)),
            reverse=True,
        )
        if from_consumer:
            hw = self.high_watermark
            if any(o > hw for o in offsets):
                offsets = [hw] + [o for o in offsets if o <= hw]
        return offsets

    def largest_timestamp(self) -> int:
        """The largest record timestamp in the log (-1 when empty)."""
        return self.log.largest_timestamp()

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch ≤
        ``leader_epoch`` and where it ends; (-1, -1) when unknown."""
        epoch, end = self.log.end_offset_for_epoch(leader_epoch)
        if epoch == -1 and self.log.latest_epoch is None:
            # Nothing was ever appended in an epoch: the whole log is this one.
            return (
                (self.leader_epoch, self.high_watermark)
                if leader_epoch == self.leader_epoch
                else (-1, -1)
            )
        return epoch, end

    def delete_records_on_leader(self, offset: int) -> int:
        """Moves the log start offset to ``offset`` (at most the high watermark); the
        new log start offset."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"this broker does not lead {self.name}")
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"{self.name}: {offset} is outside 0..{self.high_watermark}"
            )
        return self.log.delete_records(offset)


def _modified_ms(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0
