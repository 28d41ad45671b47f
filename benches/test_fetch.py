"""Fetch throughput: ``FileSlice.sendfile`` against plain ``os.sendfile``.

A log of about LOG_BYTES of 16 KB batches (1 KB records) is written once.
Each round then sends the whole log over a loopback TCP connection
(127.0.0.1) to a receiver thread that drains it:

* ``log sendfile``: a consumer-like fetch loop, ``Log.read_slice(offset,
  FETCH_BYTES)`` then ``FileSlice.sendfile`` until the slice is sent, next
  offset = ``slice.last_offset + 1``;
* ``os.sendfile``: ``os.sendfile`` of the segment file in FETCH_BYTES chunks
  over the same kind of connection.

A round ends when the receiver has every byte. A baseline round runs right
before each log round (outside the timed part), and the ratio is the median of
the per-round ratios. Also measured: ``Log.read`` (whole batches copied into
``bytes``) against ``os.pread`` of the same chunks, ``read_slice`` alone
(the per-fetch lookup cost), and the down-converted fetch of Fetch v0-v3
(``down_convert_slice`` to message format v1, then ``sendall`` of the converted
bytes: no sendfile) against the same ``os.sendfile`` zero-copy baseline; its MB/s
count the log's bytes.

Goal: log sendfile reaches at least 90% of plain os.sendfile.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from logstore_bench import KB, MB, BenchReport, PairedBaseline, median_seconds

import logstore

LOG_BYTES = 256 * MB
BATCH_BYTES = 16 * KB
RECORD_BYTES = 1 * KB
FETCH_BYTES = 1 * MB
ROUNDS = 12
WARMUP_ROUNDS = 1


class Receiver:
    """A thread that reads exactly the number of bytes it is told to expect."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.targets: queue.Queue[int | None] = queue.Queue()
        self.done: queue.Queue[int] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="bench-receiver", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        buf = memoryview(bytearray(4 * MB))
        while True:
            target = self.targets.get()
            if target is None:
                return
            got = 0
            while got < target:
                n = self.sock.recv_into(buf, min(len(buf), target - got))
                if n == 0:
                    self.done.put(-got)
                    return
                got += n
            self.done.put(got)

    def expect(self, nbytes: int) -> None:
        self.targets.put(nbytes)

    def wait(self, nbytes: int) -> None:
        got = self.done.get(timeout=120)
        assert got == nbytes, (got, nbytes)

    def close(self) -> None:
        self.targets.put(None)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def fetch_log(bench_dir: Path) -> Iterator[tuple[logstore.Log, str, int]]:
    """(log, its only segment file, its size): about LOG_BYTES in 16 KB batches."""
    per_batch = BATCH_BYTES // (RECORD_BYTES + 12)
    now = int(time.time() * 1000)
    pool = [
        logstore.encode_batch(
            [(f"key-{i}".encode(), os.urandom(RECORD_BYTES)) for _ in range(per_batch)],
            timestamp_ms=now,
        )
        for i in range(64)
    ]
    log = logstore.Log.open(str(bench_dir / "fetch-0"))
    written = 0
    i = 0
    while written < LOG_BYTES:
        batch = pool[i % len(pool)]
        log.append(batch)
        written += len(batch)
        i += 1
    log.flush()
    segments = log.segments()
    assert len(segments) == 1, "LOG_BYTES must fit one segment (segment.bytes 1 GiB)"
    path = segments[0].log_path
    size = os.path.getsize(path)
    assert size == written == log.size_bytes
    try:
        yield log, path, size
    finally:
        log.close()


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[socket.socket, Receiver]]:
    """A connected TCP pair on 127.0.0.1: (sending socket, receiver thread)."""
    server = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    server.close()
    receiver = Receiver(conn)
    try:
        yield sender, receiver
    finally:
        sender.close()
        receiver.close()
        conn.close()


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "fetch",
        f"fetch: the whole {LOG_BYTES // MB} MB log in {FETCH_BYTES // MB} MB fetches; "
        "ratio = plain syscall time / log time, per round, paired (goal >= 0.90 for sendfile)",
        [("mbps", "MB/s"), ("us", "us/fetch"), ("ratio", "ratio")],
    )


