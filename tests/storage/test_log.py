"""Log: appends, reads, segments, retention, truncation, leader epochs, zero-copy reads."""

from __future__ import annotations

import itertools
import os
import random
import time

import pytest

from logstore import _native as ls

from .helpers import (
    check_index_files,
    dir_snapshot,
    log_files,
    parse_raw_batches,
    segment_name,
    with_base_offset,
)
from .log_batches import BIG, T0, build, mk, open_read, rolled_log, stored

# ---------------------------------------------------------------------------
# open / append
# ---------------------------------------------------------------------------


def test_open_creates_missing_directory(tmp_path):
    path = tmp_path / "ld" / "new-topic-3"
    log = ls.Log.open(str(path))
    try:
        assert path.is_dir()
        assert log.path == str(path)
        assert log.log_start_offset == 0
        assert log.log_end_offset == 0
        assert log.num_segments == 1
        assert log.size_bytes == 0
        assert log.closed is False
        assert log.latest_epoch is None
        assert log.epoch_entries() == []
        assert log.read(0, 1000) == b""
        assert log.read_slice(0, 1000) is None
        assert (path / segment_name(0, ".log")).exists()
    finally:
        log.close()


def test_append_assigns_sequential_offsets(open_log):
    log = open_log()
    assert log.append(mk(1)) == (0, 0)
    assert log.append(mk(3, tag="b")) == (1, 3)
    # the producer's baseOffset is ignored: the leader assigns offsets
    assert log.append(with_base_offset(mk(5, tag="c"), 12345)) == (4, 8)
    assert log.log_end_offset == 9
    got = ls.decode_batches(log.read(0, BIG))
    assert [(b.base_offset, b.last_offset) for b in got] == [(0, 0), (1, 3), (4, 8)]
    assert [r.offset for b in got for r in b.records] == list(range(9))
    assert [r.key for r in got[2].records] == [b"kc0", b"kc1", b"kc2", b"kc3", b"kc4"]
    # stored bytes are the producer's bytes with baseOffset rewritten in place
    assert log.read(0, BIG) == with_base_offset(mk(1), 0) + with_base_offset(
        mk(3, tag="b"), 1
    ) + with_base_offset(mk(5, tag="c"), 4)
    assert log.size_bytes == len(log.read(0, BIG))


def test_multi_batch_append_in_one_call(open_log):
    log = open_log()
    log.append(mk(2))
    b1 = mk(3, ts=T0 + 10, tag="x")
    b2 = mk(1, ts=T0 + 500, tag="y")  # holds the max timestamp, as its last record
    b3 = mk(4, ts=T0 + 20, tag="z", codec="gzip")
    info = log.append_info(b1 + b2 + b3)
    assert (info.base_offset, info.last_offset) == (2, 9)
    assert info.num_batches == 3
    assert info.num_records == 8
    assert info.size == len(b1 + b2 + b3)
    assert info.max_timestamp == T0 + 500
    assert info.offset_of_max_timestamp == 5
    assert info.log_append_time == -1
    assert info.log_start_offset == 0
    got = ls.decode_batches(log.read(2, BIG))
    assert [(b.base_offset, b.last_offset, b.compression) for b in got] == [
        (2, 4, "none"),
        (5, 5, "none"),
        (6, 9, "gzip"),
    ]
    assert log.append(mk(1, tag="w") + mk(1, tag="v")) == (10, 11)


def test_append_compressed_batches_keep_their_codec(open_log):
    log = open_log()
    for codec in ls.COMPRESSION_TYPES:
        log.append(mk(3, codec=codec, tag=codec))
    got = ls.decode_batches(log.read(0, BIG))
    assert [b.compression for b in got] == list(ls.COMPRESSION_TYPES)
    assert [r.offset for b in got for r in b.records] == list(range(15))
    assert got[4].records[2].key == b"kzstd2"


# ---------------------------------------------------------------------------
# read
# ---------------------------------------------------------------------------


def test_read_starts_at_batch_containing_offset(five_batches):
    log, batches = five_batches
    data = stored(batches)
    raws = parse_raw_batches(data)
    for b_idx, (base, last, _) in enumerate(batches):
        for off in range(base, last + 1):
            got = log.read(off, BIG)
            assert got == data[raws[b_idx].position :], off
            assert ls.decode_batches(got)[0].base_offset == base


