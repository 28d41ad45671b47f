"""Findings 4 and 6: what single connections can make the broker hold or write.

- Half-sent request bodies: many connections each declaring a large request and sending
  part of it; ``queued.max.request.bytes`` caps what the broker holds, so its memory
  stays bounded while a well-behaved producer goes on.
- A flood of malformed requests: the broker closes each such connection, but logs a
  handful of WARNING lines, not one per request.
- Failed SASL logins: each answer comes ``connection.failed.authentication.delay.ms``
  late, and the connection closes then.
Each ends with a SIGKILL at a random moment and every acknowledged message found again.
"""

from __future__ import annotations

import socket
import struct
import time

from tests.integration.clients import create_topic
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
    rss_mb,
)
from tests.support.ports import free_port

CONNECTIONS = 60
DECLARED = 50 << 20
SENT = 4 << 20
CAP = 16 << 20


def _half_send(port: int, n: int) -> list[socket.socket]:
    """``n`` connections (from 127.0.0.2) each declaring a DECLARED-byte Produce request
    and sending SENT bytes of it, as far as the broker takes them within a few seconds."""
    header = struct.pack(
        ">ihhih", DECLARED, 0, 9, 1, -1
    )  # size, Produce v9, correlation id, null client id
    chunk = b"\0" * 65536
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        socks.append([s, header, SENT])
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and any(left > 0 for _, _, left in socks):
        for entry in socks:
            s, pending, left = entry
            if left <= 0:
                continue
            data = pending or chunk[: min(len(chunk), left)]
            try:
                sent = s.send(data)
            except BlockingIOError:
                continue
            if pending:
                entry[1] = pending[sent:]
            else:
                entry[2] = left - sent
        time.sleep(0.001)
    return [s for s, _, _ in socks]


def test_half_sent_requests_are_capped(broker_factory):
    b = broker_factory(
        {"queued.max.request.bytes": str(CAP), "max.connections.per.ip.overrides": "127.0.0.2:500"}
    )
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    time.sleep(0.5)
    rss_before = rss_mb(b.proc.pid)
    socks = _half_send(b.port, CONNECTIONS)
    try:
        time.sleep(1)
        grown = rss_mb(b.proc.pid) - rss_before
        # Unbounded, the broker would hold CONNECTIONS * SENT = 240 MB of half requests.
        assert grown < (CAP >> 20) + (DECLARED >> 20) + 60, f"memory grew {grown:.0f} MB"
    finally:
        for s in socks:
            s.close()
    well.stop()
    well.assert_responsive()
    kill_restart_and_check(b, well.acked)


def test_malformed_request_floods_are_logged_a_few_times(broker):
    create_topic(broker.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(broker.bootstrap).start()
    # A Metadata v1 request whose topics array claims more entries than it holds.
    body = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 1000)
    frame = struct.pack(">i", len(body)) + body
    for _ in range(2000):
        with socket.create_connection(("127.0.0.1", broker.port)) as s:
            s.sendall(frame)
            s.settimeout(5)
            try:
                s.recv(100)
            except OSError:
                pass
    well.stop()
    well.assert_responsive()
    lines = [ln for ln in broker.log_text().splitlines() if "WARNING" in ln and "closing" in ln]
    assert 1 <= len(lines) <= 10, len(lines)
    kill_restart_and_check(broker, well.acked)


def test_failed_sasl_logins_are_answered_after_the_delay(broker_factory):
    from confluent_kafka import KafkaError, Producer

    from tests.integration.test_sasl import JAAS

    sasl_port = free_port()
    b = broker_factory(start=False)
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "connection.failed.authentication.delay.ms": "1500",
        }
    )
    b.start()
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    errors: list[tuple[float, KafkaError]] = []
    started = time.monotonic()
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wrong",
            "error_cb": lambda e: errors.append((time.monotonic() - started, e)),
        }
    )
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors and errors[0][1].code() == KafkaError._AUTHENTICATION
    assert errors[0][0] >= 1.4, f"answered after {errors[0][0]:.2f} s"
    well.stop()
    well.assert_responsive()
    kill_restart_and_check(b, well.acked)