def send_log(log: logstore.Log, out_fd: int) -> int:
    """The fetch loop: read_slice + FileSlice.sendfile until the log end; returns fetches."""
    offset = log.log_start_offset
    end = log.log_end_offset
    fetches = 0
    while offset < end:
        piece = log.read_slice(offset, FETCH_BYTES)
        if piece is None:
            break
        sent = 0
        length = piece.length
        while sent < length:
            sent += piece.sendfile(out_fd, sent, length - sent)
        offset = piece.last_offset + 1
        fetches += 1
    return fetches


def send_file(in_fd: int, out_fd: int, size: int) -> int:
    pos = 0
    fetches = 0
    while pos < size:
        pos += os.sendfile(out_fd, in_fd, pos, min(FETCH_BYTES, size - pos))
        fetches += 1
    return fetches


def fetch_offsets(log: logstore.Log) -> list[int]:
    """The start offsets of a FETCH_BYTES fetch loop over the whole log."""
    offsets = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        offsets.append(offset)
        offset = log.read_slice(offset, FETCH_BYTES).last_offset + 1
    return offsets


def slice_log(log: logstore.Log, offsets: list[int]) -> int:
    """Only the lookups of the fetch loop: read_slice, no bytes moved."""
    read_slice = log.read_slice
    total = 0
    for offset in offsets:
        total += read_slice(offset, FETCH_BYTES).length
    return total


def read_log(log: logstore.Log, offsets: list[int]) -> int:
    read = log.read
    total = 0
    for offset in offsets:
        total += len(read(offset, FETCH_BYTES))
    return total


def read_file(in_fd: int, size: int) -> int:
    pos = 0
    while pos < size:
        pos += len(os.pread(in_fd, FETCH_BYTES, pos))
    return pos


def _add(
    report: BenchReport, case: str, impl: str, size: int, seconds: float, fetches: int, **more
) -> dict[str, float]:
    values = {"mbps": size / MB / seconds, "us": seconds / fetches * 1e6, **more}
    report.add("fetch", case, impl, **values)
    return values


def _record_pair(
    benchmark,
    report: BenchReport,
    case: str,
    impl: str,
    baseline_impl: str,
    baseline: PairedBaseline,
    size: int,
    fetches: int,
    baseline_fetches: int,
) -> None:
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    ratio = baseline.ratio(benchmark)
    base = _add(report, case, baseline_impl, size, baseline.median(), baseline_fetches)
    mine = _add(report, case, impl, size, seconds, fetches, ratio=ratio)
    benchmark.extra_info.update(
        {
            "MB_per_s": round(mine["mbps"], 1),
            "us_per_fetch": round(mine["us"], 1),
            "fetches": fetches,
            f"{baseline_impl}_MB_per_s": round(base["mbps"], 1),
            f"ratio_vs_{baseline_impl}": round(ratio, 3),
        }
    )


def test_sendfile(benchmark, report, fetch_log, loopback) -> None:
    """The log's fetch loop; a plain os.sendfile round of the same file before each round."""
    log, path, size = fetch_log
    sender, receiver = loopback
    out_fd = sender.fileno()
    benchmark.group = "fetch"
    baseline = PairedBaseline(WARMUP_ROUNDS)
    fetches = [0, 0]

    def plain_round(in_fd: int) -> None:
        receiver.expect(size)
        fetches[1] = send_file(in_fd, out_fd, size)
        receiver.wait(size)

    def log_round() -> None:
        receiver.expect(size)
        fetches[0] = send_log(log, out_fd)
        receiver.wait(size)

    with open(path, "rb") as f:
        benchmark.pedantic(
            log_round,
            setup=baseline.setup(plain_round, f.fileno()),
            rounds=ROUNDS,
            warmup_rounds=WARMUP_ROUNDS,
        )
    _record_pair(
        benchmark,
        report,
        "sendfile to TCP loopback",
        "log sendfile",
        "os.sendfile",
        baseline,
        size,
        fetches[0],
        fetches[1],
    )


