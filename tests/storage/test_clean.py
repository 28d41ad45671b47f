"""Log.clean: compaction keeps the latest value per key, offsets unchanged, across reopen."""

from __future__ import annotations

import os
import time

import logstore as ls
import pytest


def _rec(key: bytes, value: bytes | None, ts: int) -> bytes:
    return ls.encode_batch([(key, value, [], ts)])


def _records(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        assert data, f"nothing readable at {offset}"
        for b in ls.decode_batches(data):
            out += [(r.offset, r.key, r.value) for r in b.records]
            offset = b.last_offset + 1
    return out


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
    before = _records(log)
    active = log.segments()[-1].base_offset
    stats = log.clean(now_ms=now, force=True)
    assert stats["segments_cleaned"] > 0 and stats["keys_mapped"] > 0
    after = _records(log)
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
    assert all(v is not None for o, _, v in _records(log) if o < active)
    final = _records(log)
    log.close()
    again = ls.Log.open(partition_dir)
    assert _records(again) == final
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