def test_read_max_bytes_whole_batches_only(five_batches):
    log, batches = five_batches
    raws = parse_raw_batches(stored(batches))
    sizes = [r.size for r in raws]
    s01 = sizes[0] + sizes[1]
    assert log.read(0, s01) == stored(batches[:2])
    assert log.read(0, s01 - 1) == stored(batches[:1])
    assert log.read(0, s01 + sizes[2] - 1) == stored(batches[:2])
    assert log.read(4, sizes[2] + sizes[3]) == stored(batches[2:4])
    # min_one_batch: the first batch even if larger than max_bytes
    assert log.read(0, 1) == stored(batches[:1])
    assert log.read(0, 0) == stored(batches[:1])
    assert log.read(5, 10, min_one_batch=True) == stored(batches[2:3])
    assert log.read(0, 1, min_one_batch=False) == b""
    assert log.read(5, sizes[2] - 1, min_one_batch=False) == b""
    assert log.read(5, sizes[2], min_one_batch=False) == stored(batches[2:3])


def test_read_max_offset_bound(five_batches):
    log, batches = five_batches
    # max_offset is exclusive, like a high watermark
    assert log.read(0, BIG, max_offset=8) == stored(batches[:3])
    assert log.read(0, BIG, max_offset=4) == stored(batches[:2])
    assert log.read(3, BIG, max_offset=4) == stored(batches[1:2])
    assert log.read(4, BIG, max_offset=4) == b""
    assert log.read(0, 1, max_offset=8) == stored(batches[:1])
    assert log.read(0, BIG, max_offset=15) == stored(batches)
    assert log.read_slice(4, BIG, max_offset=4) is None
    sl = log.read_slice(0, BIG, max_offset=8)
    assert sl.read() == stored(batches[:3])
    assert (sl.base_offset, sl.last_offset) == (0, 7)


def test_read_out_of_range(five_batches):
    log, batches = five_batches
    assert log.log_end_offset == 15
    assert log.read(15, BIG) == b""
    assert log.read_slice(15, BIG) is None
    for off in (16, 17, 1000):
        with pytest.raises(ls.OffsetOutOfRangeError):
            log.read(off, BIG)
        with pytest.raises(ls.OffsetOutOfRangeError):
            log.read_slice(off, BIG)
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(-1, BIG)
    assert log.delete_records(5) == 5
    for off in (0, 3, 4):
        with pytest.raises(ls.OffsetOutOfRangeError):
            log.read(off, BIG)
    assert issubclass(ls.OffsetOutOfRangeError, ls.LogStoreError)
    # at the log start: the batch holding it, whole
    assert log.read(5, BIG) == stored(batches[2:])


# ---------------------------------------------------------------------------
# segments
# ---------------------------------------------------------------------------


def _check_segments(log, partition_dir):
    segs = log.segments()
    assert len(segs) == log.num_segments
    names = set(os.listdir(partition_dir))
    total = 0
    for i, s in enumerate(segs):
        assert os.path.basename(s.log_path) == segment_name(s.base_offset, ".log")
        assert os.path.dirname(os.path.abspath(s.log_path)) == os.path.abspath(partition_dir)
        assert segment_name(s.base_offset, ".log") in names
        # An index file comes into existence with the index's first entry (LazyIndex).
        for suffix, entries in ((".index", s.index_entries), (".timeindex", s.time_index_entries)):
            if entries:
                assert segment_name(s.base_offset, suffix) in names, (s.base_offset, suffix)
        assert os.path.getsize(s.log_path) == s.size
        if i + 1 < len(segs):
            assert s.next_offset == segs[i + 1].base_offset
        total += s.size
    assert segs[-1].next_offset == log.log_end_offset
    assert log.size_bytes == total
    assert log_files(partition_dir) == [segment_name(s.base_offset, ".log") for s in segs]
    return segs


def test_roll_by_segment_bytes(open_log, partition_dir):
    seg_bytes = 600
    log = open_log(segment_bytes=seg_bytes)
    rng = random.Random(7)
    batches = []
    for i in range(30):
        data = mk(rng.randint(1, 6), ts=T0 + i, tag=str(i), vsize=rng.randint(5, 40))
        base, last = log.append(data)
        batches.append((base, last, data))
    segs = _check_segments(log, partition_dir)
    assert len(segs) > 4
    # Kafka's rule: roll when the active segment cannot take the next batch
    by_base = {b: (b, last, d) for b, last, d in batches}
    for s in segs:
        assert s.size <= seg_bytes
        assert s.base_offset in by_base, "segments start at batch boundaries"
    for s, nxt in itertools.pairwise(segs):
        first_of_next = by_base[nxt.base_offset][2]
        assert s.size + len(first_of_next) > seg_bytes, "rolled although the batch fitted"
    # every segment's content is its batches, in order
    for s in segs:
        expect = b"".join(
            with_base_offset(d, b) for b, _, d in batches if s.base_offset <= b < s.next_offset
        )
        with open(s.log_path, "rb") as f:
            assert f.read() == expect
        assert log.read(s.base_offset, BIG).startswith(
            with_base_offset(by_base[s.base_offset][2], s.base_offset)
        )
    # every offset readable, in every segment
    for b, last, _ in batches:
        for off in (b, last):
            got = ls.decode_batches(log.read(off, 1))
            assert got[0].base_offset == b


