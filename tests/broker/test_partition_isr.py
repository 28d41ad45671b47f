"""The leader's view of its followers (``cluster/replica.py``) and its ISR proposals
(``Partition.maybe_expand_isr`` / ``maybe_shrink_isr``), on real logs with explicit
times: when a follower is caught up, when it may join, when it is dropped, and what the
high watermark counts meanwhile."""

from __future__ import annotations

import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import logstore
from broker_py.cluster.partition import Partition
from broker_py.cluster.replica import Replica
from broker_py.log.unified_log import UnifiedLog
from logstore.protocol.error_codes import ErrorCode

from .test_replica_manager import batch

ME = 1
LAG_MS = 30_000


def test_last_caught_up_time_follows_kafkas_rule():
    r = Replica(2)
    r.update_fetch_state(
        fetch_offset=5, log_start_offset=0, leader_end_offset=5, fetch_time_ms=1000
    )
    assert r.last_caught_up_time_ms == 1000 and r.log_end_offset == 5
    # behind the leader now, but at what the leader had at the previous fetch
    r.update_fetch_state(
        fetch_offset=5, log_start_offset=0, leader_end_offset=9, fetch_time_ms=2000
    )
    assert r.last_caught_up_time_ms == 1000
    r.update_fetch_state(
        fetch_offset=9, log_start_offset=0, leader_end_offset=12, fetch_time_ms=3000
    )
    assert r.last_caught_up_time_ms == 2000  # it now has what the leader had at 2000
    r.update_fetch_state(
        fetch_offset=10, log_start_offset=0, leader_end_offset=14, fetch_time_ms=4000
    )
    assert r.last_caught_up_time_ms == 2000  # not yet at 12
    assert r.is_caught_up(14, 2000 + LAG_MS, LAG_MS) and not r.is_caught_up(
        14, 2001 + LAG_MS, LAG_MS
    )
    assert r.is_caught_up(10, 10**9, LAG_MS)  # same LEO as the leader: never lagging


def _leader(logs, isr, replicas=(ME, 2, 3), epoch=1):
    proposals = []
    p = Partition("t", 0, logs("t-0"), ME, min_insync_replicas=lambda: 2)
    p.alter_isr = lambda partition, change: proposals.append(change)
    p.make_leader(epoch, list(isr), list(replicas), now_ms=0)
    return p, proposals


def test_a_follower_joins_once_at_the_high_watermark_and_the_epoch_start(logs):
    p, proposals = _leader(logs, [ME, 2])
    p.append_records_to_leader(batch(4), 1)
    assert p.leader_epoch_start_offset == 0
    p.update_follower_fetch_state(2, 4, now_ms=10)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(3, 2, now_ms=10)  # below the high watermark
    assert proposals == []
    p.update_follower_fetch_state(3, 4, now_ms=20)
    assert (
        len(proposals) == 1 and proposals[0].expanding and proposals[0].proposed_isr == {ME, 2, 3}
    )
    # the high watermark already waits for 3, which is at it; one change at a time
    p.append_records_to_leader(batch(1), 1)
    p.update_follower_fetch_state(2, 5, now_ms=30)
    assert p.high_watermark == 4
    p.on_isr_change_result(proposals[0], ErrorCode.NONE, 1, [ME, 2, 3], p.partition_epoch + 1)
    assert p.isr == {ME, 2, 3} and p.pending_isr_change is None
    p.update_follower_fetch_state(3, 5, now_ms=40)
    assert p.high_watermark == 5


def test_a_lagging_follower_is_proposed_out_and_counts_until_committed(logs):
    p, proposals = _leader(logs, [ME, 2, 3])
    p.append_records_to_leader(batch(3), 1)
    p.update_follower_fetch_state(2, 3, now_ms=1000)
    p.update_follower_fetch_state(3, 1, now_ms=1000)
    assert p.out_of_sync_replicas(LAG_MS, LAG_MS) == set()  # reset to "caught up" at leadership (0)
    assert p.out_of_sync_replicas(LAG_MS + 1, LAG_MS) == {3}
    assert p.maybe_shrink_isr(LAG_MS + 1, LAG_MS)
    change = proposals[-1]
    assert not change.expanding and change.proposed_isr == {ME, 2}
    assert p.high_watermark == 1  # 3 still counts until the controller commits the shrink
    p.on_isr_change_result(change, ErrorCode.NONE, 1, [ME, 2], p.partition_epoch + 1)
    assert p.isr == {ME, 2} and p.high_watermark == 3


