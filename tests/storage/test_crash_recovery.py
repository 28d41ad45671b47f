"""Crash recovery: torn tails, garbage, corrupt batches, broken indexes, a real SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest

from logstore import _native as ls

from .helpers import (
    RECENT_T0,
    check_index_files,
    dir_snapshot,
    linear_offset_for_timestamp,
    log_files,
    parse_raw_batches,
    segment_name,
)

T0 = RECENT_T0
BIG = 1 << 30
MARKER = ".kafka_cleanshutdown"
CONFIG = {"index_interval_bytes": 1}  # an index entry for (nearly) every batch


def _write_dir(path: Path, files: dict[str, bytes]):
    path.mkdir(parents=True)
    for name, content in files.items():
        (path / name).write_bytes(content)


def _batch(i, n, vsize):
    return ls.encode_batch(
        [
            (
                b"key-%d-%d" % (i, j),
                bytes([65 + (i + j) % 26]) * vsize,
                [("i", b"%d" % i)],
                T0 + 10 * i + j,
            )
            for j in range(n)
        ]
    )


@pytest.fixture(scope="module")
def eight_batches(tmp_path_factory):
    """A closed single-segment log of 8 batches of varied sizes; the last two are small."""
    d = tmp_path_factory.mktemp("orig") / "t-0"
    d.mkdir()
    plan = [(5, 200), (1, 10), (8, 60), (2, 500), (3, 5), (6, 30), (2, 20), (3, 12)]
    log = ls.Log.open(str(d), **CONFIG)
    for i, (n, vsize) in enumerate(plan):
        log.append(_batch(i, n, vsize))
    log.close()
    files = dir_snapshot(d)
    log_name = segment_name(0, ".log")
    raws = parse_raw_batches(files[log_name])
    assert len(raws) == 8
    assert sum(r.size for r in raws) == len(files[log_name])
    assert 100 <= raws[-1].size <= 300 and 100 <= raws[-2].size <= 300
    return files, log_name, raws


def _expected_after_cut(raws, cut):
    whole = [r for r in raws if r.position + r.size <= cut]
    end = whole[-1].next_offset if whole else 0
    return whole, end


def _check_recovered(log, whole, end, data):
    assert log.log_end_offset == end
    prefix = b"".join(r.data for r in whole)
    assert log.read(0, BIG) == prefix
    for r in whole:
        for off in (r.base_offset, r.last_offset):
            assert log.read(off, 1) == r.data
    with pytest.raises(ls.OffsetOutOfRangeError):
        log.read(end + 1, BIG)
    assert log.read(end, BIG) == b""
    # the time index holds nothing past the cut
    decoded = ls.decode_batches(prefix)
    for r in data:
        assert log.offset_for_timestamp(r.max_timestamp) == linear_offset_for_timestamp(
            decoded, r.max_timestamp
        )


@pytest.mark.parametrize("marker", [False, True], ids=["no-marker", "stale-marker"])
def test_torn_tail_at_every_byte_of_last_two_batches(tmp_path, eight_batches, marker):
    files, log_name, raws = eight_batches
    start = raws[-2].position
    total = raws[-1].position + raws[-1].size
    not_flagged = []  # torn tails repaired without reporting ``recovered``
    for cut in range(start, total):
        d = tmp_path / f"c{cut}" / "t-0"
        content = dict(files)
        content[log_name] = files[log_name][:cut]
        content.pop(MARKER, None)
        if marker:
            content[MARKER] = b""
        _write_dir(d, content)
        whole, end = _expected_after_cut(raws, cut)
        log = ls.Log.open(str(d), **CONFIG)
        try:
            if (
                not marker or cut != whole[-1].position + whole[-1].size
            ) and log.recovered is not True:
                not_flagged.append(cut)
            assert os.path.getsize(d / log_name) == sum(r.size for r in whole), cut
            _check_recovered(log, whole, end, raws)
            assert log.append(_batch(99, 2, 7)) == (end, end + 1), cut
            got = ls.decode_batches(log.read(end, BIG))
            assert [r.key for r in got[0].records] == [b"key-99-0", b"key-99-1"]
        finally:
            log.close()
        # and the repaired log opens cleanly (checked on a sample of cuts: fsyncs are slow)
        if cut % 5 and cut != total - 1:
            continue
        log = ls.Log.open(str(d), **CONFIG)
        try:
            assert log.recovered is False
            assert log.log_end_offset == end + 2
        finally:
            log.close()
    # a torn tail is a crash: opening must report that it recovered
    assert not not_flagged, (
        f"recovered was False after repairing a torn tail at cuts {not_flagged[:5]}..."
    )


@pytest.mark.parametrize("marker", [False, True], ids=["no-marker", "stale-marker"])
@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"\x00" * 1000, id="zeros"),
        pytest.param(random.Random(5).randbytes(1000), id="random"),
        pytest.param(b"\x00" * 7, id="few-zeros"),
        pytest.param(
            bytes.fromhex("00000000000000ff0000003dffffffff02") + b"\x00" * 44, id="header-like"
        ),
    ],
)
def test_garbage_after_last_batch_is_cut(tmp_path, eight_batches, garbage, marker):
    files, log_name, raws = eight_batches
    d = tmp_path / "t-0"
    content = dict(files)
    content[log_name] = files[log_name] + garbage
    content.pop(MARKER, None)
    if marker:
        content[MARKER] = b""
    _write_dir(d, content)
    log = ls.Log.open(str(d), **CONFIG)
    try:
        assert log.recovered is True
        assert os.path.getsize(d / log_name) == len(files[log_name])
        _check_recovered(log, raws, raws[-1].next_offset, raws)
        assert log.append(_batch(99, 1, 3)) == (raws[-1].next_offset, raws[-1].next_offset)
    finally:
        log.close()


@pytest.mark.parametrize("victim", [7, 6, 3, 0])
def test_flipped_byte_truncates_at_that_batch(tmp_path, eight_batches, victim):
    files, log_name, raws = eight_batches
    d = tmp_path / "t-0"
    content = dict(files)
    content.pop(MARKER, None)
    data = bytearray(files[log_name])
    r = raws[victim]
    data[r.position + r.size // 2 + 10] ^= 0x20
    content[log_name] = bytes(data)
    _write_dir(d, content)
    log = ls.Log.open(str(d), **CONFIG)
    try:
        assert log.recovered is True
        whole = raws[:victim]
        end = raws[victim].base_offset
        assert os.path.getsize(d / log_name) == r.position
        _check_recovered(log, whole, end, raws)
        assert log.append(_batch(99, 1, 3)) == (end, end)
    finally:
        log.close()


# ---------------------------------------------------------------------------
# broken index files
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("multi") / "t-0"
    d.mkdir()
    rng = random.Random(17)
    log = ls.Log.open(str(d), segment_bytes=1500, **CONFIG)
    ts = T0
    for i in range(45):
        n = rng.randint(1, 5)
        recs = []
        for j in range(n):
            ts += rng.randint(0, 6)
            jitter = -rng.randint(0, 15) if rng.random() < 0.2 else 0  # some out of order
            recs.append((b"k%d.%d" % (i, j), rng.randbytes(rng.randint(0, 60)), [], ts + jitter))
        log.append(ls.encode_batch(recs, rng.choice(["none", "none", "gzip", "lz4"])))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 4
    log.close()
    files = dir_snapshot(d)
    all_data = b"".join(files[segment_name(b, ".log")] for b in bases)
    decoded = ls.decode_batches(all_data)
    return files, bases, decoded


def _corrupt_offset_index(kind, rng, content: bytes, base: int, n_batches: int):
    if kind == "delete":
        return None
    if kind == "random":
        return rng.randbytes(8 * rng.randint(1, 20))
    if kind == "odd-length":
        return (content + rng.randbytes(8))[: max(1, len(content) // 2 * 2 + 3) | 1]
    if kind == "past-end":
        # well-formed, increasing entries whose offsets and positions are past the segment
        return b"".join(
            (1000 + 7 * k).to_bytes(4, "big") + (10**6 + 999 * k).to_bytes(4, "big")
            for k in range(6)
        )
    if kind == "empty":
        return b""
    raise AssertionError(kind)


def _corrupt_time_index(kind, rng, content: bytes, base: int, n_batches: int):
    if kind == "delete":
        return None
    if kind == "random":
        return rng.randbytes(12 * rng.randint(1, 20))
    if kind == "odd-length":
        return (content + rng.randbytes(12))[: max(1, len(content) // 2 * 2 + 5) | 1]
    if kind == "past-end":
        return b"".join(
            (T0 + 10**9 + k).to_bytes(8, "big") + (1000 + k).to_bytes(4, "big") for k in range(6)
        )
    if kind == "empty":
        return b""
    raise AssertionError(kind)


KINDS = ["delete", "random", "odd-length", "past-end", "empty"]


@pytest.mark.parametrize("marker", [False, True], ids=["no-marker", "clean-marker"])
@pytest.mark.parametrize("which", ["index", "timeindex", "both"])
@pytest.mark.parametrize("kind", KINDS)
def test_broken_indexes_are_rebuilt(tmp_path, multi_segment, kind, which, marker):
    files, bases, decoded = multi_segment
    rng = random.Random(zlib.crc32(f"{kind}/{which}".encode()))
    content = dict(files)
    content.pop(MARKER, None)
    if marker:
        content[MARKER] = b""
    for base in bases:
        n_batches = len(parse_raw_batches(files[segment_name(base, ".log")]))
        for suffix, fn, wanted in (
            (".index", _corrupt_offset_index, which in ("index", "both")),
            (".timeindex", _corrupt_time_index, which in ("timeindex", "both")),
        ):
            if not wanted:
                continue
            name = segment_name(base, suffix)
            new = fn(kind, rng, files.get(name, b""), base, n_batches)
            if new is None:
                content.pop(name, None)
            else:
                content[name] = new
    d = tmp_path / "t-0"
    _write_dir(d, content)
    log = ls.Log.open(str(d), segment_bytes=1500, **CONFIG)
    try:
        _check_lookups_against_linear_scan(log, decoded)
        assert [s.base_offset for s in log.segments()] == bases
    finally:
        log.close()
    # the rebuilt files are Kafka's format and consistent with their segments
    for base in bases:
        check_index_files(d, base)


def _check_lookups_against_linear_scan(log, decoded):
    end = decoded[-1].last_offset + 1
    assert log.log_start_offset == 0
    assert log.log_end_offset == end
    containing = {}
    for b in decoded:
        for o in range(b.base_offset, b.last_offset + 1):
            containing[o] = b
    for o in range(end):
        got = ls.decode_batches(log.read(o, 1))
        assert len(got) == 1, o
        assert (got[0].base_offset, got[0].last_offset) == (
            containing[o].base_offset,
            containing[o].last_offset,
        ), o
    all_ts = [r.timestamp for b in decoded for r in b.records]
    for t in range(min(all_ts) - 1, max(all_ts) + 2):
        assert log.offset_for_timestamp(t) == linear_offset_for_timestamp(decoded, t), t


def test_intact_indexes_agree_with_linear_scan(tmp_path, multi_segment):
    files, _bases, decoded = multi_segment
    d = tmp_path / "t-0"
    _write_dir(d, files)
    log = ls.Log.open(str(d), segment_bytes=1500, **CONFIG)
    try:
        assert log.recovered is False
        _check_lookups_against_linear_scan(log, decoded)
    finally:
        log.close()


def test_torn_tail_in_last_of_many_segments(tmp_path, multi_segment):
    """A torn tail in the active segment after a crash; older segments are intact."""
    files, bases, decoded = multi_segment
    content = dict(files)
    content.pop(MARKER, None)
    last = segment_name(bases[-1], ".log")
    raws = parse_raw_batches(files[last])
    content[last] = files[last][: raws[-1].position + 5]
    d = tmp_path / "t-0"
    _write_dir(d, content)
    log = ls.Log.open(str(d), segment_bytes=1500, **CONFIG)
    try:
        assert log.recovered is True
        assert log.log_end_offset == raws[-1].base_offset
        assert [s.base_offset for s in log.segments()] == bases
        kept = [b for b in decoded if b.last_offset < raws[-1].base_offset]
        _check_lookups_against_linear_scan(log, kept)
    finally:
        log.close()


# ---------------------------------------------------------------------------
# a real crash
# ---------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from logstore import _native as ls
    path, start, ts0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    log = ls.Log.open(path, segment_bytes=4096, index_interval_bytes=512)
    print("open", log.log_end_offset, flush=True)
    i = start
    while True:
        n = i % 5 + 1
        recs = [(b"k%d-%d" % (i, j), b"v%d-%d." % (i, j) * (j + 1), [], ts0 + i) for j in range(n)]
        base, last = log.append(ls.encode_batch(recs, ("none", "gzip", "zstd")[i % 3]))
        print(i, base, last, flush=True)
        i += 1
    """
)