def test_roll_by_segment_ms(open_log, partition_dir):
    now = int(time.time() * 1000)
    log = open_log(segment_ms=60_000)
    log.append(mk(2, ts=now), now_ms=now)
    log.append(mk(2, ts=now + 30_000), now_ms=now + 30_000)
    assert log.num_segments == 1
    base, _ = log.append(mk(2, ts=now + 60_010), now_ms=now + 60_010)
    assert base == 4
    assert log.num_segments == 2
    assert [s.base_offset for s in log.segments()] == [0, 4]
    assert (partition_dir / segment_name(4, ".log")).exists()
    _check_segments(log, partition_dir)


def test_segment_ms_measures_record_timestamps(open_log):
    """Kafka's time-based roll compares the incoming batch's max timestamp with the
    first batch of the segment, not the wall clock: replaying old data (timestamps a
    month ago) must not roll a segment per batch."""
    month_ago = int(time.time() * 1000) - 30 * 24 * 3600 * 1000
    log = open_log(segment_ms=3_600_000)
    for i in range(5):
        log.append(mk(2, ts=month_ago + 1000 * i, tag=str(i)))
    assert log.num_segments == 1
    # a batch an hour and more after the segment's first batch does roll
    log.append(mk(2, ts=month_ago + 3_600_002, tag="late"))
    assert [s.base_offset for s in log.segments()] == [0, 10]


def test_explicit_roll(open_log, partition_dir):
    log = open_log()
    log.roll()  # active segment empty: no-op
    assert log.num_segments == 1
    log.append(mk(3))
    log.roll()
    assert [s.base_offset for s in log.segments()] == [0, 3]
    log.roll()
    assert log.num_segments == 2
    assert log.append(mk(2)) == (3, 4)
    _check_segments(log, partition_dir)


def test_truncate_fully_and_start_at(open_log, partition_dir):
    log = open_log(segment_bytes=300)
    build(log, [3, 3, 3, 3])
    log.truncate_fully_and_start_at(100)
    assert log.log_start_offset == 100
    assert log.log_end_offset == 100
    assert log.num_segments == 1
    assert log_files(partition_dir) == [segment_name(100, ".log")]
    assert log.read(100, BIG) == b""
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(5, BIG)
    assert log.append(mk(2)) == (100, 101)
    log.close()
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset) == (100, 102)


# ---------------------------------------------------------------------------
# timestamps
# ---------------------------------------------------------------------------


def test_offset_for_timestamp(open_log):
    log = open_log(segment_bytes=400, index_interval_bytes=1)
    # batch i holds offsets 3i..3i+2 with timestamps T0 + 100 i + 10 j
    for i in range(10):
        log.append(mk(3, ts=T0 + 100 * i, tag=str(i), ts_step=10))
    assert log.num_segments > 1
    assert log.offset_for_timestamp(0) == (0, T0)
    assert log.offset_for_timestamp(T0) == (0, T0)
    assert log.offset_for_timestamp(T0 + 1) == (1, T0 + 10)
    assert log.offset_for_timestamp(T0 + 20) == (2, T0 + 20)
    assert log.offset_for_timestamp(T0 + 21) == (3, T0 + 100)
    assert log.offset_for_timestamp(T0 + 510) == (16, T0 + 510)
    assert log.offset_for_timestamp(T0 + 920) == (29, T0 + 920)
    assert log.offset_for_timestamp(T0 + 921) is None
    # records below the log start offset are not answered
    log.delete_records(4)
    assert log.offset_for_timestamp(T0) == (4, T0 + 110)


def test_offset_for_timestamp_non_monotonic(open_log):
    log = open_log(index_interval_bytes=1)
    tss = [50, 10, 80, 30, 80, 90, 20, 100]
    for i, t in enumerate(tss):
        log.append(ls.encode_batch([(None, b"x%d" % i, [], T0 + t)]))
    # first record in offset order with timestamp >= target
    for target in range(110):
        expect = next(((o, T0 + t) for o, t in enumerate(tss) if t >= target), None)
        assert log.offset_for_timestamp(T0 + target) == expect, target


