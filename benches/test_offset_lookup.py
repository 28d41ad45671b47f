"""Offset lookup latency against the number of segments.

Logs of 1, 10, 100 and 1000 segments, each segment holding the same
BATCHES_PER_SEGMENT batches of about 1 KB (``Log.roll`` after every
BATCHES_PER_SEGMENT appends, which makes many segments quickly). Timed:
LOOKUPS ``read_slice(offset, 1)`` at random offsets (the slice of the batch
holding the offset), and LOOKUPS ``offset_for_timestamp`` at random
timestamps. Reported per lookup. Before each round (outside the timed part)
the same kind of lookups run on the 1-segment log, so "vs 1 seg" compares
rounds taken side by side (and reads about 1.0 for the 1-segment log itself).

Goal: flat or logarithmic in the number of segments, i.e. the 1000-segment
latency stays within a small factor of the 1-segment one.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from logstore_bench import BenchReport, PairedBaseline, median_seconds

import logstore

SEGMENT_COUNTS = [1, 10, 100, 1000]
BATCHES_PER_SEGMENT = 64
RECORDS_PER_BATCH = 10
RECORD_BYTES = 100
LOOKUPS = 1000
ROUNDS = 15
WARMUP_ROUNDS = 2
# Recent timestamps: with old ones every append would roll a segment (segment.ms, as Kafka).
T0 = (int(time.time() * 1000) // 1000) * 1000


def build_log(path: Path, segments: int) -> logstore.Log:
    log = logstore.Log.open(str(path))
    value = b"v" * RECORD_BYTES
    for s in range(segments):
        if s:
            log.roll()
        for b in range(BATCHES_PER_SEGMENT):
            # Timestamps grow by one per batch: batch n holds timestamp T0 + n.
            ts = T0 + s * BATCHES_PER_SEGMENT + b
            log.append(logstore.encode_batch([(None, value)] * RECORDS_PER_BATCH, timestamp_ms=ts))
    assert log.num_segments == segments, (log.num_segments, segments)
    return log


_LOGS: dict[int, logstore.Log] = {}


@pytest.fixture(scope="module")
def logs(bench_dir: Path) -> Iterator[dict[int, logstore.Log]]:
    yield _LOGS
    for log in _LOGS.values():
        log.close()
    _LOGS.clear()


def log_with(logs: dict[int, logstore.Log], bench_dir: Path, segments: int) -> logstore.Log:
    if segments not in logs:
        logs[segments] = build_log(bench_dir / f"lookup{segments}-0", segments)
    return logs[segments]


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "lookup",
        f"offset lookup: microseconds per lookup, median of rounds ({BATCHES_PER_SEGMENT} "
        f"batches of {RECORDS_PER_BATCH} records per segment); vs 1 seg = latency / latency "
        "on the 1-segment log, per round, paired",
        [("us", "us/lookup"), ("vs1", "vs 1 seg")],
    )


def read_slice_lookups(log: logstore.Log, segments: int) -> Callable[[], None]:
    rng = random.Random(segments)
    offsets = [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(LOOKUPS)]
    # Correctness of what is timed: each slice is the batch holding the offset.
    for offset in offsets[:50]:
        piece = log.read_slice(offset, 1)
        assert piece.base_offset <= offset <= piece.last_offset

    def lookups() -> None:
        read_slice = log.read_slice
        for offset in offsets:
            read_slice(offset, 1)

    return lookups


def timestamp_lookups(log: logstore.Log, segments: int) -> Callable[[], None]:
    rng = random.Random(segments)
    timestamps = [T0 + rng.randrange(segments * BATCHES_PER_SEGMENT) for _ in range(LOOKUPS)]
    for ts in timestamps[:50]:
        offset, found = log.offset_for_timestamp(ts)
        assert found == ts and offset == (ts - T0) * RECORDS_PER_BATCH, (ts, offset, found)

    def lookups() -> None:
        lookup = log.offset_for_timestamp
        for ts in timestamps:
            lookup(ts)

    return lookups


KINDS = {"read_slice": read_slice_lookups, "offset_for_timestamp": timestamp_lookups}


@pytest.mark.parametrize("segments", SEGMENT_COUNTS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_lookup(benchmark, report, logs, bench_dir, kind: str, segments: int) -> None:
    """LOOKUPS lookups on the N-segment log; the same on the 1-segment log before each round."""
    make = KINDS[kind]
    lookups = make(log_with(logs, bench_dir, segments), segments)
    baseline = PairedBaseline(WARMUP_ROUNDS)
    one_segment = make(log_with(logs, bench_dir, 1), 1)
    benchmark.group = f"lookup {kind}"
    benchmark.pedantic(
        lookups, setup=baseline.setup(one_segment), rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    us = seconds / LOOKUPS * 1e6
    vs1 = 1 / baseline.ratio(benchmark)
    report.add("lookup", f"{segments} seg", kind, us=us, vs1=vs1)
    benchmark.extra_info.update(
        {
            "us_per_lookup": round(us, 3),
            "us_per_lookup_1_segment": round(baseline.median() / LOOKUPS * 1e6, 3),
            "ratio_vs_1_segment": round(vs1, 3),
        }
    )
