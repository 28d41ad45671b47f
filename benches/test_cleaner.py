"""Log cleaner throughput: one ``Log.clean`` pass against reading the same data once.

The log holds TOTAL_BYTES (1 GiB by default, ``LOGSTORE_BENCH_CLEANER_BYTES`` to
change it) of uncompressed 1 KB records whose keys repeat: one key in ten is
unique (each key has about ten values), in segments of SEGMENT_BYTES, all of them
non-active. It is written once; each round cleans a fresh copy of it (copied in
the untimed setup, and synced to disk). Right before each timed pass, the baseline reads the copy's
segment files once with ``os.pread`` in 8 MiB chunks (the cleaner's chunk size):
the floor a pass that must look at every byte cannot beat. Both run with the
files in the page cache.

The pass maps every key (dirty section = the whole log, as on a first cleaning),
then rewrites every segment keeping the latest record per key. A segment whose
records were all superseded by later ones is dropped without being read a second
time (the map pass counted its live records). Segments are grouped by their size
before cleaning, as in Kafka, those superseded counting as empty: the seven
superseded segments join the last one's group, and one segment is written.
Its offset map is sized for the keys at its load factor (0.9), so "map bytes/key"
is what the pass really needs per key.

The replaced segments are renamed ``.deleted`` and unlinked ``file.delete.delay.ms``
later, as in Kafka; the log keeps the default (60 s), so that unlinking (the kernel
freeing their page cache) is not part of the timed pass. Each round's log is checked,
closed (which unlinks them) and removed in the next round's untimed setup, so every
round starts with the same amount of page cache held.

Goals (issue 4): cleaning at least 50% of the read speed; at most 32 bytes per key.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from logstore_bench import MB, BenchReport, PairedBaseline, median_seconds

import logstore

TOTAL_BYTES = int(os.environ.get("LOGSTORE_BENCH_CLEANER_BYTES") or 1 << 30)
SEGMENT_BYTES = 128 * MB
VALUE_SIZE = 1000
RECORDS_PER_BATCH = 1000
UNIQUE_SHARE = 10  # one key in ten is unique
CHUNK = 8 * MB
ROUNDS = 3
WARMUP_ROUNDS = 1


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "cleaner",
        "cleaner: one forced pass over 1 KB keyed records, 10% unique keys; ratio = pread "
        "time / clean time, per round, paired (goal >= 0.50); map bytes per key (goal <= 32)",
        [("mbps", "MB/s"), ("ratio", "ratio"), ("bpk", "B/key")],
    )


@pytest.fixture(scope="module")
def pristine(bench_dir: Path):
    """The keyed log, written once: (path, bytes, records, unique keys)."""
    path = Path(tempfile.mkdtemp(prefix="cleaner-", dir=bench_dir)) / "keyed-0"
    log = logstore.Log.open(path, segment_bytes=SEGMENT_BYTES)
    blob = os.urandom(4 * MB)
    now = int(time.time() * 1000)
    per_batch = len(
        logstore.encode_batch([(b"key-00000000", blob[:VALUE_SIZE])] * RECORDS_PER_BATCH)
    )
    batches = -(-TOTAL_BYTES // per_batch)
    records = batches * RECORDS_PER_BATCH
    unique = records // UNIQUE_SHARE
    for b in range(batches):
        first = b * RECORDS_PER_BATCH
        # Keys spread over the whole log: record i has key (i * 7919) mod unique.
        batch = [
            (b"key-%08d" % ((i * 7919) % unique), blob[(o := (i * 61) % (3 * MB)) : o + VALUE_SIZE])
            for i in range(first, first + RECORDS_PER_BATCH)
        ]
        log.append(logstore.encode_batch(batch, timestamp_ms=now))
    log.roll()  # every segment written is non-active, so cleanable
    size = sum(s.size for s in log.segments())
    log.close()
    yield path, size, records, unique
    shutil.rmtree(path.parent)


def read_once(path: Path) -> int:
    """Reads every segment file of ``path`` once in CHUNK-sized preads; returns bytes."""
    total = 0
    for name in sorted(os.listdir(path)):
        if not name.endswith(".log"):
            continue
        fd = os.open(path / name, os.O_RDONLY)
        try:
            pos = 0
            while chunk := os.pread(fd, CHUNK, pos):
                pos += len(chunk)
        finally:
            os.close(fd)
        total += pos
    return total


def test_clean_pass(benchmark, report: BenchReport, bench_dir: Path, pristine) -> None:
    src, size, records, unique = pristine
    # The smallest map that holds every key at the load factor of 0.9, 24 bytes a slot
    # (plus one batch: the map stops before a batch that could overfill it).
    dedupe = (int((unique + RECORDS_PER_BATCH) / 0.9) + 2) * 24
    baseline = PairedBaseline(WARMUP_ROUNDS)
    results = []
    pending: list[logstore.Log] = []

    def finish_round() -> None:
        """Checks the last round's pass, closes its log (unlinking the segments it
        replaced, which wait for file.delete.delay.ms) and removes its copy, untimed, so
        every round starts with the same page cache held."""
        while pending:
            log = pending.pop()
            stats = results[-1]
            assert stats["keys_mapped"] == unique, stats
            assert stats["records_retained"] == unique and stats["bytes_read"] == size, stats
            # Grouped by size before cleaning, the superseded segments counting as empty.
            assert (
                stats["segments_written"] == stats["segments_cleaned"] - stats["segments_unread"]
            ), stats
            path = Path(log.path)
            log.close()
            shutil.rmtree(path.parent)

    def setup():
        finish_round()
        dst = Path(tempfile.mkdtemp(prefix="cleaner-round-", dir=bench_dir)) / "keyed-0"
        shutil.copytree(src, dst)
        os.sync()  # the copy's writeback must not run during the timed pass
        log = logstore.Log.open(dst, segment_bytes=SEGMENT_BYTES)
        assert baseline.run(read_once, dst) == size
        return (log,), {}

    def clean(log: logstore.Log) -> None:
        results.append(log.clean(force=True, dedupe_buffer_size=dedupe))
        pending.append(log)

    benchmark.group = "cleaner"
    benchmark.pedantic(clean, setup=setup, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS)
    finish_round()
    stats = results[-1]
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    bytes_per_key = stats["offset_map_bytes"] / stats["keys_mapped"]
    ratio = baseline.ratio(benchmark)
    case = f"{size / MB:,.0f} MB, {records:,} records, {unique:,} keys"
    report.add("cleaner", case, "os.pread once", mbps=size / MB / baseline.median())
    report.add(
        "cleaner", case, "Log.clean", mbps=size / MB / seconds, ratio=ratio, bpk=bytes_per_key
    )
    benchmark.extra_info.update(
        {
            "log_bytes": size,
            "records": records,
            "unique_keys": unique,
            "clean_MB_per_s": round(size / MB / seconds, 1),
            "read_once_MB_per_s": round(size / MB / baseline.median(), 1),
            "ratio_clean_vs_read": round(ratio, 3),
            "offset_map_bytes_per_key": round(bytes_per_key, 2),
            "bytes_after": stats["log_bytes_after"],
        }
    )