def test_log_append_time(open_log):
    log = open_log(message_timestamp_type="LogAppendTime")
    t_append = T0 + 999_999
    data = mk(3, ts=T0)
    info = log.append_info(data, now_ms=t_append)
    assert info.log_append_time == t_append
    assert info.max_timestamp == t_append
    info2 = log.append_info(mk(2, ts=T0, codec="zstd", tag="z"), now_ms=t_append + 5)
    assert info2.log_append_time == t_append + 5
    raw = log.read(0, BIG)
    batches = ls.decode_batches(raw, verify_crc=True)  # CRC recomputed after stamping
    for b, t in zip(batches, (t_append, t_append + 5)):
        assert b.crc_valid
        assert b.timestamp_type == "LogAppendTime"
        assert b.attributes & 0x08
        assert b.max_timestamp == t
        # a LogAppendTime batch's records all carry the batch's timestamp (as Kafka reads it)
        assert [r.timestamp for r in b.records] == [t] * b.records_count
    assert batches[1].compression == "zstd"
    assert [r.key for r in batches[1].records] == [b"kz0", b"kz1"]
    for rb in parse_raw_batches(raw):
        assert rb.crc_ok
    assert log.offset_for_timestamp(t_append) == (0, t_append)
    assert log.offset_for_timestamp(t_append + 1) == (3, t_append + 5)


def test_create_time_keeps_producer_timestamps(open_log):
    log = open_log(message_timestamp_type="CreateTime")
    info = log.append_info(mk(3, ts=T0), now_ms=T0 + 10**6)
    assert info.log_append_time == -1
    assert info.max_timestamp == T0 + 2
    (b,) = ls.decode_batches(log.read(0, BIG))
    assert b.timestamp_type == "CreateTime"
    assert [r.timestamp for r in b.records] == [T0, T0 + 1, T0 + 2]


def test_compacted_log_refuses_keyless_records_listing_each(open_log):
    log = open_log(cleanup_policy="compact")
    log.append(mk(2))
    before = log.read(0, BIG)
    keyless = ls.encode_batch(
        [(b"k", b"v", [], T0), (None, b"v", [], T0), (None, b"v", [], T0)], "zstd"
    )
    with pytest.raises(ls.InvalidRecordError) as e:
        log.append(keyless)
    assert not isinstance(e.value, ls.InvalidTimestampError)
    assert [i for i, _ in e.value.record_errors] == [1, 2]
    assert "without key" in e.value.record_errors[0][1]
    assert log.log_end_offset == 2 and log.read(0, BIG) == before


def test_timestamps_outside_the_window_raise_invalid_timestamp(open_log):
    log = open_log(message_timestamp_before_max_ms="1000", message_timestamp_after_max_ms="1000")
    with pytest.raises(ls.InvalidTimestampError) as e:
        log.append(mk(3, ts=T0, ts_step=600), now_ms=T0)
    assert isinstance(e.value, ls.InvalidRecordError)
    assert [i for i, _ in e.value.record_errors] == [2]
    assert log.log_end_offset == 0
    assert log.append(mk(3, ts=T0 - 1000, ts_step=1000), now_ms=T0) == (0, 2)


# ---------------------------------------------------------------------------
# log start offset, retention, truncation
# ---------------------------------------------------------------------------


def test_delete_records(open_log, partition_dir):
    log, _layout = rolled_log(open_log)  # segments at 0, 5, 10, 15; LEO 20
    assert [s.base_offset for s in log.segments()] == [0, 5, 10, 15]
    before_all = {off: log.read(off, BIG) for off in range(20)}
    assert log.delete_records(3) == 3
    assert log.log_start_offset == 3
    assert [s.base_offset for s in log.segments()] == [0, 5, 10, 15]
    assert log.read(3, BIG) == before_all[2]  # batch 2-4 holds offset 3, returned whole
    # lower: no change
    assert log.delete_records(1) == 3
    assert log.log_start_offset == 3
    # past a segment boundary: whole segments below the start offset go
    assert log.delete_records(12) == 12
    assert [s.base_offset for s in log.segments()] == [10, 15]
    assert log_files(partition_dir) == [segment_name(10, ".log"), segment_name(15, ".log")]
    assert not (partition_dir / segment_name(0, ".index")).exists()
    assert not (partition_dir / segment_name(5, ".timeindex")).exists()
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(11, BIG)
    assert log.read(12, BIG) == before_all[12]
    assert log.size_bytes == sum(s.size for s in log.segments())
    # persisted across close / reopen
    log.close()
    log = open_log()
    assert log.log_start_offset == 12
    assert log.log_end_offset == 20
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(11, BIG)
    assert log.read(12, BIG) == before_all[12]
    assert log.append(mk(1)) == (20, 20)


