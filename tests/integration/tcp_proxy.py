"""A loopback TCP proxy for fault injection between Kafka clients and a broker.

The proxy listens on 127.0.0.1 and forwards every accepted connection to one target
(also on loopback). It forwards whole Kafka frames (int32 size + payload) in both
directions, so it can tell requests apart by api key and match responses to them by
correlation id. It rewrites nothing.

Fault: :meth:`TcpProxy.cut_after_produce` arms a one-shot fault: the next Produce
request (api key 0) a client sends is forwarded to the broker, and when the broker's
response to it comes back, that response is dropped and both sides of the connection
are closed. The broker has then certainly handled (written) the batch while the
client never learns it, so the client has to retry a batch the broker already has.

Runs its own asyncio loop in a daemon thread::

    with TcpProxy() as proxy:             # listening at once: proxy.port
        proxy.set_target(("127.0.0.1", broker_port))
        ...
        proxy.cut_after_produce()
        assert proxy.wait_cuts(1, timeout=10)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time

PRODUCE = 0
_SIZE = struct.Struct(">i")
_REQ_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORR = struct.Struct(">i")
_MAX_FRAME = 1 << 30


class _Conn:
    def __init__(self, proxy: TcpProxy, client_r, client_w, broker_r, broker_w) -> None:
        self.proxy = proxy
        self.client_r, self.client_w = client_r, client_w
        self.broker_r, self.broker_w = broker_r, broker_w
        self.cut_correlation: set[int] = set()
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.client_w, self.broker_w):
            with contextlib.suppress(Exception):
                # abort: no graceful FIN dance, the peer sees the connection reset/closed now
                w.transport.abort()
        self.proxy._conns.discard(self)


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (size,) = _SIZE.unpack(head)
    if size < 0 or size > _MAX_FRAME:
        # Not a Kafka frame we can follow: pass the rest through unframed is not
        # possible without desync, so the connection ends.
        return None
    try:
        body = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return head + body


class TcpProxy:
    def __init__(self, target: tuple[str, int] | None = None, host: str = "127.0.0.1") -> None:
        assert host in ("127.0.0.1", "localhost")
        self.target = target
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(128)
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._conns: set[_Conn] = set()
        self._lock = threading.Lock()
        self._armed = 0  # produce requests still to cut
        self.cuts = 0  # connections cut after a forwarded produce
        self.cut_log: list[tuple[float, int]] = []  # (time, correlation id) of each cut
        self.produce_requests = 0
        self.connections = 0
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"tcp-proxy-{self.port}", daemon=True
        )
        self._started = threading.Event()
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("proxy loop did not start")

    # ---- control (any thread) ----

    def set_target(self, target: tuple[str, int]) -> None:
        assert target[0] in ("127.0.0.1", "localhost"), "loopback only"
        self.target = target

    def cut_after_produce(self, count: int = 1) -> None:
        """Arm: cut the connections of the next ``count`` Produce requests after the
        broker answered them, without forwarding those answers."""
        with self._lock:
            self._armed += count

    def disarm(self) -> None:
        with self._lock:
            self._armed = 0

    def wait_cuts(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.cuts >= n:
                return True
            time.sleep(0.01)
        return self.cuts >= n

    def drop_all(self) -> None:
        """Abort every open connection now."""
        self._loop.call_soon_threadsafe(self._drop_all)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self._sock.close()

    def __enter__(self) -> TcpProxy:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the loop thread ----

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._started.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._drop_all()

    def _drop_all(self) -> None:
        for conn in list(self._conns):
            conn.close()

    def _take_arm(self) -> bool:
        with self._lock:
            if self._armed > 0:
                self._armed -= 1
                return True
            return False

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        target = self.target
        if target is None:
            client_w.transport.abort()
            return
        try:
            broker_r, broker_w = await asyncio.wait_for(asyncio.open_connection(*target), 10)
        except (TimeoutError, OSError):
            client_w.transport.abort()
            return
        for w in (client_w, broker_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections += 1
        conn = _Conn(self, client_r, client_w, broker_r, broker_w)
        self._conns.add(conn)
        await asyncio.gather(self._upstream(conn), self._downstream(conn), return_exceptions=True)
        conn.close()

    async def _upstream(self, conn: _Conn) -> None:
        """client -> broker, frame by frame; notes Produce requests to cut."""
        try:
            while not conn.closed:
                frame = await _read_frame(conn.client_r)
                if frame is None:
                    break
                if len(frame) >= 4 + _REQ_PREFIX.size:
                    api_key, _version, corr = _REQ_PREFIX.unpack_from(frame, 4)
                    if api_key == PRODUCE:
                        self.produce_requests += 1
                        if self._take_arm():
                            conn.cut_correlation.add(corr)
                conn.broker_w.write(frame)
                await conn.broker_w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()

    async def _downstream(self, conn: _Conn) -> None:
        """broker -> client, frame by frame; drops the answer of an armed Produce and cuts."""
        try:
            while not conn.closed:
                frame = await _read_frame(conn.broker_r)
                if frame is None:
                    break
                if conn.cut_correlation and len(frame) >= 8:
                    (corr,) = _CORR.unpack_from(frame, 4)
                    if corr in conn.cut_correlation:
                        self.cuts += 1
                        self.cut_log.append((time.monotonic(), corr))
                        conn.close()
                        return
                conn.client_w.write(frame)
                await conn.client_w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()
