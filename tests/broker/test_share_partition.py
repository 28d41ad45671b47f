"""The share-partition state machine (KIP-932): unit tests per rule and a hypothesis model."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey
from broker_py.coordinator.share.share_coordinator_shard import Outcome, ShareCoordinatorShard
from broker_py.server.share.share_partition import (
    NO_MEMBER,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PersistedState,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareStateError,
    StateBatch,
    StateWrite,
    Transition,
    aborted_batches,
)
from logstore.protocol.error_codes import ErrorCode

TOPIC = uuid.UUID(int=7)
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
AV, AQ, ACK, ARC = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


def make(
    clock: Clock,
    *,
    locks: int = 200,
    limit: int = 5,
    lock_ms: int = 30000,
    start: int = 0,
) -> SharePartition:
    config = SharePartitionConfig(
        max_record_locks=locks, delivery_count_limit=limit, record_lock_duration_ms=lock_ms
    )
    return SharePartition(
        "g", TOPIC, 0, leader_epoch=3, config=config, clock=clock, start_offset=start
    )


def fetch(sp: SharePartition, member: str, *ranges: tuple[int, int], max_records: int = 500):
    batches = [FetchedBatch(a, b) for a, b in ranges]
    return sp.acquire(member, sp.next_fetch_offset(), batches, max_records)


def ack(sp: SharePartition, member: str, *batches: tuple[int, int, tuple[int, ...]]):
    """Acknowledge and commit (the write succeeded); the error code."""
    result = sp.acknowledge(member, [AcknowledgementBatch(a, b, t) for a, b, t in batches])
    if result.transition is not None:
        sp.complete(result.transition, True)
    return result.error_code


def states(sp: SharePartition) -> dict[int, tuple[RecordState, int, str]]:
    return {o: (s, c, m) for o, s, c, m, _ in sp.in_flight()}


# -- acquiring ---------------------------------------------------------------------------


def test_acquire_new_records_and_never_another_members() -> None:
    clock = Clock()
    sp = make(clock)
    assert fetch(sp, "a", (0, 4), (5, 9)) == [AcquiredRecords(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 10)
    assert fetch(sp, "b", (0, 9)) == []  # all held by a
    assert sp.next_fetch_offset() == 10
    assert fetch(sp, "b", (10, 12)) == [AcquiredRecords(10, 12, 1)]
    assert {m for _, _, m in states(sp).values()} == {"a", "b"}


def test_acquire_is_bounded_by_max_records_and_the_window() -> None:
    clock = Clock()
    sp = make(clock, locks=6)
    assert fetch(sp, "a", (0, 9), max_records=4) == [AcquiredRecords(0, 3, 1)]
    assert fetch(sp, "b", (4, 9)) == [AcquiredRecords(4, 5, 1)]  # the window: 6 offsets
    assert not sp.can_acquire()
    assert fetch(sp, "b", (6, 9)) == []
    assert fetch(sp, "a", (0, 9), max_records=0) == []
    with pytest.raises(ValueError):
        fetch(sp, NO_MEMBER, (6, 9))
    with pytest.raises(ValueError):
        sp.acquire("a", 6, [FetchedBatch(6, 7), FetchedBatch(7, 9)], 10)


def test_redelivery_first_with_incremented_count() -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 4))
    assert ack(sp, "a", (1, 2, (RELEASE,))) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 1
    got = sp.acquire("b", 1, [FetchedBatch(0, 4), FetchedBatch(5, 6)], 500)
    assert got == [AcquiredRecords(1, 2, 2), AcquiredRecords(5, 6, 1)]
    assert sp.counts().redelivered == 2
    assert sp.counts().acquired == 7


def test_offsets_missing_from_the_log_are_archived_or_skipped() -> None:
    clock = Clock()
    sp = make(clock)
    # An empty share-partition whose log starts later moves there.
    assert sp.acquire("a", 0, [FetchedBatch(5, 6)], 10) == [AcquiredRecords(5, 6, 1)]
    assert sp.start_offset == 5
    # A hole past the end inside the window is archived; the next batch acquired.
    assert sp.acquire("a", 7, [FetchedBatch(9, 9)], 10) == [AcquiredRecords(9, 9, 1)]
    assert states(sp)[7][0] is ARC and states(sp)[8][0] is ARC
    # AVAILABLE offsets the log no longer has are archived.
    assert ack(sp, "a", (5, 6, (RELEASE,)), (9, 9, (ACCEPT,))) == ErrorCode.NONE
    assert sp.acquire("b", 5, [FetchedBatch(6, 6)], 10) == [AcquiredRecords(6, 6, 2)]
    assert states(sp)[6][0] is AQ and sp.start_offset == 6


def _txn(first: int, last: int, producer_id: int, abort_marker: bool = False) -> FetchedBatch:
    return FetchedBatch(first, last, producer_id, True, abort_marker)


def test_aborted_batches_as_a_read_committed_consumer_finds_them() -> None:
    batches = [
        FetchedBatch(0, 1),
        _txn(2, 4, 7),  # aborted (7 from 2)
        _txn(5, 6, 8),  # committed
        _txn(7, 7, 7, abort_marker=True),
        _txn(8, 8, 8, abort_marker=False),  # 8's COMMIT: a control batch, never aborted
        _txn(9, 10, 7),  # 7's next transaction: not in the list
        _txn(11, 12, 9),  # aborted from 12: the batch reaches it
    ]
    assert aborted_batches(batches, [(9, 12), (7, 2)]) == [batches[1], batches[6]]
    assert aborted_batches(batches, []) == []


def test_read_committed_archives_aborted_records_and_never_delivers_them() -> None:
    clock = Clock()
    sp = make(clock)
    batches = [FetchedBatch(0, 1), _txn(2, 4, 7), _txn(5, 5, 7, abort_marker=True)]
    batches += [_txn(6, 7, 8)]
    # read_uncommitted: every offset; read_committed: the aborted data batch archived, and
    # not counted in max_records.
    assert sp.acquire("a", 0, batches, 500) == [AcquiredRecords(0, 7, 1)]
    sp = make(clock)
    got = sp.acquire("a", 0, batches, 4, aborted=[(7, 2)])
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    assert [states(sp)[o] for o in (2, 3, 4)] == [(ARC, 0, NO_MEMBER)] * 3
    write = sp.expire_locks()  # written with the next state write
    assert write is not None and write.state_batches == (StateBatch(2, 4, 4, 0),)
    # Released under read_uncommitted, then fetched under read_committed: archived then.
    sp = make(clock)
    assert sp.acquire("a", 0, batches, 500) == [AcquiredRecords(0, 7, 1)]
    assert ack(sp, "a", (0, 7, (RELEASE,))) == ErrorCode.NONE
    got = sp.acquire("b", 0, batches, 500, aborted=[(7, 2)])
    assert got == [AcquiredRecords(0, 1, 2), AcquiredRecords(5, 7, 2)]
    assert states(sp)[3] == (ARC, 1, NO_MEMBER)


# -- acknowledging -----------------------------------------------------------------------


def test_accept_release_reject_gap_and_the_start_offset() -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 5))
    assert ack(sp, "a", (0, 3, (ACCEPT, REJECT, GAP, RELEASE))) == ErrorCode.NONE
    assert [s for s, _, _ in states(sp).values()] == [AV, AQ, AQ]
    assert sp.start_offset == 3  # 0..2 are done
    assert ack(sp, "a", (4, 5, (ACCEPT,))) == ErrorCode.NONE
    assert sp.start_offset == 3  # 3 is AVAILABLE again
    assert fetch(sp, "b", (3, 5)) == [AcquiredRecords(3, 3, 2)]
    assert ack(sp, "b", (3, 3, (ACCEPT,))) == ErrorCode.NONE
    assert (sp.start_offset, sp.end_offset, states(sp)) == (6, 6, {})


@pytest.mark.parametrize(
    "batches",
    [
        [(3, 2, (ACCEPT,))],  # first > last
        [(0, 2, (ACCEPT,)), (1, 3, (ACCEPT,))],  # starts before the previous last
        [(0, 2, ())],  # no types
        [(0, 2, (ACCEPT, ACCEPT))],  # several types, not one per offset
        [(0, 1, (ACCEPT, 4))],  # unknown type
        [(3, 12, (ACCEPT,))],  # past the end
        [(10, 12, (ACCEPT,))],  # past the end
    ],
)
def test_invalid_request(batches: list[tuple[int, int, tuple[int, ...]]]) -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 9))
    before = states(sp)
    assert ack(sp, "a", *batches) == ErrorCode.INVALID_REQUEST
    assert states(sp) == before


def test_invalid_record_state_and_all_or_nothing() -> None:
    clock = Clock()
    sp = make(clock)
    assert ack(sp, "a", (0, 0, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE  # nothing in flight
    fetch(sp, "a", (0, 4))
    fetch(sp, "b", (5, 9))
    before = states(sp)
    # The second batch names b's records: the first batch is not applied either.
    assert ack(sp, "a", (0, 1, (ACCEPT,)), (4, 5, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE
    assert states(sp) == before
    assert ack(sp, "a", (0, 1, (ACCEPT,)), (1, 1, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE
    assert ack(sp, "a", (0, 0, (ACCEPT,))) == ErrorCode.NONE
    assert ack(sp, "a", (0, 1, (ACCEPT,))) == ErrorCode.NONE  # 0 is below the start now
    assert ack(sp, "a", (2, 2, (RELEASE,))) == ErrorCode.NONE
    assert ack(sp, "a", (2, 2, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE  # not acquired
    assert sp.start_offset == 2 and states(sp)[2] == (AV, 1, NO_MEMBER)


def test_failed_write_rolls_back_and_pending_records_are_held() -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 4))
    result = sp.acknowledge("a", [AcknowledgementBatch(0, 4, (ACCEPT, ACCEPT, RELEASE, 3, 0))])
    transition = result.transition
    assert result.error_code == ErrorCode.NONE and transition is not None
    assert transition.write == StateWrite(
        0,
        3,
        0,
        (StateBatch(0, 1, 2, 1), StateBatch(2, 2, 0, 1), StateBatch(3, 4, 4, 1)),
    )
    assert sp.start_offset == 0  # moves when committed
    assert fetch(sp, "b", (0, 4)) == []  # pending: not acquirable, not acknowledgeable
    assert ack(sp, "a", (0, 0, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE
    sp.complete(transition, False)
    assert all(v == (AQ, 1, "a") for v in states(sp).values())
    with pytest.raises(ValueError):
        sp.complete(transition, True)
    assert ack(sp, "a", (0, 4, (ACCEPT,))) == ErrorCode.NONE
    assert sp.start_offset == 5


# -- the delivery-count limit, lock expiry, leaving --------------------------------------


def test_lock_expiry_and_the_delivery_count_limit() -> None:
    clock = Clock()
    sp = make(clock, limit=2, lock_ms=100)
    fetch(sp, "a", (0, 1))
    assert sp.next_lock_deadline() == 1100
    clock.now = 1099
    assert sp.expire_locks() is None
    clock.now = 1100
    # An acknowledgement after the deadline is refused even before the timer ran.
    assert ack(sp, "a", (0, 1, (ACCEPT,))) == ErrorCode.INVALID_RECORD_STATE
    assert sp.expire_locks() == StateWrite(0, 3, 0, (StateBatch(0, 1, 0, 1),))
    assert fetch(sp, "b", (0, 1)) == [AcquiredRecords(0, 1, 2)]
    clock.now += 100
    write = sp.expire_locks()  # the second delivery was the last one: archived, start moved
    assert write == StateWrite(0, 3, 2, ())
    assert (sp.start_offset, sp.end_offset, sp.next_lock_deadline()) == (2, 2, None)


def test_a_release_at_the_limit_archives() -> None:
    clock = Clock()
    sp = make(clock, limit=2)
    fetch(sp, "a", (0, 1))
    assert ack(sp, "a", (0, 1, (RELEASE,))) == ErrorCode.NONE
    assert fetch(sp, "a", (0, 1)) == [AcquiredRecords(0, 1, 2)]
    result = sp.acknowledge("a", [AcknowledgementBatch(0, 1, (RELEASE, ACCEPT))])
    assert result.transition is not None
    assert result.transition.write.state_batches == (
        StateBatch(0, 0, 4, 2),
        StateBatch(1, 1, 2, 2),
    )
    sp.complete(result.transition, True)
    assert (sp.start_offset, sp.end_offset) == (2, 2)


def test_release_on_leaving() -> None:
    clock = Clock()
    sp = make(clock, limit=2)
    fetch(sp, "a", (0, 1))
    assert ack(sp, "a", (0, 0, (RELEASE,))) == ErrorCode.NONE
    fetch(sp, "b", (0, 0))  # delivery 2 of 0
    fetch(sp, "a", (2, 3))
    assert sp.release_acquired_records("c") is None
    transition = sp.release_acquired_records("b")
    assert isinstance(transition, Transition)
    assert transition.write.state_batches == (StateBatch(0, 0, 4, 2),)
    sp.complete(transition, True)
    transition = sp.release_acquired_records("a")
    assert transition is not None
    assert transition.write.state_batches == (StateBatch(1, 3, 0, 1),)
    sp.complete(transition, True)
    assert sp.start_offset == 1 and sp.counts().acquired == 0 and sp.counts().in_flight == 3


def test_a_full_window_still_redelivers_and_counts() -> None:
    clock = Clock()
    sp = make(clock, locks=4)
    fetch(sp, "a", (0, 3))
    assert not sp.can_acquire()
    assert ack(sp, "a", (1, 1, (RELEASE,))) == ErrorCode.NONE
    assert sp.can_acquire() and sp.next_fetch_offset() == 1
    counts = sp.counts()
    assert (counts.acquired, counts.in_flight, counts.redelivered) == (3, 4, 0)
    assert fetch(sp, "b", (1, 3)) == [AcquiredRecords(1, 1, 2)]
    assert sp.counts().redelivered == 1


def test_a_lowered_limit_archives_on_the_next_acquisition() -> None:
    clock = Clock()
    sp = make(clock, limit=5)
    fetch(sp, "a", (0, 1))
    assert ack(sp, "a", (0, 1, (RELEASE,))) == ErrorCode.NONE
    fetch(sp, "a", (0, 1))
    assert ack(sp, "a", (0, 1, (RELEASE,))) == ErrorCode.NONE  # delivered twice
    sp.config = SharePartitionConfig(delivery_count_limit=2)
    assert fetch(sp, "b", (0, 1)) == []
    assert (sp.start_offset, sp.expire_locks()) == (2, StateWrite(0, 3, 2, ()))


def test_a_snapshot_holds_committed_states_only() -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 2))
    result = sp.acknowledge("a", [AcknowledgementBatch(0, 2, (ACCEPT,))])
    assert result.transition is not None
    assert sp.state_snapshot() == StateWrite(0, 3, 0, (StateBatch(0, 2, 0, 1),))
    assert sp.next_fetch_offset() == 3
    sp.update_log_start_offset(1)  # a pending offset drops out of the window
    sp.complete(result.transition, True)
    assert (sp.start_offset, sp.state_snapshot()) == (3, StateWrite(0, 3, 3, ()))


# -- the log start offset ----------------------------------------------------------------


def test_log_start_offset_moves_the_start() -> None:
    clock = Clock()
    sp = make(clock)
    fetch(sp, "a", (0, 9))
    sp.update_log_start_offset(4)
    assert (sp.start_offset, min(states(sp))) == (4, 4)
    assert ack(sp, "a", (0, 5, (ACCEPT,))) == ErrorCode.NONE  # 0..3 skipped
    assert sp.start_offset == 6
    sp.update_log_start_offset(3)  # backwards: ignored
    sp.update_log_start_offset(20)
    assert (sp.start_offset, sp.end_offset, states(sp)) == (20, 20, {})
    assert ack(sp, "a", (6, 9, (ACCEPT,))) == ErrorCode.NONE


# -- persistence -------------------------------------------------------------------------


def restore(
    clock: Clock,
    persisted: PersistedState | None,
    *,
    reset: str = "latest",
    log_start: int = 0,
    latest: int = 100,
    limit: int = 5,
) -> SharePartition:
    config = SharePartitionConfig(delivery_count_limit=limit, auto_offset_reset=reset)
    return SharePartition.from_persisted(
        "g",
        TOPIC,
        0,
        leader_epoch=4,
        config=config,
        clock=clock,
        persisted=persisted,
        log_start_offset=log_start,
        latest_offset=latest,
    )


def test_start_from_auto_offset_reset() -> None:
    clock = Clock()
    assert restore(clock, None).start_offset == 100
    assert restore(clock, None, reset="earliest", log_start=7).start_offset == 7
    assert restore(clock, PersistedState(2, -1, ()), reset="earliest").start_offset == 0
    assert restore(clock, PersistedState(2, 30, ()), log_start=40).start_offset == 40


def test_snapshot_and_restore() -> None:
    clock = Clock()
    sp = make(clock, limit=3, start=10)
    fetch(sp, "a", (10, 19))
    assert ack(sp, "a", (10, 14, (ACCEPT, RELEASE, REJECT, ACCEPT, RELEASE))) == ErrorCode.NONE
    snapshot = sp.state_snapshot()
    assert snapshot == StateWrite(
        0,
        3,
        11,
        (
            StateBatch(11, 11, 0, 1),
            StateBatch(12, 12, 4, 1),
            StateBatch(13, 13, 2, 1),
            StateBatch(14, 19, 0, 1),
        ),
    )
    persisted = PersistedState(5, snapshot.start_offset, snapshot.state_batches)
    again = restore(clock, persisted)
    assert (again.start_offset, again.end_offset, again.state_epoch) == (11, 20, 5)
    assert {o for o, (s, _, _) in states(again).items() if s is AV} == {11, *range(14, 20)}
    assert states(again)[13] == (ACK, 1, NO_MEMBER)
    # A gap no batch covers is AVAILABLE, never delivered; a count at the limit is archived;
    # a leading final run moves the start.
    persisted = PersistedState(
        1, 0, (StateBatch(0, 3, 2, 1), StateBatch(5, 5, 0, 3), StateBatch(7, 7, 0, 1))
    )
    again = restore(clock, persisted, limit=3)
    assert again.start_offset == 4
    assert states(again) == {
        4: (AV, 0, NO_MEMBER),
        5: (ARC, 3, NO_MEMBER),
        6: (AV, 0, NO_MEMBER),
        7: (AV, 1, NO_MEMBER),
    }
    assert fetch(again, "a", (4, 7)) == [
        AcquiredRecords(4, 4, 1),
        AcquiredRecords(6, 6, 1),
        AcquiredRecords(7, 7, 2),
    ]


@pytest.mark.parametrize(
    "batches",
    [
        (StateBatch(5, 4, 0, 1),),
        (StateBatch(0, 4, 3, 1),),
        (StateBatch(0, 4, 0, -1),),
        (StateBatch(0, 4, 0, 1), StateBatch(4, 6, 2, 1)),
        (StateBatch(0, 0, 0, 1), StateBatch(1 << 20, 1 << 20, 0, 1)),
    ],
)
def test_bad_persisted_state(batches: tuple[StateBatch, ...]) -> None:
    with pytest.raises(ShareStateError):
        restore(Clock(), PersistedState(0, 0, batches))


# -- the model ---------------------------------------------------------------------------

MEMBERS = ("m0", "m1", "m2")
LOCKS, LIMIT, LOCK_MS = 8, 3, 300


class Coordinator:
    """The share coordinator's shard for this share-partition: writes applied in the order
    they are made, merged as Kafka's combiner does."""

    def __init__(self) -> None:
        self.shard = ShareCoordinatorShard(3, lambda topic: 1, lambda: 0)
        self.key = SharePartitionKey("g", TOPIC, 0)
        self._run(self.shard.initialize_state(self.key, 0, -1))

    def _run(self, outcome: Outcome) -> Outcome:
        assert outcome.error == ErrorCode.NONE, outcome
        self.shard.replay_all(outcome.records)
        return outcome

    def apply(self, write: StateWrite | None) -> None:
        if write is not None:
            self._run(
                self.shard.write_state(
                    self.key,
                    write.state_epoch,
                    write.leader_epoch,
                    write.start_offset,
                    write.state_batches,
                )
            )

    def persisted(self) -> tuple[int, dict[int, tuple[int, int]]]:
        """The start offset and (delivery state, count) per offset held now."""
        state = self.shard.states[self.key]
        offsets = {
            o: (b.delivery_state, b.delivery_count)
            for b in state.state_batches
            for o in range(b.first_offset, b.last_offset + 1)
        }
        return state.start_offset, offsets

    def read(self, leader_epoch: int) -> PersistedState:
        outcome = self._run(self.shard.read_state(self.key, leader_epoch))
        return PersistedState(outcome.state_epoch, outcome.start_offset, outcome.state_batches)