def test_delete_records_to_log_end_and_beyond(open_log):
    log, _ = rolled_log(open_log, n_segments=2)  # LEO 10
    assert log.delete_records(10) == 10
    assert log.log_start_offset == 10
    assert log.read(10, BIG) == b""
    # Beyond the log end offset is out of range, as Kafka's DeleteRecords answers
    # OFFSET_OUT_OF_RANGE above the high watermark; nothing changes.
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.delete_records(50)
    assert log.log_start_offset == 10
    assert log.append(mk(2)) == (10, 11)
    assert ls.decode_batches(log.read(10, BIG))[0].base_offset == 10


def test_log_start_offset_from_config(open_log):
    log, _ = rolled_log(open_log, n_segments=2)
    log.close()
    log = open_log(log_start_offset=7)
    assert log.log_start_offset == 7
    assert log.log_end_offset == 10
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(6, BIG)
    assert ls.decode_batches(log.read(7, BIG))[0].base_offset == 7


def test_retention_ms(open_log, partition_dir):
    log, _ = rolled_log(open_log, retention_ms=10_000)  # segment s stamped T0 + 10_000 s
    assert log.enforce_retention(now_ms=T0 + 10_000) == 0  # nothing older than retention.ms
    assert log.enforce_retention(now_ms=T0 + 15_000) == 1  # only segment 0 (max ts T0 + 2)
    assert log.log_start_offset == 5
    assert [s.base_offset for s in log.segments()] == [5, 10, 15]
    assert log.enforce_retention(now_ms=T0 + 25_000) == 1
    assert log.log_start_offset == 10
    # everything expired: the active segment stays
    assert log.enforce_retention(now_ms=T0 + 10**9) == 1
    assert [s.base_offset for s in log.segments()] == [15]
    assert log.log_start_offset == 15
    assert log.enforce_retention(now_ms=T0 + 10**9) == 0
    assert log.log_end_offset == 20
    assert log_files(partition_dir) == [segment_name(15, ".log")]
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(14, BIG)
    assert ls.decode_batches(log.read(15, BIG))[0].base_offset == 15
    log.close()
    log = open_log(retention_ms=10_000)
    assert (log.log_start_offset, log.log_end_offset) == (15, 20)


def test_set_config_changes_retention_and_roll(open_log):
    log, _ = rolled_log(open_log)  # segments 0, 5, 10, 15; retention unlimited by size
    assert log.enforce_retention(now_ms=T0 + 40_000) == 0
    log.set_config(retention_ms=25_000)
    assert log.config()["retention.ms"] == "25000"
    # largest timestamps T0+2, T0+10_002, T0+20_002: the first two are older than 25 s
    assert log.enforce_retention(now_ms=T0 + 40_000) == 2
    assert log.log_start_offset == 10
    log.set_config(segment_bytes=200)
    assert log.config()["segment.bytes"] == "200"
    for i in range(4):
        log.append(mk(3, ts=T0 + 40_000, tag=f"s{i}"))
    segs = log.segments()
    # segments 10 and 15 were filled before; every new one holds one 154-byte batch
    assert [s.base_offset for s in segs] == [10, 15, 20, 23, 26, 29]
    assert all(s.size <= 200 for s in segs[2:]), [s.size for s in segs]


def test_retention_ms_stops_at_first_unexpired_segment(open_log):
    stamps = {0: T0 + 50_000, 1: T0, 2: T0, 3: T0}
    log, _ = rolled_log(open_log, ts_of=lambda s: stamps[s], retention_ms=10_000)
    assert log.enforce_retention(now_ms=T0 + 20_000) == 0
    assert log.num_segments == 4


def test_retention_ms_unlimited(open_log):
    log, _ = rolled_log(open_log, retention_ms=-1)
    assert log.enforce_retention(now_ms=T0 + 10**12) == 0
    assert log.num_segments == 4


