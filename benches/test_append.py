"""Append throughput: ``Log.append`` against plain ``os.write`` of the same bytes.

Every round appends ROUND_BYTES of pre-encoded batches (encoded once, outside
the timed part) into a fresh log. Right before each round, outside the timed
part, the same bytes are written with ``os.write`` in the same chunk sizes into
a fresh file in the same directory (so on the same disk): baseline and log
rounds alternate, and the ratio is the median of the per-round ratios, which
holds up on a noisy machine. Neither side fsyncs inside the timed part; Kafka
does not fsync on append either (flush.messages defaults to Long.MAX_VALUE).

Goal: the log reaches at least 90% of os.write for 1 MB batches.

The "received" cases mirror the broker's path: each batch is first copied into a
fresh buffer, as a socket read puts a produce request in memory just before it is
appended, and the baseline pays the same copy. The log's validation then reads
cache-hot bytes; in the cold cases it is a second pass over memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from logstore_bench import KB, MB, BenchReport, PairedBaseline, median_seconds

import logstore

ROUND_BYTES = 64 * MB
ROUNDS = 9
WARMUP_ROUNDS = 1

CASES = [(100, 16 * KB), (100, 1 * MB), (1 * KB, 16 * KB), (1 * KB, 1 * MB)]


def case_id(record_size: int, batch_size: int) -> str:
    def size(n: int) -> str:
        return f"{n // MB}MB" if n >= MB else f"{n // KB}KB" if n >= KB else f"{n}B"

    return f"{size(record_size)} records/{size(batch_size)} batches"


def encode_batches(record_size: int, batch_size: int) -> tuple[list[bytes], int]:
    """Distinct batches of at most ``batch_size`` bytes, ROUND_BYTES in all; (batches, records)."""
    blob = os.urandom(ROUND_BYTES + batch_size)
    probe = logstore.encode_batch([(None, blob[:record_size])] * 100, timestamp_ms=0)
    # Whole records only, and never above batch_size (1 MB batches must stay under
    # max.message.bytes, 1 MiB + 12 by default).
    per_batch = max(1, (batch_size - 61) * 100 // (len(probe) - 61))
    while per_batch > 1:
        size = len(logstore.encode_batch([(None, blob[:record_size])] * per_batch, timestamp_ms=0))
        if size <= batch_size:
            break
        per_batch -= max(1, per_batch // 1000)
    now = int(time.time() * 1000)
    batches: list[bytes] = []
    total = records = pos = 0
    while total < ROUND_BYTES:
        values = [
            (None, blob[pos + i * record_size : pos + (i + 1) * record_size])
            for i in range(per_batch)
        ]
        pos = (pos + per_batch * record_size) % (ROUND_BYTES - per_batch * record_size)
        batch = logstore.encode_batch(values, timestamp_ms=now)
        batches.append(batch)
        total += len(batch)
        records += per_batch
    return batches, records


_BATCHES: dict[tuple[int, int], tuple[list[bytes], int]] = {}


def batches_for(record_size: int, batch_size: int) -> tuple[list[bytes], int]:
    key = (record_size, batch_size)
    if key not in _BATCHES:
        _BATCHES.clear()  # keep one case in memory at a time
        _BATCHES[key] = encode_batches(record_size, batch_size)
    return _BATCHES[key]


def _append_all(log: logstore.Log, batches: list[bytes], received: bool = False) -> None:
    append = log.append
    for batch in batches:
        append(bytearray(batch) if received else batch)


def _write_all(fd: int, batches: list[bytes], received: bool = False) -> None:
    write = os.write
    for batch in batches:
        data = bytearray(batch) if received else batch
        if write(fd, data) != len(batch):  # pragma: no cover - regular files write whole
            raise OSError("short write")


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "append",
        "append: MB/s and records/s, median of rounds; ratio = os.write time / log time, "
        "per round, paired (goal >= 0.90 for 1 MB batches)",
        [("mbps", "MB/s"), ("rps", "records/s"), ("ratio", "ratio")],
    )


def write_round(
    bench_dir: Path, batches: list[bytes], nbytes: int, received: bool = False
) -> float:
    """One baseline round: os.write of the batches into a fresh file; returns seconds."""
    fd, path = tempfile.mkstemp(prefix="append-", suffix=".bin", dir=bench_dir)
    try:
        start = time.perf_counter()
        _write_all(fd, batches, received)
        elapsed = time.perf_counter() - start
        assert os.fstat(fd).st_size == nbytes
    finally:
        os.close(fd)
        os.unlink(path)
    return elapsed


ALL_CASES = [(r, b, False) for r, b in CASES] + [(r, b, True) for r, b in CASES if b == MB]


@pytest.mark.parametrize(
    "record_size,batch_size,received",
    ALL_CASES,
    ids=[case_id(r, b).replace(" ", "-") + ("-received" if rc else "") for r, b, rc in ALL_CASES],
)
def test_append(
    benchmark,
    report: BenchReport,
    bench_dir: Path,
    record_size: int,
    batch_size: int,
    received: bool,
) -> None:
    """Log.append of ROUND_BYTES into a fresh log; os.write of the same bytes before each round."""
    batches, records = batches_for(record_size, batch_size)
    nbytes = sum(map(len, batches))
    case = case_id(record_size, batch_size) + (", received" if received else "")
    benchmark.group = "append"
    baseline = PairedBaseline(WARMUP_ROUNDS)

    def setup():
        baseline.add(write_round(bench_dir, batches, nbytes, received))
        path = tempfile.mkdtemp(prefix="append-", dir=bench_dir)
        return (logstore.Log.open(os.path.join(path, "bench-0")), batches, received), {}

    def teardown(log: logstore.Log, _batches: list[bytes], _received: bool) -> None:
        path = os.path.dirname(log.path)
        assert log.log_end_offset == records, (log.log_end_offset, records)
        log.close()
        shutil.rmtree(path)

    benchmark.pedantic(
        _append_all, setup=setup, teardown=teardown, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    ratio = baseline.ratio(benchmark)
    base_seconds = baseline.median()
    report.add(
        "append", case, "os.write", mbps=nbytes / MB / base_seconds, rps=records / base_seconds
    )
    report.add(
        "append", case, "log", mbps=nbytes / MB / seconds, rps=records / seconds, ratio=ratio
    )
    benchmark.extra_info.update(
        {
            "MB_per_s": round(nbytes / MB / seconds, 1),
            "records_per_s": round(records / seconds),
            "os_write_MB_per_s": round(nbytes / MB / base_seconds, 1),
            "ratio_log_vs_os_write": round(ratio, 3),
            "bytes_per_round": nbytes,
        }
    )