def test_read(benchmark, report, fetch_log) -> None:
    """Log.read into bytes; a plain os.pread round of the same file before each round."""
    log, path, size = fetch_log
    benchmark.group = "fetch"
    offsets = fetch_offsets(log)
    baseline = PairedBaseline(WARMUP_ROUNDS)
    with open(path, "rb") as f:
        total = benchmark.pedantic(
            read_log,
            (log, offsets),
            setup=baseline.setup(read_file, f.fileno(), size),
            rounds=ROUNDS,
            warmup_rounds=WARMUP_ROUNDS,
        )
    assert total == size
    _record_pair(
        benchmark,
        report,
        "read into bytes",
        "log read",
        "os.pread",
        baseline,
        size,
        len(offsets),
        -(-size // FETCH_BYTES),
    )


def test_read_slice_only(benchmark, report, fetch_log) -> None:
    """Only the lookups of the fetch loop (read_slice, no bytes moved): the per-fetch cost."""
    log, _, size = fetch_log
    benchmark.group = "fetch"
    offsets = fetch_offsets(log)
    total = benchmark.pedantic(
        slice_log, (log, offsets), rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS
    )
    assert total == size
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    values = _add(report, "lookups only (no bytes)", "log read_slice", size, seconds, len(offsets))
    benchmark.extra_info.update({"us_per_fetch": round(values["us"], 1), "fetches": len(offsets)})


def send_down_converted(log: logstore.Log, sock: socket.socket, magic: int) -> tuple[int, int]:
    """The Fetch v0-v3 loop: read_slice, convert to ``magic``, send the bytes;
    (fetches, bytes sent)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    fetches = sent = 0
    while offset < end:
        piece = log.read_slice(offset, FETCH_BYTES)
        if piece is None:
            break
        data, offset, _ = logstore.down_convert_slice(piece, magic, offset, FETCH_BYTES)
        sock.sendall(data)
        sent += len(data)
        fetches += 1
    return fetches, sent


@pytest.mark.parametrize("magic", [0, 1])
def test_down_converted(benchmark, report, fetch_log, loopback, magic: int) -> None:
    """Fetch v0-v3: the log converted down to ``magic`` and sent from memory; a plain
    os.sendfile round of the same file (the zero-copy path's baseline) before each round."""
    log, path, size = fetch_log
    sender, receiver = loopback
    out_fd = sender.fileno()
    benchmark.group = "fetch"
    baseline = PairedBaseline(WARMUP_ROUNDS)
    converted = send_down_converted(log, _Null(), magic)[1]  # the bytes one round sends
    fetches = [0, 0]

    def plain_round(in_fd: int) -> None:
        receiver.expect(size)
        fetches[1] = send_file(in_fd, out_fd, size)
        receiver.wait(size)

    def log_round() -> None:
        receiver.expect(converted)
        fetches[0], sent = send_down_converted(log, sender, magic)
        assert sent == converted
        receiver.wait(converted)

    with open(path, "rb") as f:
        benchmark.pedantic(
            log_round,
            setup=baseline.setup(plain_round, f.fileno()),
            rounds=ROUNDS,
            warmup_rounds=WARMUP_ROUNDS,
        )
    _record_pair(
        benchmark,
        report,
        f"down-converted to magic {magic} (Fetch "
        f"v{0 if magic == 0 else 2}-{1 if magic == 0 else 3}), vs zero-copy",
        f"down-convert v{magic}",
        "os.sendfile",
        baseline,
        size,
        fetches[0],
        fetches[1],
    )
    benchmark.extra_info["converted_bytes"] = converted


class _Null:
    """A socket stand-in that drops what it is sent (to size one round's output)."""

    def sendall(self, data: bytes) -> None:
        pass
