"""Where a diverging follower cuts its log (broker_py/cluster/truncation.py): the
leader's DivergingEpoch check and the follower's ``offset_truncation_state``, as Kafka's
``Partition.readRecords`` and ``AbstractFetcherThread.getOffsetTruncationState`` (with
truncation on fetch, KIP-320) decide them.

- examples of each rule of both functions;
- the multi-round case (the follower's largest epoch at or below the leader's answer is
  another epoch: cut, ask again with the new last epoch) on a pure model and on real
  logs through ``Partition.read_for_follower`` and the fetcher's steps;
- a property over generated histories that obey log matching (an epoch starts at one
  offset everywhere; past the longest common prefix the two logs hold different
  epochs): whatever the interleaving of the two suffixes' epochs, the fetch / truncate
  loop ends with the follower cut exactly to the longest common prefix, as with
  Kafka's own rule, in no more rounds;
- the storage engine's ``end_offset_for_epoch`` answers as Kafka's
  ``LeaderEpochFileCache.endOffsetFor`` on those histories, and truncation trims its
  cache as Kafka's, at or past the log end too.
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logstore
from broker_py.cluster.partition import Partition
from broker_py.cluster.truncation import (
    EpochEndOffset,
    OffsetTruncationState,
    diverging_epoch,
    offset_truncation_state,
)
from broker_py.log.unified_log import UnifiedLog

UNDEFINED = EpochEndOffset(-1, -1)


# ---- a pure model of a log's leader epochs ----


class EpochLog:
    """A log as truncation sees it: the leader epoch of each offset, and possibly an
    epoch assigned at its end with nothing written in it yet (a leader's current epoch,
    or one a former leader wrote nothing in)."""

    def __init__(self, epochs: list[int], assigned: int | None = None) -> None:
        self.epochs = list(epochs)
        self.assigned = assigned

    @property
    def leo(self) -> int:
        return len(self.epochs)

    def entries(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for offset, epoch in enumerate(self.epochs):
            if not out or out[-1][0] != epoch:
                out.append((epoch, offset))
        if self.assigned is not None and (not out or self.assigned > out[-1][0]):
            out.append((self.assigned, self.leo))
        return out

    @property
    def latest_epoch(self) -> int:
        entries = self.entries()
        return entries[-1][0] if entries else -1

    def end_for(self, epoch: int) -> EpochEndOffset:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor(epoch, logEndOffset)``."""
        entries = self.entries()
        if epoch == -1 or not entries:
            return UNDEFINED
        if entries[-1][0] == epoch:
            return EpochEndOffset(epoch, self.leo)
        higher = [e for e in entries if e[0] > epoch]
        if not higher:
            return UNDEFINED
        floor = [e for e in entries if e[0] <= epoch]
        if not floor:
            return EpochEndOffset(epoch, higher[0][1])
        return EpochEndOffset(floor[-1][0], higher[0][1])

    def truncate_to(self, offset: int) -> None:
        """Kafka's ``UnifiedLog.truncateTo``: the cache loses every entry starting at or
        past the new end, even when nothing is cut (an epoch assigned at the end)."""
        del self.epochs[offset:]
        self.assigned = None

    def __repr__(self) -> str:
        return f"EpochLog({self.epochs}, assigned={self.assigned})"


def kafka_offset_truncation_state(
    leader: EpochEndOffset, follower: EpochLog
) -> OffsetTruncationState:
    """Kafka 3.x ``AbstractFetcherThread.getOffsetTruncationState``, verbatim in rules."""
    leo = follower.leo
    if leader.end_offset == -1:
        return OffsetTruncationState(leo, True)  # the fetch offset, which is the LEO here
    if leader.epoch == -1:
        return OffsetTruncationState(min(leader.end_offset, leo), True)
    mine = follower.end_for(leader.epoch)
    if mine.epoch == -1:
        return OffsetTruncationState(min(leader.end_offset, leo), True)
    if mine.epoch != leader.epoch:
        return OffsetTruncationState(min(mine.end_offset, leo), False)
    return OffsetTruncationState(min(mine.end_offset, leader.end_offset, leo), True)


def ours(leader: EpochEndOffset, follower: EpochLog) -> OffsetTruncationState:
    return offset_truncation_state(leader, follower.end_for, follower.leo)