class Rec:
    def __init__(self, count: int, state: RecordState = AV) -> None:
        self.state = state
        self.count = count
        self.owner = NO_MEMBER
        self.deadline = 0
        self.pending = 0


class SharePartitionModel(RuleBasedStateMachine):
    """Members acquiring, acknowledging (every type, failed writes too), timing out, leaving;
    the log growing (aborted transactions too) and its start moving; fetches read_committed
    or not; the leader failing over to the persisted state. The model keeps its own
    per-offset states and checks the share-partition against them."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.log_start = 0
        self.log_end = 20
        self.config = SharePartitionConfig(
            max_record_locks=LOCKS, delivery_count_limit=LIMIT, record_lock_duration_ms=LOCK_MS
        )
        self.coordinator = Coordinator()
        self.leader_epoch = 0
        self.sp = self._load()
        self.pending: list[tuple[Transition, bool]] = []
        self.accepted: set[int] = set()  # committed ACCEPTs
        self.start = self.sp.start_offset
        self.end = self.sp.end_offset
        self.recs: dict[int, Rec] = {}
        # offsets of the log in aborted transactions (producer 7's, never committed)
        self.aborted: set[int] = set()

    def _load(self) -> SharePartition:
        self.leader_epoch += 1
        return SharePartition.from_persisted(
            "g",
            TOPIC,
            0,
            leader_epoch=self.leader_epoch,
            config=self.config,
            clock=self.clock,
            persisted=self.coordinator.read(self.leader_epoch),
            log_start_offset=self.log_start,
            latest_offset=self.log_start,
        )

    # the model's own rules

    def _final(self, rec: Rec) -> bool:
        return rec.state in (ACK, ARC)

    def _advance(self) -> None:
        while self.start < self.end:
            rec = self.recs[self.start]
            if rec.pending or not self._final(rec):
                return
            del self.recs[self.start]
            self.start += 1

    def _expire(self) -> None:
        for rec in self.recs.values():
            if rec.state is AQ and not rec.pending and rec.deadline <= self.clock.now:
                rec.state = AV if rec.count < LIMIT else ARC
                rec.owner = NO_MEMBER
        self._advance()

    def _timer(self) -> None:
        """What the driver's timer does after every step: expire, and write."""
        self.coordinator.apply(self.sp.expire_locks())
        self._expire()

    def _run_transition(self, transition: Transition | None, outcome: str) -> None:
        if transition is None:
            return
        if outcome in ("ok", "hold"):  # the write succeeds
            self.coordinator.apply(transition.write)
        if outcome == "hold":
            self.pending.append((transition, True))
        elif outcome == "hold-fail":
            self.pending.append((transition, False))
        else:
            self._complete(transition, outcome == "ok")

    def _complete(self, transition: Transition, ok: bool) -> None:
        self.sp.complete(transition, ok)
        tid = transition.transition_id
        for offset, rec in self.recs.items():
            if rec.pending != tid:
                continue
            rec.pending = 0
            if ok:
                if rec.state is ACK:
                    self.accepted.add(offset)
            else:
                rec.state, rec.owner = AQ, rec.saved_owner  # type: ignore[attr-defined]
        self._advance()

    def _begin(self, changes: dict[int, RecordState], transition: Transition | None) -> None:
        assert transition is not None
        for offset, state in changes.items():
            rec = self.recs[offset]
            rec.pending = transition.transition_id
            rec.saved_owner = rec.owner  # type: ignore[attr-defined]
            rec.state, rec.owner = state, NO_MEMBER

    # rules

    @initialize(aborted=st.sets(st.integers(0, 19), max_size=12))
    def initial_log(self, aborted: set[int]) -> None:
        self.aborted = aborted

    @rule(n=st.integers(1, 10), aborted=st.booleans())
    def produce(self, n: int, aborted: bool) -> None:
        if aborted:
            self.aborted.update(range(self.log_end, self.log_end + n))
        self.log_end += n

    def _read(self, base: int, sizes: list[int]) -> list[FetchedBatch]:
        """Batches from ``base``, each wholly in an aborted transaction or wholly out."""
        batches: list[FetchedBatch] = []
        for size in sizes:
            if base >= self.log_end:
                break
            last = min(base + size - 1, self.log_end - 1)
            inside = base in self.aborted
            for offset in range(base + 1, last + 1):
                if (offset in self.aborted) != inside:
                    last = offset - 1
                    break
            if inside:
                batches.append(FetchedBatch(base, last, 7, True))
            else:
                batches.append(FetchedBatch(base, last))
            base = last + 1
        return batches

    @rule(
        member=st.sampled_from(MEMBERS),
        back=st.integers(0, 2),
        sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
        max_records=st.integers(1, 10),
        committed=st.booleans(),
    )
    def acquire(
        self, member: str, back: int, sizes: list[int], max_records: int, committed: bool
    ) -> None:
        fetch_offset = self.sp.next_fetch_offset()
        self._expire()
        if fetch_offset >= self.log_end:
            return
        batches = self._read(max(self.log_start, fetch_offset - back), sizes)
        aborted = [(7, min(self.aborted))] if committed and self.aborted else None
        got = self.sp.acquire(member, fetch_offset, batches, max_records, aborted)
        offsets = [
            (o, r.delivery_count) for r in got for o in range(r.first_offset, r.last_offset + 1)
        ]
        assert len(offsets) <= max_records
        assert [o for o, _ in offsets] == sorted({o for o, _ in offsets})
        for offset, count in offsets:
            assert batches[0].base_offset <= offset <= batches[-1].last_offset
            assert not committed or offset not in self.aborted, offset
            if offset < self.end:
                rec = self.recs[offset]
                assert rec.state is AV and not rec.pending, offset
                assert count == rec.count + 1
            else:
                # New offsets skipped before it: aborted ones, archived (read_committed).
                for skipped in range(self.end, offset):
                    assert committed and skipped in self.aborted, skipped
                    self.recs[skipped] = Rec(0, ARC)
                assert offset - self.start < LOCKS
                assert count == 1
                rec = self.recs[offset] = Rec(0)
                self.end = offset + 1
            rec.state, rec.count, rec.owner = AQ, count, member
            rec.deadline = self.clock.now + LOCK_MS
        # Aborted records read_committed reached: archived, their count kept.
        for offset, rec in self.recs.items():
            seen = self.sp.record(offset)
            if rec.state is not AV or rec.pending or (seen is not None and seen[0] is AV):
                continue
            # archived (and, at the start, gone from the window)
            assert committed and offset in self.aborted, offset
            assert seen is None or seen == (ARC, rec.count, NO_MEMBER), offset
            rec.state = ARC
        # Records skipped over must not have been acquirable.
        acquired = {o for o, _ in offsets}
        if offsets and len(offsets) < max_records:
            for offset in range(max(batches[0].base_offset, self.start), offsets[-1][0]):
                if offset not in acquired and offset in self.recs:
                    assert self.recs[offset].state is not AV or self.recs[offset].pending
        self._sync_after_acquire()
        self._timer()

    def _sync_after_acquire(self) -> None:
        """Offsets the share-partition archived or skipped as missing from the log (this
        model's log has none, except below a moved start), window holes, and new aborted
        offsets read_committed archived past the last acquired one: take them."""
        for offset, state, count, _owner, _ in self.sp.in_flight():
            if offset not in self.recs:
                assert state is ARC and count == 0
                self.recs[offset] = Rec(0, ARC)
        for offset in range(self.end, min(self.sp.end_offset, self.sp.start_offset)):
            self.recs.setdefault(offset, Rec(0, ARC))  # archived, and the start passed them
        self.end = max(self.end, self.sp.end_offset)
        if self.sp.start_offset > self.start and not self.recs:
            self.start = self.sp.start_offset
        self._advance()

    @precondition(lambda self: self.start < self.end)
    @rule(
        member=st.sampled_from(MEMBERS),
        data=st.data(),
        outcome=st.sampled_from(["ok", "ok", "fail", "hold", "hold-fail"]),
    )
    def acknowledge(self, member: str, data: st.DataObject, outcome: str) -> None:
        owned = sorted(o for o, r in self.recs.items() if r.owner == member and r.state is AQ)
        if owned and data.draw(st.integers(0, 4)) > 0:
            # A run of this member's records, as a client acknowledges them.
            index = data.draw(st.integers(0, len(owned) - 1))
            first = last = owned[index]
            while last + 1 in owned and data.draw(st.integers(0, 3)) > 0:
                last += 1
        else:
            first = data.draw(st.integers(max(0, self.start - 2), self.end + 2))
            last = data.draw(st.integers(first - 1, first + 4))
        if last >= first and data.draw(st.integers(0, 2)) == 0:
            size = last - first + 1
            types = tuple(data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)))
        else:
            types = (
                data.draw(st.sampled_from([ACCEPT, ACCEPT, RELEASE, RELEASE, REJECT, GAP, 4])),
            )
        batches = [AcknowledgementBatch(first, last, types)]
        self._expire()
        expected, changes = self._expect_ack(member, batches)
        result = self.sp.acknowledge(member, batches)
        assert result.error_code == expected, (batches, expected, result)
        if expected == ErrorCode.NONE and changes:
            self._begin(changes, result.transition)
            self._run_transition(result.transition, outcome)
        else:
            assert result.transition is None
        self._timer()

    def _expect_ack(
        self, member: str, batches: list[AcknowledgementBatch]
    ) -> tuple[int, dict[int, RecordState]]:
        for b in batches:
            t = b.acknowledge_types
            if b.first_offset > b.last_offset or not t or any(x > 3 for x in t):
                return ErrorCode.INVALID_REQUEST, {}
            if len(t) > 1 and len(t) != b.last_offset - b.first_offset + 1:
                return ErrorCode.INVALID_REQUEST, {}
        changes: dict[int, RecordState] = {}
        for b in batches:
            if b.last_offset < self.start:
                continue
            if self.start == self.end:
                return ErrorCode.INVALID_RECORD_STATE, {}
            if b.last_offset >= self.end:
                return ErrorCode.INVALID_REQUEST, {}
            for offset in range(max(b.first_offset, self.start), b.last_offset + 1):
                rec = self.recs[offset]
                if rec.state is not AQ or rec.pending or rec.owner != member:
                    return ErrorCode.INVALID_RECORD_STATE, {}
                t = b.acknowledge_types
                kind = t[offset - b.first_offset] if len(t) > 1 else t[0]
                changes[offset] = {
                    ACCEPT: ACK,
                    RELEASE: AV if rec.count < LIMIT else ARC,
                    REJECT: ARC,
                    GAP: ARC,
                }[kind]
        return ErrorCode.NONE, changes

    @precondition(lambda self: self.pending)
    @rule(index=st.integers(0, 10))
    def complete_pending(self, index: int) -> None:
        transition, ok = self.pending.pop(index % len(self.pending))
        self._complete(transition, ok)
        self._timer()

    @rule(member=st.sampled_from(MEMBERS), outcome=st.sampled_from(["ok", "fail", "hold"]))
    def leave(self, member: str, outcome: str) -> None:
        self._expire()
        changes = {
            o: (AV if r.count < LIMIT else ARC)
            for o, r in self.recs.items()
            if r.state is AQ and not r.pending and r.owner == member
        }
        transition = self.sp.release_acquired_records(member)
        assert (transition is None) == (not changes)
        if changes:
            self._begin(changes, transition)
            self._run_transition(transition, outcome)
        self._timer()

    @rule(ms=st.integers(1, 150))
    def advance_clock(self, ms: int) -> None:
        self.clock.now += ms
        self._timer()

    @rule(step=st.integers(1, 3), now=st.integers(0, 3))
    def move_log_start(self, step: int, now: int) -> None:
        if now:  # retention is rare
            return
        self.log_start = min(self.log_end, self.log_start + step)
        self.sp.update_log_start_offset(self.log_start)
        if self.log_start > self.start:
            for offset in range(self.start, min(self.log_start, self.end)):
                del self.recs[offset]
            self.start = self.log_start
            self.end = max(self.end, self.log_start)
            self._advance()
        self._timer()

    @rule()
    def fail_over(self) -> None:
        """The leader dies: pending writes that went out stay written, nothing else."""
        self.pending.clear()
        self.sp = self._load()
        for offset in self.accepted:
            if offset >= self.sp.start_offset:
                record = self.sp.record(offset)
                assert record is not None and record[0] is ACK, offset
        self.accepted = {o for o in self.accepted if o >= self.sp.start_offset}
        self.start, self.end = self.sp.start_offset, self.sp.end_offset
        self.recs = {}
        for offset, state, count, owner, pending in self.sp.in_flight():
            assert state is not AQ and owner == NO_MEMBER and not pending
            assert count <= LIMIT and (state is not AV or count < LIMIT)
            rec = self.recs[offset] = Rec(count, state)
            rec.state = state

    # invariants

    @invariant()
    def same_as_the_model(self) -> None:
        assert (self.sp.start_offset, self.sp.end_offset) == (self.start, self.end)
        seen = {o: (s, c, m, p) for o, s, c, m, p in self.sp.in_flight()}
        want = {o: (r.state, r.count, r.owner, bool(r.pending)) for o, r in self.recs.items()}
        assert seen == want

    @invariant()
    def one_owner_and_the_limits(self) -> None:
        for _, state, count, owner, _ in self.sp.in_flight():
            assert (state is AQ) == (owner != NO_MEMBER)
            assert count <= LIMIT
            assert state is not AV or count < LIMIT
        assert self.sp.end_offset - self.sp.start_offset <= LOCKS
        counts = self.sp.counts()
        assert counts.acquired == sum(r.state is AQ for r in self.recs.values())

    @invariant()
    def below_the_start_is_done(self) -> None:
        for offset in self.accepted:
            if offset >= self.sp.start_offset:
                assert self.recs[offset].state is ACK
        first = next(iter(self.sp.in_flight()), None)
        if first is not None:
            assert first[0] == self.sp.start_offset
            assert first[4] or first[1] not in (ACK, ARC)

    @invariant()
    def written_state_matches(self) -> None:
        """Every record neither acquired nor in a transition is as the coordinator holds it
        (an offset it has no batch for: AVAILABLE, never delivered)."""
        start, persisted = self.coordinator.persisted()
        assert start <= self.sp.start_offset
        for offset, state, count, _, pending in self.sp.in_flight():
            if state is not AQ and not pending:
                assert persisted.get(offset, (0, 0)) == (int(state), count), offset

    @invariant()
    def fetching_starts_at_the_first_available_record(self) -> None:
        available = [o for o, r in self.recs.items() if r.state is AV and not r.pending]
        assert self.sp.next_fetch_offset() == (available[0] if available else self.end)

    @invariant()
    def expired_locks_are_released(self) -> None:
        for _, state, _, _, pending in self.sp.in_flight():
            if state is AQ and not pending:
                deadline = self.sp.next_lock_deadline()
                assert deadline is not None and deadline > self.clock.now


SharePartitionModel.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSharePartitionModel = SharePartitionModel.TestCase