def test_retention_respects_max_offset(open_log):
    log, _ = rolled_log(open_log, retention_ms=1)  # segments 0, 5, 10, 15
    # segment 5 holds offsets up to 9, not all below the high watermark 7: kept
    assert log.enforce_retention(now_ms=T0 + 10**9, max_offset=7) == 1
    assert [s.base_offset for s in log.segments()] == [5, 10, 15]
    assert log.enforce_retention(now_ms=T0 + 10**9, max_offset=10) == 1
    assert [s.base_offset for s in log.segments()] == [10, 15]


def test_retention_bytes(open_log):
    log, _ = rolled_log(open_log)
    sizes = [s.size for s in log.segments()]
    total = sum(sizes)
    log.close()
    # Kafka: delete the oldest segments while (total - segment size) >= retention.bytes
    log = open_log(retention_bytes=total - sizes[0])
    assert log.enforce_retention() == 1
    assert [s.base_offset for s in log.segments()] == [5, 10, 15]
    assert log.log_start_offset == 5
    assert log.enforce_retention() == 0
    log.close()
    log = open_log(retention_bytes=total - sizes[0] - sizes[1] - 1)
    assert log.enforce_retention() == 1
    assert log.log_start_offset == 10
    log.close()
    log = open_log(retention_bytes=1)
    assert log.enforce_retention() == 1  # never the active segment
    assert [s.base_offset for s in log.segments()] == [15]
    assert log.log_end_offset == 20
    assert log.size_bytes == sizes[3]


def test_retention_deletes_segments_left_below_log_start(open_log):
    """delete_records up to the log end cannot delete the active segment; once it has
    rolled, the retention pass removes it (Kafka's deleteLogStartOffsetBreachedSegments),
    whatever retention.ms / retention.bytes say."""
    log = open_log(segment_bytes=450)
    build(log, [3, 2])  # 0-4 in segment 0
    assert log.delete_records(5) == 5
    assert [s.base_offset for s in log.segments()] == [0]  # active: kept
    log.roll()
    log.append(mk(2))  # 5-6
    assert [s.base_offset for s in log.segments()] == [0, 5]
    assert log.enforce_retention() == 1
    assert [s.base_offset for s in log.segments()] == [5]
    assert log.log_start_offset == 5


def test_truncate_to(open_log, partition_dir):
    log = open_log(segment_bytes=450)
    batches = build(log, [3, 2, 4, 1, 3, 2, 5, 2])  # 0-2 3-4 5-8 9 10-12 13-14 15-19 20-21
    assert log.num_segments > 2
    bounds = [(b, last) for b, last, _ in batches]
    log.truncate_to(100)  # beyond the end: no-op
    assert log.log_end_offset == 22
    log.truncate_to(22)
    assert log.log_end_offset == 22
    log.truncate_to(13)  # a batch boundary
    assert log.log_end_offset == 13
    assert log.read(0, BIG).startswith(stored(batches[:1]))
    assert ls.decode_batches(log.read(10, BIG))[-1].last_offset == 12
    assert log.read(13, BIG) == b""
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(14, BIG)
    _check_segments(log, partition_dir)
    assert all(s.base_offset <= 13 for s in log.segments())
    assert not (partition_dir / segment_name(20, ".log")).exists()
    # in the middle of batch 5-8: the whole batch goes, the end is its base
    log.truncate_to(7)
    assert log.log_end_offset == 5
    assert bounds[2] == (5, 8)
    on_disk = [ls.decode_batches(open_read(seg.log_path)) for seg in log.segments()]
    assert [(b.base_offset, b.last_offset) for bs in on_disk for b in bs] == bounds[:2]
    _check_segments(log, partition_dir)
    assert log.append(mk(2, tag="after")) == (5, 6)
    got = ls.decode_batches(log.read(5, BIG))
    assert [r.key for r in got[0].records] == [b"kafter0", b"kafter1"]
    log.close()
    log = open_log(segment_bytes=450)
    assert log.log_end_offset == 7


# ---------------------------------------------------------------------------
# leader epochs
# ---------------------------------------------------------------------------


def _checkpoint(partition_dir):
    return (partition_dir / "leader-epoch-checkpoint").read_text()


