"""The purgatory drops a completed operation from the watch lists of all its keys at
once: a fetch over many partitions completed by an append to one of them is not kept
under the others (Kafka purges them periodically; here they go at completion)."""

from __future__ import annotations

from broker_py.replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker_py.utils.time import MockTime


class Waiting(DelayedOperation):
    def __init__(self, delay_ms: int, ready: dict) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.answers = 0

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready["now"] else False

    def on_complete(self) -> None:
        self.answers += 1


def test_an_operation_completed_under_one_key_leaves_every_key():
    purgatory = DelayedOperationPurgatory("Fetch", MockTime())
    ready = {"now": False}
    ops = [Waiting(500, ready) for _ in range(1000)]
    for op in ops:
        purgatory.watch(op, [("t", p) for p in range(30)])
    assert purgatory.watch_entries() == 30_000
    ready["now"] = True
    assert purgatory.check_and_complete(("t", 0)) == 1000
    assert purgatory.watch_entries() == 0 and not purgatory.watchers
    assert all(op.answers == 1 for op in ops)


def test_an_expired_operation_leaves_every_key():
    time = MockTime()
    purgatory = DelayedOperationPurgatory("Fetch", time)
    op = Waiting(100, {"now": False})
    purgatory.watch(op, [("t", 0), ("t", 1)])
    time.advance(0.2)
    assert op.completed and op.answers == 1 and not purgatory.watchers
