"""Connection limits of the network layer, in process: quotas, idle expiry, the request
memory pool, rate-limited warnings and the failed-authentication delay."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.network.connection_quotas import ConnectionQuotas
from broker_py.network.fd_budget import FdBudget
from broker_py.network.rate_limited_log import RateLimitedLog
from broker_py.network.request_memory_pool import RequestMemoryPool
from broker_py.network.socket_server import SocketServer
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.api_versions import ApiVersionsResponse


def config(**kv) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): str(v) for k, v in kv.items()})


# ---- pieces ----


def test_overrides_parse_and_refuse_bad_values():
    c = BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.2:3,[::1]:0, host.example:7"})
    assert c["max.connections.per.ip.overrides"] == {"127.0.0.2": 3, "::1": 0, "host.example": 7}
    for bad in ("127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1"):
        with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
            BrokerConfig({"max.connections.per.ip.overrides": bad})


def test_quotas_per_ip_total_and_fd_share():
    c = BrokerConfig(
        {
            "max.connections": "3",
            "max.connections.per.ip": "2",
            "max.connections.per.ip.overrides": "10.0.0.9:0",
        }
    )
    q = ConnectionQuotas(c, fd_connections=100)
    assert q.refusal("10.0.0.9") is not None and "max.connections.per.ip.overrides" in q.refusal(
        "10.0.0.9"
    )
    q.acquire("a")
    q.acquire("a")
    assert "max.connections.per.ip allows (2)" in q.refusal("a")
    assert q.refusal("b") is None
    q.acquire("b")
    assert q.at_limit() and "max.connections=3" in q.refusal("c")
    resumed = []
    q.wait_for_room(lambda: resumed.append(1))
    q.release("a")
    assert resumed == [1] and q.per_ip == {"a": 1, "b": 1} and q.total == 2
    small = ConnectionQuotas(BrokerConfig({}), fd_connections=1)
    small.acquire("x")
    assert "file descriptors" in small.refusal("y")


def test_fd_budget_leaves_headroom_and_splits_the_rest():
    b = FdBudget.for_limit(20000)
    assert b.headroom == 256 and b.storage + b.connections + b.headroom == 20000
    small = FdBudget.for_limit(1024)
    assert (
        small.storage > 0
        and small.connections > 0
        and small.storage + small.connections + small.headroom == 1024
    )


def test_rate_limited_log_counts_what_it_holds_back(caplog):
    t = [0.0]
    rl = RateLimitedLog(logging.getLogger("t.rl"), interval_s=10, clock=lambda: t[0])
    with caplog.at_level(logging.WARNING, logger="t.rl"):
        assert rl.warning("k", "bad %d", 1)
        for i in range(1999):
            assert not rl.warning("k", "bad %d", i)
        assert rl.held_back("k") == 1999
        t[0] = 11.0
        assert rl.warning("k", "bad %d", 2)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "1999 more like it" in lines[1]


class _Holder:
    def __init__(self) -> None:
        self.held = 0
        self.paused = False

    def pause_for_memory(self) -> None:
        self.paused = True

    def resume_for_memory(self) -> None:
        self.paused = False


def test_memory_pool_pauses_over_the_cap_and_always_lets_one_progress():
    pool = RequestMemoryPool(cap=100)
    a, b, c = _Holder(), _Holder(), _Holder()
    pool.update(a, 60)
    pool.update(b, 60)  # over the cap: b is the one exempt, it reads on
    assert not b.paused
    pool.update(c, 10)
    assert c.paused and pool.waiting == 1
    pool.update(a, 70)  # a stops too
    assert a.paused and pool.total == 140
    pool.update(b, 0)  # b's request handled: under the cap again? 80 <= 100
    assert not c.paused and not a.paused and pool.total == 80
    pool.release(a)
    pool.release(c)
    assert pool.total == 0 and pool.waiting == 0


# ---- a server on a socket ----


def _api_versions_frame(correlation_id: int = 1) -> bytes:
    body = struct.pack(">hhih", ApiKey.API_VERSIONS.value, 0, correlation_id, -1)
    return struct.pack(">i", len(body)) + body


def _serve(cfg: BrokerConfig, fd_connections: int = 1 << 20):
    def api_versions(request, connection):
        return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)

    return SocketServer(
        "127.0.0.1",
        0,
        {ApiKey.API_VERSIONS: api_versions},
        lambda e: None,
        1 << 20,
        config=cfg,
        quotas=ConnectionQuotas(cfg, fd_connections),
    )


async def _connect(port: int, source: str = "127.0.0.1"):
    loop = asyncio.get_running_loop()
    s = socket.socket()
    s.bind((source, 0))
    s.setblocking(False)
    try:
        await loop.sock_connect(s, ("127.0.0.1", port))
    except ConnectionError:
        s.close()  # refused (reset) as soon as accepted
    return s


async def _answered(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if an ApiVersions request on ``sock`` gets an answer, False if it is closed."""
    loop = asyncio.get_running_loop()
    if sock.fileno() < 0:
        return False
    try:
        await loop.sock_sendall(sock, _api_versions_frame())
        data = await asyncio.wait_for(loop.sock_recv(sock, 4096), timeout)
    except (ConnectionError, OSError):
        return False
    return len(data) > 0


