"""Log.clean: compaction keeps the latest value per key, offsets unchanged, across reopen."""

from __future__ import annotations

import os
import time

import pytest

import logstore as ls

from .log_contents import records


def _rec(key: bytes, value: bytes | None, ts: int) -> bytes:
    return ls.encode_batch([(key, value, [], ts)])


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_clean_compacts_and_reopens(open_log, partition_dir, codec):
    now = int(time.time() * 1000)
    log = open_log(segment_bytes=700, delete_retention_ms=1000, cleanup_policy="compact")
    history = []
    for i in range(80):
        key = b"k%d" % (i % 9)
        value = None if i % 13 == 12 else b"v%d" % i
        base, _ = log.append(ls.encode_batch([(key, value, [], now)], codec))
        history.append((base, key, value))
    before = records(log)
    active = log.segments()[-1].base_offset
    stats = log.clean(now_ms=now, force=True)
    assert stats["segments_cleaned"] > 0 and stats["keys_mapped"] > 0
    after = records(log)
    latest = {}
    for offset, key, value in history:
        if offset < active:
            latest[key] = (offset, key, value)
    assert [r for r in after if r[0] < active] == sorted(latest.values())
    assert [r for r in after if r[0] >= active] == [r for r in before if r[0] >= active]
    # A consumer at a removed offset gets the next retained record.
    removed = next(o for o, _, _ in history if o < active and o not in {r[0] for r in after})
    first = ls.decode_batches(log.read(removed, 1 << 20))[0]
    assert first.records[0].offset > removed
    # Tombstones go once the delete horizon has passed.
    log.clean(now_ms=now + 5000, force=True)
    assert all(v is not None for o, _, v in records(log) if o < active)
    final = records(log)
    log.close()
    again = ls.Log.open(partition_dir)
    assert records(again) == final
    again.close()


def test_clean_respects_the_dirty_ratio(open_log):
    now = int(time.time() * 1000)
    log = open_log(segment_bytes=700, min_cleanable_dirty_ratio="0.99")
    for i in range(40):
        log.append(_rec(b"k%d" % (i % 3), b"v", now))
    log.roll()
    assert log.clean(now_ms=now)["segments_cleaned"] > 0  # everything is dirty at first
    assert log.clean(now_ms=now)["segments_cleaned"] == 0  # nothing new since
    assert os.path.exists(os.path.join(log.path, "cleaner-offset-checkpoint"))


def test_clean_removes_aborted_transactions_and_then_their_markers(open_log):
    now = int(time.time() * 1000)
    log = open_log(segment_bytes=500, delete_retention_ms=100)

    def txn(pid, seq, pairs):
        return ls.encode_batch(
            [(k, v, [], now) for k, v in pairs],
            "zstd",
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        )

    def marker(kind, pid):
        return ls.encode_control_batch(kind, producer_id=pid, producer_epoch=0, timestamp_ms=now)

    log.append(_rec(b"a", b"before", now))
    log.append(txn(1, 0, [(b"a", b"aborted"), (b"b", b"aborted")]))
    abort_at, _ = log.append(marker(0, 1))
    log.append(txn(2, 0, [(b"c", b"committed")]))
    log.append(marker(1, 2))
    log.append(txn(1, 2, [(b"d", b"committed later")]))
    log.append(marker(1, 1))
    open_at, _ = log.append(txn(3, 0, [(b"e", b"still open")]))
    for i in range(5):
        log.append(_rec(b"f", b"%d" % i, now))

    stats = log.clean(now_ms=now, force=True)
    assert stats["aborted_records_dropped"] == 2
    assert stats["cleaned_up_to"] <= open_at  # never past an open transaction
    values = {k: v for _, k, v in records(log)}
    assert values[b"a"] == b"before"  # the aborted a= never counted as the latest
    assert b"b" not in values
    assert values[b"c"] == b"committed" and values[b"d"] == b"committed later"

    def markers():
        out = []
        offset = log.log_start_offset
        while offset < log.log_end_offset and (data := log.read(offset, 1 << 30)):
            for b in ls.decode_batches(data):
                if b.is_control:
                    out.append(b.base_offset)
                offset = b.last_offset + 1
        return out

    assert abort_at in markers()
    # The next pass finds no data of the aborted transaction: its marker gets a delete
    # horizon, and goes once delete.retention.ms has passed. Commit markers whose data
    # is still there stay.
    log.clean(now_ms=now, force=True)
    stats = log.clean(now_ms=now + 1000, force=True)
    assert stats["markers_dropped"] == 1
    assert abort_at not in markers() and len(markers()) == 2


def _deleted(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".deleted"))


def test_replaced_segments_go_after_file_delete_delay_ms(open_log, partition_dir, tmp_path):
    """As Kafka: replaced segments stay as .deleted files for file.delete.delay.ms
    (60 s by default); close unlinks what is pending; a reopen deletes leftovers."""
    import shutil

    now = int(time.time() * 1000)
    log = open_log(segment_bytes=700)
    for i in range(60):
        log.append(_rec(b"k%d" % (i % 4), b"v%d" % i, now))
    log.roll()
    stats = log.clean(now_ms=now, force=True)
    assert stats["segments_cleaned"] > 1
    cleaned = records(log)
    # Each replaced segment's .log and .timeindex: segments of 700 bytes never get an
    # offset index entry, so their offset index never had a file.
    assert len(_deleted(partition_dir)) == 2 * stats["segments_cleaned"]
    # A crash now: a copy of the directory as it is reopens without them.
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(partition_dir, crashed)
    reopened = ls.Log.open(crashed)
    assert _deleted(crashed) == [] and records(reopened) == cleaned
    reopened.close()
    log.close()
    assert _deleted(partition_dir) == []


def test_a_zero_file_delete_delay_unlinks_during_the_pass(open_log, partition_dir):
    now = int(time.time() * 1000)
    log = open_log(segment_bytes=700, file_delete_delay_ms=0)
    for i in range(60):
        log.append(_rec(b"k%d" % (i % 4), b"v%d" % i, now))
    log.roll()
    assert log.clean(now_ms=now, force=True)["segments_cleaned"] > 1
    assert _deleted(partition_dir) == []
    segments = log.num_segments
    log.delete_records(log.segments()[1].base_offset)  # the first segment goes
    assert log.num_segments == segments - 1
    assert _deleted(partition_dir) == []


def test_segments_whose_records_were_all_superseded_go_unread(open_log):
    """Early segments hold only values later ones overwrite: the pass drops them without
    reading them again, with the counters a rewrite would report."""
    now = int(time.time() * 1000)
    log = open_log(segment_bytes=700)
    history = []
    for i in range(80):
        key = b"k%d" % (i % 5)
        base, _ = log.append(
            ls.encode_batch([(key, b"v%d" % i, [], now), (None, b"no key", [], now)])
        )
        history.append((base, key, b"v%d" % i))
    log.roll()
    size = sum(s.size for s in log.segments())
    stats = log.clean(now_ms=now, force=True)
    assert stats["segments_unread"] > 0, stats
    assert stats["bytes_read"] == size and stats["records_read"] == 160
    latest = {key: (o, key, v) for o, key, v in history}
    assert records(log) == sorted(latest.values())
