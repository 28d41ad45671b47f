"""Log: zero-copy reads, a FileSlice and sendfile(2) to blocking and non-blocking sockets,
and a slice that outlives its segment."""

from __future__ import annotations

import os
import random
import select
import socket
import threading
import time

from logstore import _native as ls

from .helpers import (
    parse_raw_batches,
    segment_name,
)
from .log_batches import BIG, T0, rolled_log, stored

# ---------------------------------------------------------------------------
# zero-copy reads
# ---------------------------------------------------------------------------


def test_read_slice_fields(five_batches, partition_dir):
    log, batches = five_batches
    sl = log.read_slice(5, BIG)
    raws = parse_raw_batches(stored(batches))
    assert os.path.samefile(sl.path, partition_dir / segment_name(0, ".log"))
    assert sl.position == raws[2].position
    assert sl.length == len(stored(batches[2:]))
    assert sl.base_offset == 4
    assert sl.last_offset == 14
    assert sl.read() == log.read(5, BIG)
    sl = log.read_slice(0, raws[0].size + raws[1].size + 1)
    assert (sl.base_offset, sl.last_offset, sl.length) == (0, 3, raws[0].size + raws[1].size)
    assert sl.read() == stored(batches[:2])
    sl = log.read_slice(0, 1, min_one_batch=False)
    assert sl is None or sl.length == 0


def _recv_exactly(sock, n, out, delay=0.0):
    if delay:
        time.sleep(delay)
    while len(out) < n:
        chunk = sock.recv(min(65536, n - len(out)))
        if not chunk:
            break
        out += chunk


def test_file_slice_sendfile_blocking(five_batches):
    log, _batches = five_batches
    sl = log.read_slice(3, BIG)
    expect = log.read(3, BIG)
    a, b = socket.socketpair()
    with a, b:
        got = bytearray()
        t = threading.Thread(target=_recv_exactly, args=(b, len(expect), got))
        t.start()
        sent = 0
        while sent < sl.length:
            n = sl.sendfile(a.fileno(), sent)
            assert n > 0
            sent += n
        t.join(10)
        assert bytes(got) == expect
        # partial ranges
        a2, b2 = socket.socketpair()
        with a2, b2:
            n = sl.sendfile(a2.fileno(), 10, 25)
            assert n == 25
            assert b2.recv(100) == expect[10:35]


def test_file_slice_sendfile_nonblocking_multi_mb(open_log):
    log = open_log()
    rng = random.Random(3)
    for i in range(40):
        log.append(ls.encode_batch([(b"k%d" % i, rng.randbytes(100_000), [], T0 + i)]))
    expect = log.read(0, 8 << 20)
    assert len(expect) > 4_000_000
    sl = log.read_slice(0, 8 << 20)
    assert sl.length == len(expect)
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        a.setblocking(False)
        got = bytearray()
        # the reader starts late so the send buffer fills up and sendfile hits EAGAIN
        t = threading.Thread(target=_recv_exactly, args=(b, len(expect), got, 0.2))
        t.start()
        sent = 0
        would_block = 0
        short = 0
        deadline = time.monotonic() + 60
        while sent < sl.length:
            assert time.monotonic() < deadline
            try:
                n = sl.sendfile(a.fileno(), sent, sl.length - sent)
            except BlockingIOError:
                would_block += 1
                select.select([], [a], [], 5)
                continue
            assert n > 0
            if n < sl.length - sent:
                short += 1
            sent += n
        t.join(30)
        assert not t.is_alive()
        assert sent == len(expect)
        assert bytes(got) == expect
        assert would_block + short > 0


def test_module_sendfile(tmp_path):
    p = tmp_path / "f.bin"
    payload = os.urandom(50_000)
    p.write_bytes(payload)
    a, b = socket.socketpair()
    with a, b, open(p, "rb") as f:
        got = bytearray()
        t = threading.Thread(target=_recv_exactly, args=(b, 30_000, got))
        t.start()
        sent = 0
        while sent < 30_000:
            sent += ls.sendfile(a.fileno(), f.fileno(), 1000 + sent, 30_000 - sent)
        t.join(10)
        assert bytes(got) == payload[1000:31_000]


def test_file_slice_survives_segment_deletion(open_log, partition_dir):
    log, _ = rolled_log(open_log)
    sl = log.read_slice(0, BIG)
    expect = log.read(0, BIG)
    assert sl.read() == expect
    log.delete_records(12)
    assert not (partition_dir / segment_name(0, ".log")).exists()
    assert sl.read() == expect
    a, b = socket.socketpair()
    with a, b:
        got = bytearray()
        t = threading.Thread(target=_recv_exactly, args=(b, len(expect), got))
        t.start()
        sent = 0
        while sent < sl.length:
            sent += sl.sendfile(a.fileno(), sent)
        t.join(10)
        assert bytes(got) == expect
    log.close()
    assert sl.read() == expect
