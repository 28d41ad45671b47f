"""The offset-sync emission rule (MM2's OffsetSyncWriter.PartitionState) and translation
(MM2's OffsetSyncStore.translateDownstream)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.mirror.offset_syncs import MAX_SYNCS, OffsetSync, OffsetSyncStore, PartitionState


def test_rule_fires_first_on_staleness_on_gaps_and_on_truncation():
    s = PartitionState(max_offset_lag=3)
    assert s.update(10, 0)  # first in this lifetime
    assert not s.update(11, 1)
    assert not s.update(12, 2)
    assert not s.update(13, 3)
    assert s.update(14, 4)  # 4 - (0 + 1) >= 3
    assert s.update(20, 5)  # upstream gap
    assert s.update(21, 2)  # downstream went backwards


runs = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(1, 40)), min_size=1, max_size=20
)


@settings(max_examples=100)
@given(st.integers(-1, 12), runs)
def test_update_run_is_update_on_each_pair(lag, shape):
    """update_run over a run == update on each pair, last firing pair returned."""
    a, b = PartitionState(lag), PartitionState(lag)
    up, down = 0, 0
    for up_gap, down_gap, count in shape:
        up += up_gap
        down += down_gap
        expected = []
        for i in range(count):
            if a.update(up + i, down + i):
                expected.append((up + i, down + i))
        assert b.update_run(up, down, count) == expected
        assert (b.last_sync, b.previous_upstream, b.previous_downstream) == (
            a.last_sync,
            a.previous_upstream,
            a.previous_downstream,
        )
        up += count
        down += count


def test_translation_as_mm2():
    store = OffsetSyncStore()
    assert store.translate("t", 0, 5) is None  # no sync
    store.add(OffsetSync("t", 0, 100, 10))
    store.add(OffsetSync("t", 0, 200, 60))
    assert store.translate("t", 0, 99) == -1  # older than every sync
    assert store.translate("t", 0, 100) == 10
    assert store.translate("t", 0, 150) == 11  # never past sync + 1
    assert store.translate("t", 0, 200) == 60
    assert store.translate("t", 0, 10_000) == 61
    store.add(OffsetSync("t", 0, 50, 5))  # upstream went backwards: recreated topic
    assert store.syncs("t", 0) == [(50, 5)]


copies = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=300)


@settings(max_examples=60)
@given(st.integers(0, 20), copies, st.data())
def test_translated_offsets_never_skip_a_record(lag, steps, data):
    """Copy records with upstream gaps (compaction) and downstream gaps (markers),
    emit syncs by the rule, and translate any group offset: the result is never past
    the target offset of the first record at or after the group's offset, so a group
    moved to the target loses nothing."""
    state = PartitionState(lag)
    store = OffsetSyncStore()
    pairs = []
    up = down = 0
    for up_step, down_gap in steps:
        up += up_step
        down += down_gap
        pairs.append((up, down))
        if state.update(up, down):
            store.add(OffsetSync("t", 0, up, down))
        down += 1
    store.add(OffsetSync("t", 0, *pairs[-1]))  # the delayed sync at a commit
    g = data.draw(st.integers(0, pairs[-1][0] + 5))
    got = store.translate("t", 0, g)
    following = [d for u, d in pairs if u >= g]
    bound = following[0] if following else pairs[-1][1] + 1
    assert got is not None
    assert got <= bound


def test_store_keeps_a_bounded_spread_of_syncs():
    store = OffsetSyncStore()
    for i in range(1, 10_000):
        store.add(OffsetSync("t", 0, i * 10, i))
    kept = store.syncs("t", 0)
    assert len(kept) == MAX_SYNCS
    assert kept[-1] == (99_990, 9_999)
    assert kept[0] == (10, 1)
    assert store.translate("t", 0, 55_555) is not None
