"""Finding 2: idle connections exhausting file descriptors.

An attacker (from 127.0.0.2, so its limit is its own) opens far more idle, never
authenticated sockets than it may. The broker refuses those over
``max.connections.per.ip``, closes the rest after ``connections.max.idle.ms``, keeps
its descriptors for storage (segments still roll), logs refusals a few times rather
than once per socket, and a well-behaved producer alongside sees no error and no stall.
Then a SIGKILL at a random moment loses nothing it acknowledged.
"""

from __future__ import annotations

import socket
import time

from tests.integration.clients import create_topic
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
    open_fds,
    rss_mb,
)
from tests.support.waiting import wait_until

ATTACK_SOCKETS = 2100
PER_IP = 300


def _open_idle(port: int, n: int, source: str = "127.0.0.2") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((source, 0))
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        socks.append(s)
    return socks


def _closed_by_peer(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_idle_sockets_cannot_take_the_brokers_descriptors(broker_factory):
    b = broker_factory(
        {
            "max.connections.per.ip": str(PER_IP),
            "max.connections.per.ip.overrides": "127.0.0.1:1000",
            "connections.max.idle.ms": "3000",
            "log.segment.bytes": "16384",  # segments roll during the attack
        }
    )
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    fds_before = open_fds(b.proc.pid)
    rss_before = rss_mb(b.proc.pid)
    socks = _open_idle(b.port, ATTACK_SOCKETS)
    try:
        # Those over the per-IP limit are closed at once.
        wait_until(
            lambda: sum(_closed_by_peer(s) for s in socks) >= len(socks) - PER_IP,
            10,
            0.1,
            f"all but {PER_IP} of {len(socks)} sockets closed by the broker",
        )
        assert open_fds(b.proc.pid) <= fds_before + PER_IP + 20
        # The rest go once idle for connections.max.idle.ms.
        wait_until(
            lambda: all(_closed_by_peer(s) for s in socks), 15, 0.1, "every idle socket closed"
        )
        wait_until(
            lambda: open_fds(b.proc.pid) <= fds_before + 20,
            10,
            0.1,
            f"the broker's fds back to at most {fds_before} + 20",
        )
    finally:
        for s in socks:
            s.close()
    time.sleep(1)
    well.stop()
    well.assert_responsive()
    assert rss_mb(b.proc.pid) < rss_before + 100
    text = b.log_text()
    refusals = text.count("refused a connection")
    assert 1 <= refusals <= 10, refusals  # rate-limited: not one line per refused socket
    assert "Traceback" not in text
    kill_restart_and_check(b, well.acked)


def test_accept_at_the_fd_limit_is_logged_a_few_times_and_storage_keeps_working(broker_factory):
    """With the descriptor limit low, connections stop at the share set aside for them;
    storage keeps its own and the broker answers the connections it has."""
    import resource

    b = broker_factory(
        {"log.segment.bytes": "16384", "max.connections.per.ip.overrides": "127.0.0.1:5000"},
        start=False,
    )
    b.preexec_fn = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
    b.start()
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    socks = _open_idle(b.port, 600, source="127.0.0.3")  # more than the broker's 512 descriptors
    try:
        time.sleep(2)
        assert open_fds(b.proc.pid) < 512
    finally:
        for s in socks:
            s.close()
    well.stop()
    well.assert_responsive()
    text = b.log_text()
    assert text.count("out of system resource") == 0
    assert "Traceback" not in text
    kill_restart_and_check(b, well.acked)