def replicate(leader: EpochLog, follower: EpochLog, rule) -> list[tuple[int, int]]:
    """Fetches until the leader no longer answers DivergingEpoch, cutting as ``rule``
    says after each answer (the fetcher's steps: fetch at the LEO with the log's latest
    epoch); the (fetch offset, last fetched epoch) of each fetch."""
    fetches = []
    while True:
        last, offset = follower.latest_epoch, follower.leo
        fetches.append((offset, last))
        assert len(fetches) < 50, fetches
        diverging = diverging_epoch(leader.end_for(last), last, offset)
        if diverging is None:
            return fetches
        assert diverging != UNDEFINED  # the fetcher would ignore it and never converge
        follower.truncate_to(rule(diverging, follower).offset)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# ---- diverging_epoch: the leader's check ----


def test_no_last_fetched_epoch_is_never_checked():
    assert diverging_epoch(UNDEFINED, -1, 10) is None
    assert diverging_epoch(EpochEndOffset(3, 2), -1, 10) is None


def test_the_leader_holding_the_epoch_up_to_the_fetch_offset_agrees():
    assert diverging_epoch(EpochEndOffset(3, 10), 3, 10) is None
    assert (
        diverging_epoch(EpochEndOffset(3, 12), 3, 10) is None
    )  # the follower is behind in that epoch


def test_the_leader_ending_the_epoch_before_the_fetch_offset_diverges():
    # the follower holds records of epoch 3 past where the leader's epoch 3 ended
    assert diverging_epoch(EpochEndOffset(3, 8), 3, 10) == EpochEndOffset(3, 8)


def test_the_leader_never_having_had_the_epoch_diverges():
    # the leader's largest epoch <= 4 is 2: the follower's epoch 4 records are not the leader's
    assert diverging_epoch(EpochEndOffset(2, 20), 4, 10) == EpochEndOffset(2, 20)


def test_a_leader_knowing_no_epoch_at_or_below_leaves_it_to_the_offsets():
    # Kafka answers DivergingEpoch (-1, -1), which its follower reads as "no divergence"
    # (epoch < 0); here the leader answers none at once (an ahead follower then gets
    # OFFSET_OUT_OF_RANGE)
    assert diverging_epoch(UNDEFINED, 4, 10) is None


# ---- offset_truncation_state: the follower's cut ----


def test_the_leader_knowing_no_epoch_keeps_the_log():
    follower = EpochLog([1, 1, 2, 2])
    assert ours(UNDEFINED, follower) == OffsetTruncationState(4, True)


def test_same_epoch_cuts_to_the_leaders_end_of_it():
    follower = EpochLog([1, 1, 3, 3, 3, 3])  # epoch 3 from 2 to the LEO 6
    assert ours(EpochEndOffset(3, 4), follower) == OffsetTruncationState(4, True)


def test_same_epoch_cuts_to_the_followers_end_of_it_when_smaller():
    follower = EpochLog([1, 1, 3, 3, 5, 5])  # epoch 3 ends at 4 here
    assert ours(EpochEndOffset(3, 5), follower) == OffsetTruncationState(4, True)


def test_never_past_the_own_log_end():
    follower = EpochLog([1, 1, 3])
    assert ours(EpochEndOffset(3, 9), follower) == OffsetTruncationState(3, True)
    assert ours(EpochEndOffset(0, 9), EpochLog([])) == OffsetTruncationState(0, True)


def test_a_smaller_epoch_here_cuts_to_its_end_and_asks_again():
    # the leader answered epoch 3; the follower's largest epoch <= 3 is 2, which ends at 4
    follower = EpochLog([1, 1, 2, 2, 4, 4, 4])
    state = ours(EpochEndOffset(3, 9), follower)
    assert state == OffsetTruncationState(4, False)
    assert state == kafka_offset_truncation_state(EpochEndOffset(3, 9), follower)


def test_no_epoch_at_or_below_the_leaders_cuts_to_the_leaders_end():
    def nothing(_epoch):
        return UNDEFINED

    assert offset_truncation_state(EpochEndOffset(1, 2), nothing, 7) == OffsetTruncationState(
        2, True
    )
    assert offset_truncation_state(EpochEndOffset(1, 9), nothing, 7) == OffsetTruncationState(
        7, True
    )
    # a real cache answers an epoch below all of its own with (that epoch, its first
    # start) (Kafka's endOffsetFor), so the follower then cuts to that start
    follower = EpochLog([3, 3, 3])
    assert follower.end_for(1) == EpochEndOffset(1, 0)
    assert ours(EpochEndOffset(1, 2), follower) == OffsetTruncationState(0, True)