def test_leader_epochs(open_log, partition_dir):
    log = open_log()
    assert log.end_offset_for_epoch(0) == (-1, -1)
    assert log.append(mk(3), leader_epoch=3) == (0, 2)
    assert log.append(mk(2, tag="b"), leader_epoch=3) == (3, 4)
    assert log.append(mk(5, tag="c"), leader_epoch=5) == (5, 9)
    # the epoch is stamped into partitionLeaderEpoch (not covered by the CRC)
    raws = parse_raw_batches(log.read(0, BIG))
    assert [r.partition_leader_epoch for r in raws] == [3, 3, 5]
    assert all(r.crc_ok for r in raws)
    assert [b.partition_leader_epoch for b in ls.decode_batches(log.read(0, BIG))] == [3, 3, 5]
    assert log.epoch_entries() == [(3, 0), (5, 5)]
    assert log.latest_epoch == 5
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(4) == (3, 5)
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(2) == (2, 0)  # Kafka: requested epoch, first start offset
    log.flush()
    assert _checkpoint(partition_dir) == "0\n2\n3 0\n5 5\n"
    log.assign_epoch_start_offset(7, 10)
    assert log.latest_epoch == 7
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.append(mk(1, tag="d"), leader_epoch=7) == (10, 10)
    log.close()
    assert _checkpoint(partition_dir) == "0\n3\n3 0\n5 5\n7 10\n"
    log = open_log()
    assert log.epoch_entries() == [(3, 0), (5, 5), (7, 10)]
    assert log.end_offset_for_epoch(7) == (7, 11)


def test_epoch_without_data_is_dropped_on_reopen(open_log, partition_dir):
    # Kafka truncates the epoch cache from the log end offset when loading a log
    log = open_log()
    log.append(mk(2), leader_epoch=1)
    log.assign_epoch_start_offset(2, 2)
    assert log.epoch_entries() == [(1, 0), (2, 2)]
    log.close()
    log = open_log()
    assert log.epoch_entries() == [(1, 0)]


def test_leader_epochs_truncation(open_log, partition_dir):
    log = open_log()
    log.append(mk(3), leader_epoch=1)  # 0-2
    log.append(mk(3, tag="b"), leader_epoch=2)  # 3-5
    log.append(mk(3, tag="c"), leader_epoch=4)  # 6-8
    log.truncate_to(6)
    assert log.epoch_entries() == [(1, 0), (2, 3)]
    assert log.latest_epoch == 2
    assert log.end_offset_for_epoch(2) == (2, 6)
    log.truncate_to(3)
    assert log.epoch_entries() == [(1, 0)]
    log.append(mk(1, tag="d"), leader_epoch=6)  # 3
    assert log.epoch_entries() == [(1, 0), (6, 3)]
    log.close()
    assert _checkpoint(partition_dir) == "0\n2\n1 0\n6 3\n"


def test_leader_epochs_delete_records(open_log, partition_dir):
    log = open_log()
    log.append(mk(3), leader_epoch=1)  # 0-2
    log.append(mk(3, tag="b"), leader_epoch=2)  # 3-5
    log.delete_records(1)
    # Kafka's truncateFromStart: the entry holding the new start moves up to it
    assert log.epoch_entries() == [(1, 1), (2, 3)]
    log.delete_records(4)
    assert log.epoch_entries() == [(2, 4)]
    log.close()
    assert _checkpoint(partition_dir) == "0\n1\n2 4\n"


# ---------------------------------------------------------------------------
# replication appends
# ---------------------------------------------------------------------------


def test_append_as_follower(open_log):
    log = open_log()
    log.append(mk(3), leader_epoch=1)
    follower_batches = ls.encode_batch(
        [(None, b"a", [], T0), (None, b"b", [], T0)], base_offset=3, partition_leader_epoch=2
    ) + ls.encode_batch([(None, b"c", [], T0)], base_offset=5, partition_leader_epoch=2)
    info = log.append_as_follower(follower_batches)
    assert (info.base_offset, info.last_offset) == (3, 5)
    assert info.num_batches == 2
    assert log.log_end_offset == 6
    assert log.read(3, BIG) == follower_batches  # kept byte for byte
    assert log.epoch_entries() == [(1, 0), (2, 3)]
    before = log.read(0, BIG)
    with pytest.raises(ls.InvalidOffsetError):
        log.append_as_follower(ls.encode_batch([(None, b"x", [], T0)], base_offset=4))
    with pytest.raises(ls.InvalidOffsetError):
        log.append_as_follower(ls.encode_batch([(None, b"x", [], T0)], base_offset=0))
    assert issubclass(ls.InvalidOffsetError, ls.LogStoreError)
    assert log.read(0, BIG) == before
    assert log.log_end_offset == 6
    with pytest.raises(ls.CorruptRecordError):
        bad = bytearray(ls.encode_batch([(None, b"x", [], T0)], base_offset=6))
        bad[-1] ^= 1
        log.append_as_follower(bytes(bad))
    assert log.log_end_offset == 6