def _expected_records(i):
    n = i % 5 + 1
    return [(b"k%d-%d" % (i, j), b"v%d-%d." % (i, j) * (j + 1)) for j in range(n)]


def _run_and_kill(path, start, n_acks):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(start), str(T0)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    acks = []
    try:
        first = proc.stdout.readline()
        assert first.startswith(b"open "), first + proc.stderr.read()
        deadline = time.monotonic() + 60
        while len(acks) < n_acks:
            assert time.monotonic() < deadline, "child too slow"
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            i, base, last = map(int, line.split())
            acks.append((i, base, last))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # lines already in the pipe were acknowledged too
        for line in proc.stdout.read().splitlines(keepends=True):
            if line.endswith(b"\n"):
                acks.append(tuple(map(int, line.split())))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return acks


def test_sigkill_loses_no_acknowledged_append(tmp_path):
    d = tmp_path / "t-0"
    log = ls.Log.open(str(d), segment_bytes=4096, index_interval_bytes=512)
    log.append(ls.encode_batch([(b"pre", b"pre")]))
    log.close()
    all_acks = []
    start = 0
    for round_no, n_acks in enumerate((150, 257, 90)):
        acks = _run_and_kill(d, start, n_acks)
        assert len(acks) >= n_acks
        all_acks += acks
        start = acks[-1][0] + 1
        log = ls.Log.open(str(d), segment_bytes=4096, index_interval_bytes=512)
        try:
            assert log.recovered is True, round_no
            assert log.num_segments > 1
            last_acked = acks[-1][2]
            assert log.log_end_offset >= last_acked + 1
            for i, base, last in all_acks:
                (b,) = ls.decode_batches(log.read(base, 1))
                assert (b.base_offset, b.last_offset) == (base, last), i
                assert [(r.key, r.value) for r in b.records] == _expected_records(i), i
            # offsets are dense and every stored batch is valid
            offsets = []
            for s in log.segments():
                with open(s.log_path, "rb") as f:
                    seg = ls.decode_batches(f.read(), allow_partial=False)
                offsets += [r.offset for b in seg for r in b.records]
            assert offsets == list(range(log.log_end_offset))
            # the log continues where it was cut
            nxt = log.log_end_offset
            assert log.append(ls.encode_batch([(b"after", b"crash")])) == (nxt, nxt)
            # a batch in flight at the kill that made it to disk whole may remain: drop it
            # from the next round's bookkeeping by truncating to the last acknowledged one
            log.truncate_to(last_acked + 1)
        finally:
            log.close()
    assert len(all_acks) >= 497
    assert log_files(d)