# ---- the multi-round case ----


def test_multi_round_when_the_followers_epoch_below_the_leaders_differs():
    """The follower led epoch 3 after epoch 1; the leader had epoch 2 from offset 5 and
    now leads epoch 4. First answer (2, 6): the follower has no epoch 2, its largest
    below is 1, so it cuts to the end of its epoch 1 (bounded by the leader's end) and
    asks again with last epoch 1: the leader's epoch 1 ends at 5, where it stops."""
    leader = EpochLog([1] * 5 + [2], assigned=4)
    follower = EpochLog([1] * 10 + [3] * 2)
    first = diverging_epoch(leader.end_for(3), 3, 12)
    assert first == EpochEndOffset(2, 6)
    assert follower.end_for(2) == EpochEndOffset(1, 10)
    state = ours(first, follower)
    assert not state.completed and state.offset == 6  # min(10, leader's 6, 12)
    assert kafka_offset_truncation_state(first, follower) == OffsetTruncationState(10, False)
    follower.truncate_to(state.offset)
    second = diverging_epoch(
        leader.end_for(follower.latest_epoch), follower.latest_epoch, follower.leo
    )
    assert second == EpochEndOffset(1, 5)
    assert ours(second, follower) == OffsetTruncationState(5, True)
    follower.truncate_to(5)
    assert diverging_epoch(leader.end_for(1), 1, 5) is None
    assert follower.epochs == leader.epochs[:5]


def _batch(n: int, tag: str) -> bytes:
    return logstore.encode_batch(
        [(b"k", f"{tag}-{i}".encode(), [], 1_700_000_000_000) for i in range(n)]
    )


def _write(plog, runs: list[tuple[int, int]], tag: str) -> None:
    for epoch, n in runs:
        plog.append(_batch(n, f"{tag}{epoch}"), leader_epoch=epoch)


def test_multi_round_on_real_logs_through_the_partition():
    """The same history on real logs: the leader's ``read_for_follower`` answers, the
    follower applies it with the fetcher's steps (cut, fetch again from the new end with
    the new last epoch), then copies the leader's records."""
    with tempfile.TemporaryDirectory() as d:
        llog, flog = logstore.Log.open(d + "/l-0"), logstore.Log.open(d + "/f-0")
        try:
            common = _batch(5, "common")
            llog.append(common, leader_epoch=1)
            flog.append(common, leader_epoch=1)
            _write(llog, [(2, 1)], "leader")
            _write(flog, [(1, 5), (3, 2)], "follower")
            leader = Partition("t", 0, UnifiedLog("t", 0, llog), 1)
            leader.alter_isr = lambda p, c: None
            leader.make_leader(4, [1, 2], [1, 2], now_ms=0)
            follower = Partition("t", 0, UnifiedLog("t", 0, flog), 2)
            follower.make_follower(1, 4, [1, 2], [1, 2])
            fetches = []
            for _ in range(5):
                offset, last = follower.log_end_offset, follower.log.latest_epoch
                fetches.append((offset, last))
                diverging, records = leader.read_for_follower(offset, last, 1 << 20, True)
                if diverging is not None:
                    target = offset_truncation_state(
                        diverging,
                        lambda e: EpochEndOffset(*flog.end_offset_for_epoch(e)),
                        flog.log_end_offset,
                    )
                    follower.truncate_to(target.offset)
                    continue
                leader.update_follower_fetch_state(2, offset, follower.log_start_offset, 0)
                if records is None:
                    break
                follower.append_records_to_follower(records.read())
            # the first cut (offset 6) falls inside the follower's own batch 5..9, which goes
            # whole; Kafka's rule would cut to 10 first, then ask with (10, 1) and cut to 5
            assert fetches == [(12, 3), (5, 1), (6, 2)]
            assert flog.read(0, 1 << 20) == llog.read(0, 1 << 20)
            assert leader.high_watermark == 6
        finally:
            llog.close()
            flog.close()


# ---- generated histories ----


