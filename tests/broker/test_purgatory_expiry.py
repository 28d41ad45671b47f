"""The purgatory's expiry queues (one per delay, one timer each): every operation not
completed first expires exactly once, at its own deadline, whatever the mix of delays,
watch times, early completions and operations watched from an expiry's callback."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker_py.utils.time import MockTime


class Op(DelayedOperation):
    def __init__(self, delay_ms: int, time: MockTime, log: list) -> None:
        super().__init__(delay_ms)
        self.time = time
        self.log = log
        self.deadline = time.monotonic() + max(0, delay_ms) / 1000
        self.expired_at: float | None = None
        self.completions = 0
        self.then: tuple[DelayedOperationPurgatory, int] | None = None

    def try_complete(self) -> bool:
        return False

    def on_expiration(self) -> None:
        self.expired_at = self.time.monotonic()

    def on_complete(self) -> None:
        self.completions += 1
        if self.then is not None:  # watch another operation from inside the expiry
            purgatory, delay = self.then
            op = Op(delay, self.time, self.log)
            self.log.append(op)
            purgatory.watch(op, ["k"])


STEP = st.one_of(
    st.tuples(st.just("watch"), st.sampled_from([0, 1, 5, 500, 501]), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0, 0.001, 0.004, 0.2, 0.5]), st.just(False)),
    st.tuples(st.just("complete"), st.integers(0, 50), st.just(False)),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEP, max_size=40))
def test_each_operation_expires_once_at_its_deadline_unless_completed(steps):
    time = MockTime()
    purgatory = DelayedOperationPurgatory("Fetch", time)
    ops: list[Op] = []
    for kind, arg, chain in steps:
        if kind == "watch":
            op = Op(arg, time, ops)
            if chain:
                op.then = (purgatory, 1)
            ops.append(op)
            purgatory.watch(op, ["k", ("t", arg)])
        elif kind == "advance":
            time.advance(arg)
        elif ops:
            ops[arg % len(ops)].force_complete()
        now = time.monotonic()
        for op in ops:
            assert op.completions <= 1
            if op.expired_at is not None:
                assert op.expired_at == op.deadline
            elif not op.completed:  # still waiting: its deadline not passed by an advance
                assert op.deadline > now or (op.deadline == now and kind != "advance")
    time.advance(1.0)
    assert all(op.completions == 1 for op in ops)
    assert purgatory.watched() == 0
    assert all(not e.entries and e.timer is None for e in purgatory._expiries.values())