def test_per_ip_limit_closes_the_extra_connection_and_others_are_served():
    async def main():
        cfg = BrokerConfig(
            {"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.1:50"}
        )
        server = _serve(cfg)
        await server.start()
        try:
            mine = [await _connect(server.port, "127.0.0.2") for _ in range(3)]
            results = [await _answered(s) for s in mine]
            assert results.count(True) == 2 and results[2] is False
            good = await _connect(server.port, "127.0.0.1")
            assert await _answered(good)
            assert server.quotas.per_ip.get("127.0.0.2") == 2
            for s in mine + [good]:
                s.close()
            for _ in range(100):
                if server.quotas.total == 0:
                    break
                await asyncio.sleep(0.02)
            assert server.quotas.total == 0
        finally:
            await server.stop()

    asyncio.run(main())


def test_total_limit_makes_new_connections_wait_until_one_closes():
    async def main():
        cfg = BrokerConfig({"max.connections": "2"})
        server = _serve(cfg)
        await server.start()
        try:
            a, b = await _connect(server.port), await _connect(server.port)
            assert await _answered(a) and await _answered(b)
            c = await _connect(server.port)  # in the backlog: accepted later
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(_answered(c), 0.5)
            a.close()
            loop = asyncio.get_running_loop()
            data = await asyncio.wait_for(loop.sock_recv(c, 4096), 5)
            assert data  # the request sent while it waited is answered once accepted
        finally:
            await server.stop()

    asyncio.run(main())


def test_idle_connections_are_closed_and_busy_ones_kept():
    async def main():
        cfg = BrokerConfig({"connections.max.idle.ms": "300"})
        server = _serve(cfg)
        await server.start()
        try:
            idle = await _connect(server.port)
            active = await _connect(server.port)
            loop = asyncio.get_running_loop()
            end = loop.time() + 1.5
            while loop.time() < end:
                assert await _answered(active)
                await asyncio.sleep(0.05)
            assert await _answered(active)
            assert not await _answered(idle, timeout=1)
            assert len(server.connections) == 1
        finally:
            await server.stop()

    asyncio.run(main())


def test_malformed_requests_are_logged_once_per_interval(caplog):
    async def main():
        server = _serve(BrokerConfig({}))
        await server.start()
        loop = asyncio.get_running_loop()
        try:
            for _ in range(50):
                s = await _connect(server.port)
                await loop.sock_sendall(
                    s, struct.pack(">i", 2) + b"xx"
                )  # below the smallest request
                try:
                    await asyncio.wait_for(loop.sock_recv(s, 10), 2)
                except (ConnectionError, OSError):
                    pass
                s.close()
        finally:
            await server.stop()

    with caplog.at_level(logging.WARNING, logger="broker_py.network.socket_server"):
        asyncio.run(main())
    assert 1 <= len([r for r in caplog.records if "closing" in r.getMessage()]) <= 2