@st.composite
def histories(draw):
    """(leader, follower) obeying log matching: a common prefix, then suffixes of
    distinct epochs (one side may first continue the prefix's last epoch); the leader
    leads an epoch above all, maybe with records in it; the follower may end in an
    epoch it led without writing."""
    prefix_epochs = sorted(draw(st.sets(st.integers(1, 20), max_size=3)))
    prefix = [e for e in prefix_epochs for _ in range(draw(st.integers(1, 3)))]
    last = prefix[-1] if prefix else 0
    suffix_epochs = sorted(draw(st.sets(st.integers(last + 1, last + 12), max_size=5)))
    mine = {e: draw(st.booleans()) for e in suffix_epochs}
    leader, follower = list(prefix), list(prefix)
    continues = draw(st.sampled_from(["none", "leader", "follower"])) if prefix else "none"
    if continues != "none":
        (leader if continues == "leader" else follower).extend([last] * draw(st.integers(1, 3)))
    for e in suffix_epochs:
        (leader if mine[e] else follower).extend([e] * draw(st.integers(1, 3)))
    current = max([last, *suffix_epochs]) + 1
    leader.extend([current] * draw(st.integers(0, 2)))
    follower_assigned = None
    follower_epochs = [e for e in suffix_epochs if not mine[e]]
    if follower_epochs and draw(st.booleans()) and follower.count(follower_epochs[-1]) > 0:
        # its last suffix epoch was led without writing anything: an entry at its end
        e = follower_epochs[-1]
        follower = [x for x in follower if x != e]
        follower_assigned = e
    return EpochLog(leader, current), EpochLog(follower, follower_assigned)


@settings(max_examples=300, deadline=None)
@given(histories())
def test_the_fetch_loop_cuts_to_the_longest_common_prefix(history):
    leader, follower = history
    expected = common_prefix(leader.epochs, follower.epochs)
    theirs = EpochLog(follower.epochs, follower.assigned)
    fetches = replicate(leader, follower, ours)
    kafka_fetches = replicate(leader, theirs, kafka_offset_truncation_state)
    assert follower.leo == expected and follower.epochs == leader.epochs[:expected]
    assert theirs.leo == expected
    # the extra bound by the leader's end offset (an intermediate cut may go below
    # Kafka's) never changes what is kept, and never costs a fetch more
    assert len(fetches) <= len(kafka_fetches)


@settings(max_examples=60, deadline=None)
@given(histories())
def test_the_storage_engines_epoch_cache_answers_as_kafkas(history):
    with tempfile.TemporaryDirectory() as d:
        for n, model in enumerate(history):
            plog = logstore.Log.open(f"{d}/t-{n}")
            try:
                runs: list[tuple[int, int]] = []
                for e in model.epochs:
                    if runs and runs[-1][0] == e:
                        runs[-1] = (e, runs[-1][1] + 1)
                    else:
                        runs.append((e, 1))
                _write(plog, runs, "x")
                if model.assigned is not None:
                    plog.assign_epoch_start_offset(model.assigned, plog.log_end_offset)
                assert [tuple(x) for x in plog.epoch_entries()] == model.entries()
                assert (
                    plog.latest_epoch if plog.latest_epoch is not None else -1
                ) == model.latest_epoch
                for epoch in range(0, max(model.epochs + [model.assigned or 0]) + 3):
                    assert EpochEndOffset(*plog.end_offset_for_epoch(epoch)) == model.end_for(
                        epoch
                    ), epoch
            finally:
                plog.close()


@pytest.mark.parametrize("offset", [0, 2, 5])
def test_truncation_removes_the_epochs_starting_at_or_after_the_cut(offset):
    model = EpochLog([1, 1, 3, 3, 3, 6])
    with tempfile.TemporaryDirectory() as d:
        plog = logstore.Log.open(d + "/t-0")
        try:
            _write(plog, [(1, 2), (3, 3), (6, 1)], "x")
            plog.truncate_to(offset)
            model.truncate_to(offset)
            assert plog.log_end_offset == model.leo
            assert [tuple(x) for x in plog.epoch_entries()] == model.entries()
        finally:
            plog.close()


def test_truncating_at_the_log_end_drops_an_epoch_assigned_there():
    """A former leader's epoch with nothing in it starts at the log end; Kafka's
    ``truncateTo`` drops it even when no record goes (its comment: 'this broker was a
    leader and inserted the first start offset entry, but then failed to append any
    entries before another leader was elected')."""
    with tempfile.TemporaryDirectory() as d:
        plog = logstore.Log.open(d + "/t-0")
        try:
            _write(plog, [(1, 2)], "x")
            plog.assign_epoch_start_offset(2, 2)
            log = UnifiedLog("t", 0, plog)
            log.truncate_to(2)
            assert [tuple(e) for e in plog.epoch_entries()] == [(1, 0)]
        finally:
            plog.close()
