"""The replica manager, the purgatories and a partition's high watermark, driven with
an injected clock and real logs: no sockets, no sleeping."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import logstore
from broker_py.cluster.partition import Partition
from broker_py.log.unified_log import UnifiedLog
from broker_py.replication.fetch_data import FetchParams
from broker_py.replication.produce_result import ProducePartitionResult
from broker_py.replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker_py.replication.replica_manager import COORDINATOR, ReplicaManager
from broker_py.server.fetch_session import NULL_UUID, CachedPartition
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

ME = 1


def batch(n: int = 1) -> bytes:
    return logstore.encode_batch([(b"k", b"v%d" % i, [], 1_700_000_000_000) for i in range(n)])


class Countdown(DelayedOperation):
    """Completes once ``left`` reaches 0."""

    def __init__(self, delay_ms: int, left: int) -> None:
        super().__init__(delay_ms)
        self.left = left
        self.outcome = None

    def try_complete(self) -> bool:
        return self.force_complete() if self.left <= 0 else False

    def on_expiration(self) -> None:
        self.outcome = "expired"

    def on_complete(self) -> None:
        self.outcome = self.outcome or "done"


def test_purgatory_completes_on_check_or_expires_once():
    time = MockTime()
    purgatory = DelayedOperationPurgatory("test", time)
    now = Countdown(1000, 0)
    assert purgatory.try_complete_else_watch(now, ["a"]) and now.outcome == "done"
    later = Countdown(1000, 1)
    assert not purgatory.try_complete_else_watch(later, ["a", "b"])
    assert purgatory.watched() == 1
    later.left = 0
    assert purgatory.check_and_complete("b") == 1 and later.outcome == "done"
    assert purgatory.watched() == 0
    time.advance(2.0)  # its timer was cancelled: nothing runs again
    assert later.outcome == "done"
    slow = Countdown(500, 1)
    purgatory.try_complete_else_watch(slow, ["a"])
    time.advance(0.499)
    assert slow.outcome is None
    time.advance(0.001)
    assert slow.outcome == "expired" and slow.completed
    assert purgatory.check_and_complete("a") == 0 and purgatory.watched() == 0


def test_complete_all_answers_every_watcher_of_a_key():
    purgatory = DelayedOperationPurgatory("test", MockTime())
    ops = [Countdown(1000, 1) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["gone"])
    assert purgatory.complete_all("gone") == 3
    assert [op.outcome for op in ops] == ["done"] * 3


def leader(
    logs, name="t-0", isr=(ME,), replicas=(ME,)
) -> tuple[ReplicaManager, Partition, MockTime]:
    time = MockTime()
    manager = ReplicaManager(ME, lambda topic: 2, time)
    topic, index = name.rsplit("-", 1)
    partition = manager.make_leader(topic, int(index), logs(name), 0, list(isr), list(replicas))
    return manager, partition, time


def test_alone_the_high_watermark_follows_every_append(logs):
    manager, partition, _ = leader(logs)
    answers = []
    manager.append_records(1000, -1, [("t", [(0, batch(3), None)])], answers.append)
    assert answers == [[("t", [ProducePartitionResult(0, 0, 0, -1, 0)])]]
    assert partition.high_watermark == partition.log_end_offset == 3


def test_acks_all_waits_for_the_follower_and_answers_when_the_hw_passes(logs):
    manager, partition, time = leader(logs, isr=(ME, 2), replicas=(ME, 2))
    answers = []
    manager.append_records(1000, -1, [("t", [(0, batch(2), None)])], answers.append)
    assert answers == [] and partition.high_watermark == 0
    assert manager.produce_purgatory.watched() == 1
    partition.update_follower_fetch_state(2, 1)  # the follower has offset 0 only
    manager.produce_purgatory.check_and_complete(("t", 0))
    assert answers == [] and partition.high_watermark == 1
    partition.update_follower_fetch_state(2, 2)
    manager.produce_purgatory.check_and_complete(("t", 0))
    assert answers == [[("t", [ProducePartitionResult(0, 0, 0, -1, 0)])]]
    assert partition.high_watermark == 2
    # acks=1 does not wait for the follower.
    answers.clear()
    manager.append_records(1000, 1, [("t", [(0, batch(1), None)])], answers.append)
    assert answers == [[("t", [ProducePartitionResult(0, 0, 2, -1, 0)])]]
    assert partition.high_watermark == 2


def test_acks_all_times_out_and_below_min_isr_writes_nothing(logs):
    manager, partition, time = leader(logs, isr=(ME, 2), replicas=(ME, 2, 3))
    answers = []
    manager.append_records(1000, -1, [("t", [(0, batch(), None)])], answers.append)
    time.advance(0.999)
    assert answers == []
    time.advance(0.001)
    ((_, [result]),) = answers[0]
    assert (result.index, result.error_code, result.base_offset) == (
        0,
        ErrorCode.REQUEST_TIMED_OUT,
        0,
    )
    # The ISR shrinks to the leader: acks=all is refused before the append (min ISR 2).
    partition.make_leader(1, [ME], [ME, 2, 3])
    end = partition.log_end_offset
    answers.clear()
    manager.append_records(1000, -1, [("t", [(0, batch(), None)])], answers.append)
    assert answers[0][0][1][0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == end


def test_losing_the_partition_answers_waiting_produces(logs):
    manager, partition, _ = leader(logs, isr=(ME, 2), replicas=(ME, 2))
    answers = []
    manager.append_records(1000, -1, [("t", [(0, batch(), None)])], answers.append)
    manager.stop_replica("t", 0)
    assert answers[0][0][1][0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answers.clear()
    manager.append_records(1000, 1, [("t", [(0, batch(), None)])], answers.append)
    assert answers[0][0][1][0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_coordinator_appends_go_the_same_way(logs):
    manager, partition, _ = leader(logs, name="__consumer_offsets-0")
    answers = []
    manager.append_records(
        5000, -1, [("__consumer_offsets", [(0, batch(2), False)])], answers.append, COORDINATOR
    )
    assert answers[0][0][1][0].wire()[:3] == (0, 0, 0) and partition.high_watermark == 2


def fetch_at(offset: int, topic: str = "t", index: int = 0) -> CachedPartition:
    return CachedPartition(topic, NULL_UUID, index, offset, 1 << 20)


def test_delayed_fetch_reads_again_after_appends_and_at_expiry(logs):
    async def run():
        manager, partition, time = leader(logs)
        size = len(batch(1))
        reads = []
        read = manager.read_from_local_log

        def counted(params, infos):
            result = read(params, infos)
            reads.append(result.bytes_read // size)
            return result

        manager.read_from_local_log = counted
        pending = manager.fetch_messages(FetchParams(-1, 500, 3 * size, 1 << 20), [fetch_at(0)])
        assert isinstance(pending, asyncio.Future)
        manager.append_records(1000, 1, [("t", [(0, batch(1), None)])], lambda r: None)
        manager.append_records(1000, 1, [("t", [(0, batch(1), None)])], lambda r: None)
        time.advance(0)  # the deferred check: one read for both appends
        assert reads == [0, 2] and not pending.done()
        manager.append_records(1000, 1, [("t", [(0, batch(1), None)])], lambda r: None)
        time.advance(0)
        assert pending.done()
        ((answer,),) = [pending.result()]
        assert answer.error_code == 0 and len(answer.records) == 3 * size
        assert answer.high_watermark == 3
        short = manager.fetch_messages(FetchParams(-1, 500, 100 * size, 1 << 20), [fetch_at(0)])
        time.advance(0.5)
        assert short.done() and len(short.result()[0].records) == 3 * size
        assert manager.fetch_purgatory.watched() == 0

    asyncio.run(run())


class HighWatermarkModel(RuleBasedStateMachine):
    """A leader with two followers: appends, follower fetches and ISR changes in any
    order keep the high watermark at most the least LEO of the ISR, never moving back,
    and an acks=all answer NONE only once the high watermark passed its records."""

    @initialize()
    def setup(self):
        import tempfile

        self.dir = tempfile.TemporaryDirectory()
        self.plog = logstore.Log.open(self.dir.name + "/t-0")
        self.time = MockTime()
        self.manager = ReplicaManager(ME, lambda topic: 2, self.time)
        self.epoch = 0
        self.partition = self.manager.make_leader(
            "t", 0, UnifiedLog("t", 0, self.plog), 0, [ME, 2, 3], [ME, 2, 3]
        )
        self.follower_leo = {2: 0, 3: 0}
        self.last_hw = 0
        self.acked: list[tuple[int, int]] = []  # (required offset, error)

    def teardown(self):
        if hasattr(self, "plog"):
            self.plog.close()
            self.dir.cleanup()

    @rule(n=st.integers(1, 3), acks=st.sampled_from([1, -1]))
    def produce(self, n, acks):
        def answer(results, n=n):
            result = results[0][1][0]
            error, base = result.error_code, result.base_offset
            if error == ErrorCode.NONE and acks == -1:
                self.acked.append((base + n, self.partition.high_watermark))

        self.manager.append_records(10_000, acks, [("t", [(0, batch(n), None)])], answer)

    @rule(replica=st.sampled_from([2, 3]), data=st.data())
    def follower_fetch(self, replica, data):
        leo = data.draw(st.integers(self.follower_leo[replica], self.partition.log_end_offset))
        self.follower_leo[replica] = leo
        self.partition.update_follower_fetch_state(replica, leo)
        self.manager.produce_purgatory.check_and_complete(("t", 0))

    @rule(isr=st.sampled_from([[ME], [ME, 2], [ME, 3], [ME, 2, 3]]))
    def change_isr(self, isr):
        # A follower joins the ISR only once it reached the high watermark (the
        # expansion rule); any member may leave.
        hw = self.partition.high_watermark
        isr = [r for r in isr if r == ME or r in self.partition.isr or self.follower_leo[r] >= hw]
        self.epoch += 1
        self.partition.make_leader(self.epoch, isr, [ME, 2, 3])
        for r in isr:
            if r != ME:
                self.partition.update_follower_fetch_state(r, self.follower_leo[r])
        self.manager.produce_purgatory.check_and_complete(("t", 0))

    @rule(seconds=st.sampled_from([0.0, 1.0, 20.0]))
    def tick(self, seconds):
        self.time.advance(seconds)

    @invariant()
    def high_watermark_bounds(self):
        if not hasattr(self, "partition"):
            return
        p = self.partition
        hw = p.high_watermark
        assert hw >= self.last_hw
        assert hw <= p.log_end_offset
        for r in p.isr:
            if r != ME:
                assert hw <= self.follower_leo[r]
        self.last_hw = hw
        for required, hw_at_ack in self.acked:
            assert hw_at_ack >= required


HighWatermarkModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
test_high_watermark_model = HighWatermarkModel.TestCase


def _lai(controller_epoch, *states):
    from broker_py.common.topic_partition import TopicPartition
    from broker_py.controller.controller_request_batch import (
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequestData,
    )

    return LeaderAndIsrRequestData(
        1,
        controller_epoch,
        -1,
        tuple(
            LeaderAndIsrPartitionState(
                TopicPartition(t, p),
                controller_epoch,
                leader,
                epoch,
                tuple(isr),
                pe,
                tuple(replicas),
                (),
                (),
                True,
            )
            for t, p, leader, epoch, isr, replicas, pe in states
        ),
        {},
        (),
    )


class FakeLogManager:
    """The log manager a replica manager opens and deletes logs through, over the
    ``logs`` fixture: what was opened and deleted, in order."""

    def __init__(self, logs) -> None:
        self._logs = logs
        self.opened: list[tuple[str, int]] = []
        self.deleted: list[tuple[str, int]] = []

    def get_or_create_log(self, info, index: int, config: dict) -> UnifiedLog:
        self.opened.append((info.name, index))
        return self._logs(f"{info.name}-{index}")

    def delete_log(self, topic: str, index: int) -> None:
        self.deleted.append((topic, index))


def log_config(topic: str, index: int):
    return SimpleNamespace(name=topic), {}


def test_leader_and_isr_leads_follows_and_ignores_what_is_stale(logs):
    from broker_py.common.topic_partition import TopicPartition

    log_manager = FakeLogManager(logs)
    manager = ReplicaManager(ME, lambda topic: 1, MockTime(), log_manager=log_manager)
    get_log = log_config
    tp = TopicPartition("t", 0)
    error, errors = manager.become_leader_or_follower(
        _lai(2, ("t", 0, ME, 3, [ME, 2], [ME, 2], 0), ("u", 0, 2, 0, [2], [2], 0)), get_log
    )
    assert error == ErrorCode.NONE and errors == {
        tp: ErrorCode.NONE,
        TopicPartition("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    partition = manager.get_partition("t", 0)
    assert partition.is_leader and partition.leader_epoch == 3
    assert log_manager.opened == [("t", 0)]
    # the new epoch starts at the log end in the leader-epoch cache
    assert partition.log.end_offset_for_epoch(3) == (3, 0)
    # an older controller epoch is refused whole; an older leader epoch per partition
    assert manager.become_leader_or_follower(_lai(1, ("t", 0, 2, 9, [2], [ME, 2], 1)), get_log) == (
        ErrorCode.STALE_CONTROLLER_EPOCH,
        {},
    )
    assert manager.become_leader_or_follower(_lai(2, ("t", 0, 2, 2, [2], [ME, 2], 1)), get_log)[
        1
    ] == {tp: ErrorCode.STALE_CONTROLLER_EPOCH}
    assert partition.is_leader
    # a waiting acks=all produce is answered NOT_LEADER_OR_FOLLOWER when leadership moves
    answers = []
    manager.append_records(10_000, -1, [("t", [(0, batch(1), None)])], answers.append)
    assert answers == []
    assert manager.become_leader_or_follower(_lai(2, ("t", 0, 2, 4, [2, ME], [ME, 2], 1)), get_log)[
        1
    ] == {tp: ErrorCode.NONE}
    assert not partition.is_leader and partition.leader_id == 2 and partition.leader_epoch == 4
    ((_, [result]),) = answers[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result.base_offset == -1, "a lost leadership answers no offset"


def test_stop_replica_deletes_and_fences_old_epochs(logs):
    from broker_py.common.topic_partition import TopicPartition
    from broker_py.controller.controller_request_batch import (
        StopReplicaPartitionState,
        StopReplicaRequestData,
    )

    log_manager = FakeLogManager(logs)
    manager = ReplicaManager(ME, lambda topic: 1, MockTime(), log_manager=log_manager)
    manager.become_leader_or_follower(
        _lai(2, ("t", 0, ME, 3, [ME], [ME], 0), ("t", 1, ME, 3, [ME], [ME], 0)), log_config
    )
    request = StopReplicaRequestData(
        1,
        2,
        -1,
        (
            StopReplicaPartitionState(TopicPartition("t", 0), 1, False),
            StopReplicaPartitionState(TopicPartition("t", 1), -2, True),
        ),
    )
    error, errors = manager.stop_replicas(request)
    assert error == ErrorCode.NONE
    assert errors == {
        TopicPartition("t", 0): ErrorCode.FENCED_LEADER_EPOCH,
        TopicPartition("t", 1): ErrorCode.NONE,
    }
    assert (
        log_manager.deleted == [("t", 1)]
        and manager.get_partition("t", 1) is None
        and manager.get_partition("t", 0).is_leader
    )
    assert manager.stop_replicas(StopReplicaRequestData(1, 1, -1, ())) == (
        ErrorCode.STALE_CONTROLLER_EPOCH,
        {},
    )
