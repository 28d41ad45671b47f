"""A follower's truncation rebuilds its producer state from the newest snapshot at or
below the new log end (snapshots are taken as segments roll), replaying only what
follows: the state must be what a replay of the whole log gives (a snapshot keeps a
producer's last batch, as Kafka's does, so that is what is compared). Hypothesis drives
idempotent and transactional batches from a few producers, markers, epoch bumps,
segment rolls and tail truncations against a real log."""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import logstore
from broker_py.log.producer_state import ProducerStateManager
from broker_py.log.unified_log import UnifiedLog

PIDS = (1, 2, 3)
T0 = 1_700_000_000_000


def replayed_whole(plog) -> ProducerStateManager:
    """The state a replay of the whole log gives, ignoring every snapshot."""
    state = ProducerStateManager.__new__(ProducerStateManager)
    state._log = plog
    state._dir = plog.path
    state.producers = {}
    state._ongoing = {}
    state._verifying = {}
    state.replayed_aborts = []
    state._replay(plog.log_start_offset, plog.log_end_offset)
    return state


def summary(state: ProducerStateManager) -> dict:
    return {
        pid: (
            e.epoch,
            e.current_txn_first_offset,
            (e.batches[-1].last_seq, e.batches[-1].last_offset) if e.batches else None,
        )
        for pid, e in state.producers.items()
    }


class ProducerSnapshots(RuleBasedStateMachine):
    @initialize(segment_bytes=st.sampled_from([300, 700, 4096]))
    def open(self, segment_bytes):
        self.dir = tempfile.TemporaryDirectory()
        self.plog = logstore.Log.open(f"{self.dir.name}/t-0", segment_bytes=segment_bytes)
        self.log = UnifiedLog("t", 0, self.plog)
        self.seq = dict.fromkeys(PIDS, 0)
        self.epoch = dict.fromkeys(PIDS, 0)
        self.truncations = 0

    def teardown(self):
        if hasattr(self, "plog"):
            self.plog.close()
            self.dir.cleanup()

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 3), transactional=st.booleans())
    def produce(self, pid, n, transactional):
        if not transactional and self.log.producer_state.in_transaction(pid):
            transactional = True  # a producer in a transaction writes only transactional batches
        records = [(b"k", b"v" * 20, [], T0 + i) for i in range(n)]
        data = logstore.encode_batch(
            records,
            producer_id=pid,
            producer_epoch=self.epoch[pid],
            base_sequence=self.seq[pid],
            transactional=transactional,
        )
        self.log.append_as_follower(self._at(data))
        self.seq[pid] += n

    @rule(pid=st.sampled_from(PIDS), commit=st.booleans())
    def marker(self, pid, commit):
        data = logstore.encode_control_batch(
            0 if not commit else 1,
            producer_id=pid,
            producer_epoch=self.epoch[pid],
            coordinator_epoch=0,
            timestamp_ms=T0,
        )
        self.log.append_as_follower(self._at(data))

    @rule(pid=st.sampled_from(PIDS))
    def bump_epoch(self, pid):
        if not self.log.producer_state.in_transaction(pid):
            self.epoch[pid] += 1
            self.seq[pid] = 0

    @precondition(lambda self: self.plog.log_end_offset > self.plog.log_start_offset)
    @rule(data=st.data())
    def truncate(self, data):
        end = self.plog.log_end_offset
        offset = data.draw(st.integers(self.plog.log_start_offset, end))
        self.log.truncate_to(offset)
        # sequences continue from what the log now holds for each producer
        for pid in PIDS:
            entry = self.log.producer_state.producers.get(pid)
            if entry is not None and entry.batches and entry.epoch == self.epoch[pid]:
                self.seq[pid] = entry.batches[-1].last_seq + 1
        self.truncations += 1

    @invariant()
    def state_is_a_whole_replay(self):
        if not hasattr(self, "log"):
            return
        assert summary(self.log.producer_state) == summary(replayed_whole(self.plog))
        assert (
            self.log.producer_state.first_unstable_offset()
            == replayed_whole(self.plog).first_unstable_offset()
        )

    def _at(self, data: bytes) -> bytes:
        """``data`` at the log end, as a leader's fetch response carries it."""
        return _rebase(data, self.plog.log_end_offset)


def _rebase(data: bytes, base_offset: int) -> bytes:
    """A record batch with its baseOffset field (the first 8 bytes, outside the CRC) set."""
    return base_offset.to_bytes(8, "big", signed=True) + data[8:]


ProducerSnapshots.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProducerSnapshots = ProducerSnapshots.TestCase


def test_a_truncation_replays_from_the_newest_snapshot_below_the_cut(tmp_path):
    """After rolls, a truncation loads a snapshot instead of replaying from the log start."""
    plog = logstore.Log.open(str(tmp_path / "t-0"), segment_bytes=300)
    try:
        log = UnifiedLog("t", 0, plog)
        for seq in range(40):
            data = logstore.encode_batch(
                [(b"k", b"v" * 20, [], T0)], producer_id=1, producer_epoch=0, base_sequence=seq
            )
            log.append_as_follower(_rebase(data, plog.log_end_offset))
        snapshots = sorted(
            int(name.split(".")[0]) for name in os.listdir(plog.path) if name.endswith(".snapshot")
        )
        assert plog.num_segments > 5 and len(snapshots) >= plog.num_segments - 2
        replays = []
        original = ProducerStateManager._replay
        ProducerStateManager._replay = lambda self, start, end: (
            replays.append((start, end)),
            original(self, start, end),
        )[1]
        try:
            log.truncate_to(35)
        finally:
            ProducerStateManager._replay = original
        newest = max(o for o in snapshots if o <= 35)
        assert replays == [(newest, 35)]
        assert summary(log.producer_state) == {1: (0, -1, (34, 34))}
        assert not [
            o for o in snapshots if o > 35 and os.path.exists(f"{plog.path}/{o:020d}.snapshot")
        ]
    finally:
        plog.close()