def test_a_refused_change_is_dropped_and_a_new_leadership_wins(logs):
    p, proposals = _leader(logs, [ME, 2])
    p.update_follower_fetch_state(3, 0, now_ms=5)
    change = proposals[-1]
    p.on_isr_change_result(change, ErrorCode.INVALID_UPDATE_VERSION)
    assert p.isr == {ME, 2} and p.pending_isr_change is None and p.maximal_isr == {ME, 2}
    p.update_follower_fetch_state(3, 0, now_ms=6)  # proposed again
    again = proposals[-1]
    assert again is not change
    p.make_leader(2, [ME, 2, 3], [ME, 2, 3], now_ms=7)  # the controller's state arrives first
    p.on_isr_change_result(again, ErrorCode.NONE, 1, [ME, 2, 3], 99)  # the old answer is ignored
    assert p.partition_epoch != 99 and p.pending_isr_change is None


def test_without_a_controller_nothing_is_proposed(logs):
    p = Partition("t", 0, logs("t-0"), ME)
    p.make_leader(0, [ME], [ME, 2])
    p.update_follower_fetch_state(2, 0, now_ms=1)
    assert p.pending_isr_change is None and p.isr == {ME}


class IsrMachine(RuleBasedStateMachine):
    """Appends, follower fetches (never past the leader), time, shrink checks and the
    controller's answers in any order. After every step: the high watermark never moves
    back and never passes the LEO of any replica it counts (the ISR and a pending
    addition); a replica is proposed for the ISR only at or past the high watermark and
    the epoch start; at most one change is pending."""

    @initialize()
    def setup(self):
        self.dir = tempfile.TemporaryDirectory()
        self.plog = logstore.Log.open(self.dir.name + "/t-0")
        self.p = Partition("t", 0, UnifiedLog("t", 0, self.plog), ME, min_insync_replicas=lambda: 2)
        self.proposals = []
        self.p.alter_isr = self._propose
        self.now = 0
        self.epoch = 1
        self.p.make_leader(self.epoch, [ME, 2, 3], [ME, 2, 3], now_ms=0)
        self.leo = {2: 0, 3: 0}
        self.last_hw = 0

    def _propose(self, partition, change):
        added = change.proposed_isr - partition.isr
        for r in added:
            follower = partition.remote_replicas[r]
            assert follower.log_end_offset >= partition.high_watermark
            assert follower.log_end_offset >= partition.leader_epoch_start_offset
        self.proposals.append(change)

    def teardown(self):
        if hasattr(self, "plog"):
            self.plog.close()
            self.dir.cleanup()

    @rule(n=st.integers(1, 3))
    def append(self, n):
        self.p.append_records_to_leader(batch(n), 1)

    @rule(replica=st.sampled_from([2, 3]), data=st.data())
    def fetch(self, replica, data):
        leo = data.draw(st.integers(self.leo[replica], self.p.log_end_offset))
        self.leo[replica] = leo
        self.p.update_follower_fetch_state(replica, leo, now_ms=self.now)

    @rule(ms=st.sampled_from([100, 10_000, 40_000]))
    def tick(self, ms):
        self.now += ms

    @rule()
    def shrink_check(self):
        self.p.maybe_shrink_isr(self.now, LAG_MS)

    @precondition(lambda self: self.p.pending_isr_change is not None)
    @rule(ok=st.booleans())
    def controller_answers(self, ok):
        change = self.p.pending_isr_change
        if ok:
            self.p.on_isr_change_result(
                change,
                ErrorCode.NONE,
                self.epoch,
                sorted(change.proposed_isr),
                self.p.partition_epoch + 1,
            )
        else:
            self.p.on_isr_change_result(change, ErrorCode.INVALID_UPDATE_VERSION)

    @rule()
    def new_leader_epoch(self):
        self.epoch += 1
        self.p.make_leader(self.epoch, sorted(self.p.isr), [ME, 2, 3], now_ms=self.now)

    @invariant()
    def bounds(self):
        if not hasattr(self, "p"):
            return
        p = self.p
        assert p.high_watermark >= self.last_hw
        assert p.high_watermark <= p.log_end_offset
        counted = p.isr | (p.pending_isr_change.proposed_isr if p.pending_isr_change else set())
        for r in counted - {ME}:
            assert p.high_watermark <= self.leo[r]
        assert ME in p.isr
        self.last_hw = p.high_watermark


IsrMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestIsr = IsrMachine.TestCase
