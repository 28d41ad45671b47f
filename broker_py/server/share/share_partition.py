"""One share-partition (a share group on one topic-partition) on the partition's leader, sans-IO.

The state machine of KIP-932 as Kafka 4's ``kafka.server.share.SharePartition`` keeps it; no
I/O and no timers: the caller reads the log, writes the state to the share coordinator, and
calls :meth:`SharePartition.expire_locks` at :meth:`SharePartition.next_lock_deadline`. The
clock is injected (milliseconds).

Offsets and the window
    ``start_offset`` (SPSO): every offset below it is done (acknowledged, archived, or gone
    from the log). ``end_offset`` (SPEO, exclusive here; Kafka's ``endOffset`` is the last
    in-flight offset): the next offset never acquired before. The in-flight window
    ``[SPSO, SPEO)`` holds one state per offset: AVAILABLE, ACQUIRED (with its owner and lock
    deadline), ACKNOWLEDGED or ARCHIVED, each with its delivery count. Its span never grows
    past ``max_record_locks`` (``group.share.partition.max.record.locks``) through new
    acquisitions; a restored window is bounded by ``MAX_WINDOW``.

Record states (Kafka's ids, also the persisted DeliveryState)::

    AVAILABLE(0) --acquire--> ACQUIRED(1)            delivery count + 1
    ACQUIRED --ACCEPT--> ACKNOWLEDGED(2)
    ACQUIRED --REJECT, GAP--> ARCHIVED(4)
    ACQUIRED --RELEASE, lock expiry, member leaving--> AVAILABLE,
                                        or ARCHIVED once the count reached the limit

So a record is delivered at most ``delivery_count_limit`` times: an AVAILABLE record always has
a count below the limit. ACKNOWLEDGED and ARCHIVED are final. SPSO moves over a prefix of final
records, and to the log start offset when that moves past it.

Driving it (what ShareFetch and ShareAcknowledge do with it)
    fetch: read the log from :meth:`next_fetch_offset` while :meth:`can_acquire`, then
    :meth:`acquire` with the offset read from and the (base, last) offsets of the batches read;
    answer the returned ``AcquiredRecords``. Nothing is written for an acquisition.

    acknowledge: :meth:`acknowledge` checks a partition's batches as Kafka does (the request
    checks of ``KafkaApis`` and the record checks of ``SharePartition``), all or nothing. On
    success its states are applied provisionally and a :class:`Transition` carries the
    ``WriteShareGroupState`` partition data (the changed offsets); the caller writes it and
    then calls :meth:`complete` with whether the write succeeded: a failed write rolls the
    records back (still ACQUIRED by the member, lock deadline kept). While a transition is
    pending its offsets can be neither acquired nor acknowledged again.

    a member leaving or its share session closing: :meth:`release_acquired_records`, a
    transition like an acknowledgement (RELEASE of everything the member holds).

    timers: :meth:`expire_locks` at :meth:`next_lock_deadline`; it returns the state to write
    (every offset changed outside a transition since the last call: expired locks, offsets
    found missing from the log), never rolled back (Kafka goes on when that write fails).
    :meth:`acquire`, :meth:`acknowledge`, :meth:`release_acquired_records` and
    :meth:`next_fetch_offset` expire due locks first, so an acknowledgement after the
    deadline is refused whether or not the timer has run.

    isolation (the group's ``share.isolation.level``): read_uncommitted reads the log up to
    the high watermark and acquires every record read. read_committed reads up to the last
    stable offset, and :meth:`acquire` gets the read's aborted transactions: the records of
    their data batches are ARCHIVED when a fetch reaches them, never delivered. Control
    batches (transaction markers) are acquired like records; the client acknowledges them.

    the log start offset moving: :meth:`update_log_start_offset`; the new SPSO reaches the
    share coordinator with the next write (Kafka writes it lazily too).

    a GROUP config change: replace ``config``; a new lock duration applies to later
    acquisitions, a lowered delivery-count limit archives AVAILABLE records at it when a
    fetch reaches them.

    leadership: a share-partition lives on the partition's leader for one leader epoch; on
    losing leadership drop it (its pending transitions with it), and the next leader builds
    its own from the share coordinator. A :class:`ShareStateError` from
    :meth:`SharePartition.from_persisted` fails that share-partition's fetches (Kafka's
    initialization fails with an IllegalStateException, which an answer carries as
    UNKNOWN_SERVER_ERROR).

Every write carries the committed SPSO (a transition's own records move it only once
committed, with the next write), and the coordinator drops the batches below a written SPSO:
the writes of one share-partition must therefore reach it in the order they are made.

Persistence: :meth:`state_snapshot` is the whole committed state as ``WriteShareGroupState``
partition data (an ACQUIRED record is written AVAILABLE with its delivery count);
:meth:`SharePartition.from_persisted` builds a share-partition from ``ReadShareGroupState``'s
partition result: accepted and archived records stay done, everything else comes back
AVAILABLE, a count at the limit comes back ARCHIVED, and offsets inside the window no batch
covers are AVAILABLE never delivered. Without persisted state (or a start offset of -1) SPSO
comes from ``share.auto.offset.reset``: the log start offset (earliest) or the latest offset.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from broker_py.coordinator.share.share_coordinator_records import StateBatch
from logstore.protocol.error_codes import ErrorCode

# The largest window a restored state may hold (offsets); Kafka bounds
# group.share.partition.max.record.locks at 10,000.
MAX_WINDOW = 1 << 16

# The owner of a record nobody holds (Kafka's EMPTY_MEMBER_ID, the zero Uuid's string).
NO_MEMBER = ""


class RecordState(IntEnum):
    """A record's state; the value is Kafka's id (DeliveryState in the share coordinator)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """ShareAcknowledge's AcknowledgeTypes values."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class ShareStateError(ValueError):
    """Persisted state that cannot be loaded (bad batches, or a window over MAX_WINDOW)."""


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """The limits of one share-partition (broker configs, the lock duration per group)."""

    max_record_locks: int = 2000  # group.share.partition.max.record.locks
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    record_lock_duration_ms: int = 30000  # share.record.lock.duration.ms
    auto_offset_reset: str = "latest"  # share.auto.offset.reset

    def __post_init__(self) -> None:
        if self.max_record_locks < 1 or self.delivery_count_limit < 1:
            raise ValueError("max_record_locks and delivery_count_limit must be at least 1")
        if self.record_lock_duration_ms < 1:
            raise ValueError("record_lock_duration_ms must be at least 1")
        if self.auto_offset_reset not in ("latest", "earliest"):
            raise ValueError(f"unknown share.auto.offset.reset: {self.auto_offset_reset}")


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A record batch read from the log: its base and last offsets; its producer id (-1:
    none), whether it is transactional, and whether it is a control batch holding an ABORT
    marker (the fields a read_committed acquisition needs)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    abort_marker: bool = False


def aborted_batches(
    batches: Sequence[FetchedBatch], aborted: Iterable[tuple[int, int]]
) -> list[FetchedBatch]:
    """The data batches of aborted transactions among ``batches`` (in offset order), given
    the read's aborted transactions as (producer id, first offset), as a read_committed
    consumer filters them: a producer's transactional batches are aborted from its aborted
    transaction's first offset up to its ABORT marker. Control batches are never in it."""
    pending = sorted(aborted, key=lambda a: a[1])
    at = 0
    producers: set[int] = set()
    out: list[FetchedBatch] = []
    for batch in batches:
        if batch.producer_id < 0:
            continue
        while at < len(pending) and pending[at][1] <= batch.last_offset:
            producers.add(pending[at][0])
            at += 1
        if batch.abort_marker:
            producers.discard(batch.producer_id)
        elif batch.transactional and batch.producer_id in producers:
            out.append(batch)
    return out


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords: offsets first..last acquired, delivered this many times."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """ShareAcknowledge's (and ShareFetch's) AcknowledgementBatch: one type for the whole
    range, or one type per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PersistedState:
    """ReadShareGroupState's partition result (without its error): start offset -1 when the
    share-partition was never initialized. ``StateBatch`` is the share coordinator's: a run
    of offsets with one DeliveryState (0, 2 or 4) and DeliveryCount."""

    state_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class StateWrite:
    """WriteShareGroupState's partition data."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class Transition:
    """Provisional state changes awaiting their write: pass to :meth:`SharePartition.complete`."""

    transition_id: int
    write: StateWrite


@dataclass(frozen=True, slots=True)
class AcknowledgeResult:
    """The partition's error code, and the transition to write and complete (None when the
    request changed nothing or failed)."""

    error_code: int
    transition: Transition | None


@dataclass(frozen=True, slots=True)
class ShareCounts:
    """For the metrics: records ACQUIRED now, records in flight (AVAILABLE or ACQUIRED in the
    window), and the acquisitions so far that were redeliveries."""

    acquired: int
    in_flight: int
    redelivered: int


class _Record:
    """One offset of the window. ``pending`` is the id of the transition that changed it
    provisionally (0: none) and ``saved`` its state before."""

    __slots__ = ("deadline_ms", "delivery_count", "member_id", "pending", "saved", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = NO_MEMBER
        self.deadline_ms = 0
        self.pending = 0
        self.saved: tuple[RecordState, int, str, int] | None = None

    def committed(self) -> tuple[RecordState, int]:
        if self.saved is not None:
            return self.saved[0], self.saved[1]
        return self.state, self.delivery_count


def _persisted_state(state: RecordState) -> int:
    return int(RecordState.AVAILABLE if state is RecordState.ACQUIRED else state)


def _runs(items: Iterable[tuple[int, int, int]]) -> tuple[StateBatch, ...]:
    """(offset, delivery state, count) in offset order -> maximal contiguous runs."""
    out: list[StateBatch] = []
    for offset, state, count in items:
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset + 1 == offset
            and last.delivery_state == state
            and last.delivery_count == count
        ):
            out[-1] = StateBatch(last.first_offset, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return tuple(out)


class SharePartition:
    """The in-flight records of one share group on one topic-partition (see the module)."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        leader_epoch: int,
        config: SharePartitionConfig,
        clock: Callable[[], int],
        start_offset: int,
        state_epoch: int = 0,
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.state_epoch = state_epoch
        self.config = config
        self._clock = clock
        self._start = start_offset
        self._end = start_offset
        # offset -> record for every offset of [start, end), in offset order.
        self._records: OrderedDict[int, _Record] = OrderedDict()
        # transition id -> its offsets
        self._pending: dict[int, list[int]] = {}
        self._next_transition = 1
        # offsets changed outside a transition (lock expiry, missing from the log) since the
        # last expire_locks()
        self._dirty: set[int] = set()
        # no ACQUIRED record's deadline is below this
        self._earliest_deadline: int | None = None
        # False: no record is AVAILABLE outside a transition (Kafka's findNextFetchOffset)
        self._maybe_available = False
        self._redelivered = 0

    # -- construction from the share coordinator ------------------------------------------

    @classmethod
    def from_persisted(
        cls,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        leader_epoch: int,
        config: SharePartitionConfig,
        clock: Callable[[], int],
        persisted: PersistedState | None,
        log_start_offset: int,
        latest_offset: int,
    ) -> SharePartition:
        """A share-partition from ReadShareGroupState's answer (None: nothing persisted);
        ``latest_offset`` is where ``share.auto.offset.reset=latest`` starts."""
        state_epoch = persisted.state_epoch if persisted is not None else 0
        start = persisted.start_offset if persisted is not None else -1
        if start < 0:
            start = log_start_offset if config.auto_offset_reset == "earliest" else latest_offset
        batches = sorted(
            persisted.state_batches if persisted is not None else (), key=lambda b: b.first_offset
        )
        previous_last: int | None = None
        for batch in batches:
            if batch.first_offset > batch.last_offset or batch.first_offset < 0:
                raise ShareStateError(f"bad state batch {batch}")
            if batch.delivery_state not in (0, 1, 2, 4) or batch.delivery_count < 0:
                raise ShareStateError(f"bad state batch {batch}")
            if previous_last is not None and batch.first_offset <= previous_last:
                raise ShareStateError(f"overlapping state batches at {batch.first_offset}")
            previous_last = batch.last_offset
        limit = config.delivery_count_limit

        def final(batch: StateBatch) -> bool:
            state = batch.delivery_state
            return state in (2, 4) or (state in (0, 1) and batch.delivery_count >= limit)

        # Below the start offset nothing is kept; a leading final run moves the start.
        kept: list[StateBatch] = []
        for batch in batches:
            if batch.last_offset < start:
                continue
            if batch.first_offset < start:
                batch = StateBatch(
                    start, batch.last_offset, batch.delivery_state, batch.delivery_count
                )
            if not kept and batch.first_offset == start and final(batch):
                start = batch.last_offset + 1
                continue
            kept.append(batch)
        end = kept[-1].last_offset + 1 if kept else start
        if end - start > MAX_WINDOW:
            raise ShareStateError(f"persisted window {start}..{end} is over {MAX_WINDOW}")
        share_partition = cls(
            group_id,
            topic_id,
            partition,
            leader_epoch=leader_epoch,
            config=config,
            clock=clock,
            start_offset=start,
            state_epoch=state_epoch,
        )
        records = share_partition._records
        for batch in kept:
            for offset in range(share_partition._end, batch.first_offset):
                records[offset] = _Record(RecordState.AVAILABLE, 0)
            for offset in range(batch.first_offset, batch.last_offset + 1):
                if final(batch):
                    state = RecordState(batch.delivery_state)
                    if state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                        state = RecordState.ARCHIVED
                else:
                    state = RecordState.AVAILABLE
                records[offset] = _Record(state, batch.delivery_count)
            share_partition._end = batch.last_offset + 1
        share_partition._maybe_available = True
        share_partition._advance_start()
        if log_start_offset > share_partition._start:
            share_partition.update_log_start_offset(log_start_offset)
        return share_partition

    # -- what the caller reads ------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    def record(self, offset: int) -> tuple[RecordState, int, str] | None:
        """(state, delivery count, owner) of an offset in the window, else None."""
        record = self._records.get(offset)
        if record is None:
            return None
        return record.state, record.delivery_count, record.member_id

    def in_flight(self) -> Iterator[tuple[int, RecordState, int, str, bool]]:
        """(offset, state, delivery count, owner, pending) over the window, in offset order."""
        for offset, record in self._records.items():
            yield (
                offset,
                record.state,
                record.delivery_count,
                record.member_id,
                bool(record.pending),
            )

    def counts(self) -> ShareCounts:
        acquired = in_flight = 0
        for record in self._records.values():
            if record.state is RecordState.ACQUIRED:
                acquired += 1
                in_flight += 1
            elif record.state is RecordState.AVAILABLE:
                in_flight += 1
        return ShareCounts(acquired, in_flight, self._redelivered)

    def next_fetch_offset(self) -> int:
        """Where the next log read starts: the first AVAILABLE record, else SPEO."""
        self._expire(self._clock())
        if self._maybe_available:
            for offset, record in self._records.items():
                if record.state is RecordState.AVAILABLE and not record.pending:
                    return offset
            self._maybe_available = False
        return self._end

    def can_acquire(self) -> bool:
        """Whether a fetch may acquire anything: an AVAILABLE record, or room in the window."""
        return self.next_fetch_offset() < self._end or (
            self._end - self._start < self.config.max_record_locks
        )

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record (clock ms), or None."""
        deadlines = [
            record.deadline_ms
            for record in self._records.values()
            if record.state is RecordState.ACQUIRED and not record.pending
        ]
        return min(deadlines) if deadlines else None

    # -- acquiring ------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        fetch_offset: int,
        batches: Sequence[FetchedBatch],
        max_records: int,
        aborted: Iterable[tuple[int, int]] | None = None,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what the log read from ``fetch_offset`` returned: the
        AVAILABLE records of the window in those batches, then new offsets past SPEO while
        the window has room, at most ``max_records`` offsets in all. Offsets from
        ``fetch_offset`` up to the first batch are not in the log: AVAILABLE ones there are
        archived. Offsets between batches are acquired with them (the client acknowledges
        them as GAP), as Kafka does. ValueError for an empty member id or batches out of
        order (the caller checks both first).

        ``aborted`` (a read_committed read, up to the last stable offset): the read's
        aborted transactions as (producer id, first offset). The offsets of their data
        batches (:func:`aborted_batches`) that would be acquired are archived instead,
        never delivered, and not counted in ``max_records``."""
        if member_id == NO_MEMBER:
            raise ValueError("a member id is needed to acquire records")
        now = self._clock()
        self._expire(now)
        if max_records <= 0 or not batches:
            return []
        previous = -1
        for batch in batches:
            if batch.base_offset > batch.last_offset or batch.base_offset <= previous:
                raise ValueError(f"fetched batches out of order: {batches}")
            previous = batch.last_offset
        first = batches[0].base_offset
        last = batches[-1].last_offset
        if first > fetch_offset:
            self._archive_missing(fetch_offset, first)
        if last < self._start:
            return []
        if first > self._end:
            if not self._records:
                self._start = self._end = first
            elif first - self._start < self.config.max_record_locks:
                for offset in range(self._end, first):
                    self._records[offset] = _Record(RecordState.ARCHIVED, 0)
                self._end = first
            else:
                return []
        deadline = now + self.config.record_lock_duration_ms
        limit = self.config.delivery_count_limit
        # (first, last) of the aborted data batches, in offset order; ``skip_at`` the first
        # one not wholly below ``offset`` (which only grows)
        skipped = [(b.base_offset, b.last_offset) for b in aborted_batches(batches, aborted or ())]
        skip_at = 0
        acquired: list[tuple[int, int]] = []
        offset = max(first, self._start)
        while offset <= last and len(acquired) < max_records:
            if offset < self._end:
                record = self._records[offset]
                if record.state is not RecordState.AVAILABLE or record.pending:
                    offset += 1
                    continue
                if record.delivery_count >= limit:  # the limit was lowered since
                    record.state = RecordState.ARCHIVED
                    self._dirty.add(offset)
                    offset += 1
                    continue
            else:
                if offset - self._start >= self.config.max_record_locks:
                    break
                record = _Record(RecordState.AVAILABLE, 0)
                self._records[offset] = record
                self._end = offset + 1
            while skip_at < len(skipped) and skipped[skip_at][1] < offset:
                skip_at += 1
            if skip_at < len(skipped) and skipped[skip_at][0] <= offset:
                record.state = RecordState.ARCHIVED
                self._dirty.add(offset)
                offset += 1
                continue
            if record.delivery_count > 0:
                self._redelivered += 1
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.deadline_ms = deadline
            acquired.append((offset, record.delivery_count))
            offset += 1
        if acquired and (self._earliest_deadline is None or deadline < self._earliest_deadline):
            self._earliest_deadline = deadline
        self._advance_start()
        out: list[AcquiredRecords] = []
        for offset, count in acquired:
            if out and out[-1].last_offset + 1 == offset and out[-1].delivery_count == count:
                out[-1] = AcquiredRecords(out[-1].first_offset, offset, count)
            else:
                out.append(AcquiredRecords(offset, offset, count))
        return out

    def _archive_missing(self, first: int, end: int) -> None:
        """Offsets first..end-1 are not in the log: archive the AVAILABLE ones."""
        for offset in range(max(first, self._start), min(end, self._end)):
            record = self._records[offset]
            if record.state is RecordState.AVAILABLE and not record.pending:
                record.state = RecordState.ARCHIVED
                self._dirty.add(offset)
        self._advance_start()

    # -- acknowledging and releasing ------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch]
    ) -> AcknowledgeResult:
        """Apply one request's acknowledgement batches for this partition, all or nothing.

        INVALID_REQUEST: a batch with first > last, starting before the previous batch's last
        offset, without types, with several types not one per offset, with a type outside
        0..3, or reaching past the window's end. INVALID_RECORD_STATE: an offset in the window
        not ACQUIRED by ``member_id`` (or already in a pending transition, or named twice),
        or a batch when nothing is in flight. Offsets below SPSO are skipped."""
        self._expire(self._clock())
        previous_last = -1
        for batch in batches:
            types = batch.acknowledge_types
            if (
                batch.first_offset > batch.last_offset
                or batch.first_offset < previous_last
                or not types
                or (len(types) > 1 and batch.last_offset - batch.first_offset != len(types) - 1)
                or any(t < 0 or t > 3 for t in types)
            ):
                return AcknowledgeResult(ErrorCode.INVALID_REQUEST, None)
            previous_last = batch.last_offset
        limit = self.config.delivery_count_limit
        changes: dict[int, RecordState] = {}
        for batch in batches:
            if batch.last_offset < self._start:
                continue
            if not self._records:
                return AcknowledgeResult(ErrorCode.INVALID_RECORD_STATE, None)
            if batch.first_offset >= self._end or batch.last_offset >= self._end:
                return AcknowledgeResult(ErrorCode.INVALID_REQUEST, None)
            types = batch.acknowledge_types
            for offset in range(max(batch.first_offset, self._start), batch.last_offset + 1):
                record = self._records[offset]
                if (
                    offset in changes
                    or record.state is not RecordState.ACQUIRED
                    or record.pending
                    or record.member_id != member_id
                ):
                    return AcknowledgeResult(ErrorCode.INVALID_RECORD_STATE, None)
                kind = types[offset - batch.first_offset] if len(types) > 1 else types[0]
                if kind == AcknowledgeType.ACCEPT:
                    changes[offset] = RecordState.ACKNOWLEDGED
                elif kind == AcknowledgeType.RELEASE and record.delivery_count < limit:
                    changes[offset] = RecordState.AVAILABLE
                else:
                    changes[offset] = RecordState.ARCHIVED
        if not changes:
            return AcknowledgeResult(ErrorCode.NONE, None)
        return AcknowledgeResult(ErrorCode.NONE, self._start_transition(changes))

    def release_acquired_records(self, member_id: str) -> Transition | None:
        """Release everything ``member_id`` holds (it left, or its share session closed):
        AVAILABLE again, or ARCHIVED at the delivery-count limit. None if it held nothing."""
        self._expire(self._clock())
        limit = self.config.delivery_count_limit
        changes = {
            offset: (
                RecordState.AVAILABLE if record.delivery_count < limit else RecordState.ARCHIVED
            )
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED
            and not record.pending
            and record.member_id == member_id
        }
        return self._start_transition(changes) if changes else None

    def _start_transition(self, changes: dict[int, RecordState]) -> Transition:
        transition_id = self._next_transition
        self._next_transition += 1
        for offset, state in changes.items():
            record = self._records[offset]
            record.saved = (
                record.state,
                record.delivery_count,
                record.member_id,
                record.deadline_ms,
            )
            record.pending = transition_id
            record.state = state
            record.member_id = NO_MEMBER
        self._pending[transition_id] = sorted(changes)
        batches = _runs(
            (offset, _persisted_state(changes[offset]), self._records[offset].delivery_count)
            for offset in sorted(changes)
        )
        write = StateWrite(self.state_epoch, self.leader_epoch, self._start, batches)
        return Transition(transition_id, write)

    def complete(self, transition: Transition, persisted: bool) -> None:
        """End a transition once its write is done: ``persisted`` commits it, else its
        records go back to what they were (those still in the window)."""
        offsets = self._pending.pop(transition.transition_id, None)
        if offsets is None:
            raise ValueError(f"transition {transition.transition_id} is not pending")
        for offset in offsets:
            record = self._records.get(offset)
            if record is None or record.pending != transition.transition_id:
                continue  # below the start offset now
            saved = record.saved
            assert saved is not None
            if not persisted:
                record.state, record.delivery_count, record.member_id, record.deadline_ms = saved
                if record.state is RecordState.ACQUIRED and (
                    self._earliest_deadline is None or record.deadline_ms < self._earliest_deadline
                ):
                    self._earliest_deadline = record.deadline_ms
            elif record.state is RecordState.AVAILABLE:
                self._maybe_available = True
            record.pending = 0
            record.saved = None
        self._advance_start()

    # -- lock expiry and the log start offset ---------------------------------------------

    def expire_locks(self) -> StateWrite | None:
        """Expire the locks due now; the state to write for every offset changed outside a
        transition since the last call (locks expired, offsets found missing from the log),
        or None."""
        self._expire(self._clock())
        if not self._dirty:
            return None
        # Dirty offsets the start has passed since are covered by the start offset.
        offsets = sorted(o for o in self._dirty if o >= self._start)
        self._dirty.clear()
        items: list[tuple[int, int, int]] = []
        for offset in offsets:
            record = self._records[offset]
            state, count = record.committed()
            items.append((offset, _persisted_state(state), count))
        return StateWrite(self.state_epoch, self.leader_epoch, self._start, _runs(items))

    def _expire(self, now: int) -> None:
        if self._earliest_deadline is None or now < self._earliest_deadline:
            return
        limit = self.config.delivery_count_limit
        earliest: int | None = None
        for offset, record in self._records.items():
            if record.state is not RecordState.ACQUIRED or record.pending:
                continue
            if record.deadline_ms <= now:
                record.state = (
                    RecordState.AVAILABLE if record.delivery_count < limit else RecordState.ARCHIVED
                )
                record.member_id = NO_MEMBER
                record.deadline_ms = 0
                self._dirty.add(offset)
                self._maybe_available = True
            elif earliest is None or record.deadline_ms < earliest:
                earliest = record.deadline_ms
        self._earliest_deadline = earliest
        self._advance_start()

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log start offset moved: records below it are gone (done, whatever their
        state; an owner's acknowledgement of them is skipped)."""
        if log_start_offset <= self._start:
            return
        records = self._records
        while records and next(iter(records)) < log_start_offset:
            records.popitem(last=False)
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self._advance_start()

    def _advance_start(self) -> None:
        records = self._records
        while records:
            offset, record = next(iter(records.items()))
            if record.pending or record.state not in _DONE:
                return
            records.popitem(last=False)
            self._start = offset + 1

    # -- persistence ----------------------------------------------------------------------

    def state_snapshot(self) -> StateWrite:
        """The whole committed state as WriteShareGroupState partition data."""
        items = []
        for offset, record in self._records.items():
            state, count = record.committed()
            items.append((offset, _persisted_state(state), count))
        return StateWrite(self.state_epoch, self.leader_epoch, self._start, _runs(items))
