"""Fetch sessions: what an incremental fetch saves a consumer of many partitions.

A broker subprocess holds one topic of PARTITIONS partitions, each with a few records
that the fetcher has already read (its fetch offsets are the log end offsets), so
every fetch finds nothing new: the steady state of a consumer of many quiet
partitions. One raw connection sends FETCHES Fetch v12 requests (max_wait_ms 0, one
at a time), two ways:

* ``sessionless``: full requests naming every partition (session epoch -1), answered
  with every partition, as librdkafka and aiokafka fetch;
* ``incremental``: one full request that opens a session, then incremental requests
  naming no partition, answered with no partition (KIP-227), as the Java client and
  kafka-python fetch.

Reported per request: bytes sent and received, the broker's CPU (user + system,
from /proc), and the round trip. Ceiling for the round trip: the same number of
empty-bodied frames echoed by a plain asyncio-free socket thread over loopback in the
same run (a raw loopback ping-pong), so the ratio says how far a fetch is from a
request that costs nothing.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import REPO_ROOT, BrokerProc, broker_cpu_seconds, create_topic, read_frame
from logstore_bench import BenchReport

PARTITIONS = 500
RECORDS_PER_PARTITION = 4
FETCHES = 2000

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from logstore.protocol.frame import encode_request  # noqa: E402
from logstore.protocol.headers import RequestHeader  # noqa: E402
from logstore.protocol.messages.fetch import FetchRequest  # noqa: E402


@pytest.fixture(scope="module")
def session_broker(bench_dir: Path) -> Iterator[tuple[BrokerProc, str]]:
    from confluent_kafka import Producer

    b = BrokerProc(bench_dir / "fetch-sessions-broker")
    b.start()
    topic = "fetch-sessions"
    try:
        create_topic(b.bootstrap, topic, PARTITIONS)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for part in range(PARTITIONS):
            for _ in range(RECORDS_PER_PARTITION):
                p.produce(topic, b"x" * 100, partition=part)
        assert p.flush(60) == 0
        yield b, topic
    finally:
        b.stop()


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "fetch_sessions",
        f"fetch sessions: {FETCHES:,} Fetch v12 requests, one at a time, to {PARTITIONS} "
        "caught-up partitions; ratio = raw loopback ping-pong time / fetch time",
        [
            ("req_bytes", "request B"),
            ("resp_bytes", "response B"),
            ("cpu_us", "broker CPU µs/fetch"),
            ("rtt_us", "µs/fetch"),
            ("pingpong_us", "ping-pong µs"),
            ("ratio", "ratio"),
        ],
    )


def _request(
    topic: str, session_id: int, epoch: int, with_partitions: bool, correlation_id: int
) -> bytes:
    parts = (
        [
            FetchRequest.FetchPartition(
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=RECORDS_PER_PARTITION,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
            for p in range(PARTITIONS)
        ]
        if with_partitions
        else []
    )
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=parts)] if parts else [],
        forgotten_topics_data=[],
        rack_id="",
    )
    header = RequestHeader(
        api_key=1, api_version=12, correlation_id=correlation_id, client_id="bench-fetch-sessions"
    )
    return encode_request(header, body)


def _session_id(frame: bytes) -> int:
    # Response header v1 (correlation id, tagged fields), then throttle_time_ms,
    # error_code, session_id.
    error_code, session_id = struct.unpack_from(">hi", frame, 4 + 1 + 4)
    assert error_code == 0, error_code
    return session_id


def _pingpong(count: int, size: int) -> float:
    """``count`` round trips of a ``size``-byte frame to an echo thread over loopback."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(count):
                conn.sendall(_read_frame_raw(conn))

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    frame = struct.pack(">i", size) + bytes(size)
    with socket.create_connection(server.getsockname()) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        for _ in range(count):
            c.sendall(frame)
            read_frame(c)
        elapsed = time.perf_counter() - start
    t.join(10)
    server.close()
    return elapsed


def _read_frame_raw(s: socket.socket) -> bytes:
    body = read_frame(s)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("mode", ["sessionless", "incremental"])
def test_fetch_sessions(benchmark, session_broker, report: BenchReport, mode: str):
    broker, topic = session_broker
    assert broker.proc is not None
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if mode == "sessionless":
            frames = [_request(topic, 0, -1, True, 1)] * FETCHES
        else:
            s.sendall(_request(topic, 0, 0, True, 1))
            session_id = _session_id(read_frame(s))
            assert session_id != 0
            frames = [
                _request(topic, session_id, epoch, False, 1) for epoch in range(1, FETCHES + 1)
            ]
        sizes: list[int] = []
        result: dict[str, float] = {}

        def run() -> None:
            before = broker_cpu_seconds(broker.proc.pid)
            start = time.perf_counter()
            for frame in frames:
                s.sendall(frame)
                sizes.append(len(read_frame(s)) + 4)
            result["seconds"] = time.perf_counter() - start
            after = broker_cpu_seconds(broker.proc.pid)
            result["cpu"] = sum(after) - sum(before)

        benchmark.pedantic(run, rounds=1, iterations=1)
    pingpong = _pingpong(FETCHES, max(len(frames[0]), sizes[0]))
    values = {
        "req_bytes": float(len(frames[0])),
        "resp_bytes": float(sizes[-1]),
        "cpu_us": result["cpu"] / FETCHES * 1e6,
        "rtt_us": result["seconds"] / FETCHES * 1e6,
        "pingpong_us": pingpong / FETCHES * 1e6,
        "ratio": pingpong / result["seconds"],
    }
    benchmark.extra_info.update(values)
    report.add("fetch_sessions", f"{PARTITIONS} partitions", mode, **values)