# ---------------------------------------------------------------------------
# lifecycle
# ---------------------------------------------------------------------------


def test_closed_log_raises(open_log):
    log = open_log()
    log.append(mk(2))
    log.close()
    assert log.closed is True
    calls = {
        "append": lambda: log.append(mk(1)),
        "append_info": lambda: log.append_info(mk(1)),
        "append_as_follower": lambda: log.append_as_follower(
            ls.encode_batch([(None, b"x")], base_offset=2)
        ),
        "read": lambda: log.read(0, 100),
        "read_slice": lambda: log.read_slice(0, 100),
        "offset_for_timestamp": lambda: log.offset_for_timestamp(0),
        "truncate_to": lambda: log.truncate_to(0),
        "truncate_fully_and_start_at": lambda: log.truncate_fully_and_start_at(5),
        "delete_records": lambda: log.delete_records(1),
        "enforce_retention": lambda: log.enforce_retention(),
        "roll": lambda: log.roll(),
        "flush": lambda: log.flush(),
        "segments": lambda: log.segments(),
        "assign_epoch_start_offset": lambda: log.assign_epoch_start_offset(1, 0),
    }
    not_raising = []
    for name, call in calls.items():
        try:
            call()
        except ls.LogClosedError:
            continue
        not_raising.append(name)
    assert not not_raising, f"these did not raise LogClosedError on a closed log: {not_raising}"
    assert issubclass(ls.LogClosedError, ls.LogStoreError)


def test_context_manager_closes(partition_dir):
    with ls.Log.open(str(partition_dir)) as log:
        log.append(mk(2))
    assert log.closed
    with pytest.raises(ls.LogClosedError):
        log.read(0, 10)


def test_reopen_keeps_everything(open_log, partition_dir):
    log = open_log(segment_bytes=500, index_interval_bytes=64)
    rng = random.Random(11)
    for i in range(25):
        log.append(
            mk(
                rng.randint(1, 5),
                ts=T0 + 1000 * i,
                tag=str(i),
                codec=rng.choice(ls.COMPRESSION_TYPES),
            ),
            leader_epoch=i // 10,
        )
    log.delete_records(3)
    assert log.num_segments > 3

    def state(lg):
        return {
            "start": lg.log_start_offset,
            "end": lg.log_end_offset,
            "size": lg.size_bytes,
            "segs": [
                (s.base_offset, s.size, s.next_offset, s.largest_timestamp) for s in lg.segments()
            ],
            "reads": {
                o: lg.read(o, BIG) for o in range(lg.log_start_offset, lg.log_end_offset + 1)
            },
            "ts": {t: lg.offset_for_timestamp(T0 + t) for t in range(-1, 25_000, 250)},
            "epochs": lg.epoch_entries(),
        }

    before = state(log)
    log.close()
    assert (partition_dir / ".kafka_cleanshutdown").exists()
    log = open_log(segment_bytes=500, index_interval_bytes=64)
    assert log.recovered is False
    # the marker must not survive while the log is open, or a crash would go unnoticed
    assert not (partition_dir / ".kafka_cleanshutdown").exists()
    assert state(log) == before
    assert log.append(mk(1)) == (before["end"], before["end"])


def test_flush_advances_recovery_point(open_log):
    log = open_log()
    log.append(mk(3))
    log.append(mk(2))
    log.flush()
    assert log.recovery_point == 5
    log.append(mk(2))
    assert log.recovery_point <= 7
    log.flush()
    assert log.recovery_point == 7


def test_segment_info_timestamps(open_log):
    log, _ = rolled_log(open_log)
    segs = log.segments()
    assert [s.largest_timestamp for s in segs] == [T0 + 10_000 * s + 2 for s in range(4)]


# ---------------------------------------------------------------------------
# on-disk index files are Kafka's
# ---------------------------------------------------------------------------


def test_index_files_are_kafka_format(open_log, partition_dir):
    log = open_log(segment_bytes=2000, index_interval_bytes=1)
    for i in range(40):
        log.append(mk(1 + i % 4, ts=T0 + 37 * i + (i % 3) * 50, tag=str(i)))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    log.close()
    for base in bases:
        entries, tentries = check_index_files(partition_dir, base)
        n_batches = len(
            parse_raw_batches((partition_dir / segment_name(base, ".log")).read_bytes())
        )
        assert len(entries) >= n_batches - 1  # index.interval.bytes=1: about one per batch
        assert len(tentries) >= 1
    assert dir_snapshot(partition_dir)  # directory readable
