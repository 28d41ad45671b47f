"""Accepts the connections of one listening socket (Kafka's ``Acceptor``), under the
broker's connection limits (``connection_quotas``).

- A connection from an address at its ``max.connections.per.ip`` limit is closed at once.
- A connection that would take its address over its ``connection_creation_rate`` quota
  is held unserved for the throttle time, then closed (at most
  ``MAX_HELD_CONNECTIONS`` held; more are closed at once).
- At the broker's ``max.connections`` (or the descriptors set aside for connections) the
  acceptor stops reading the listening socket until a connection closes; new
  connections wait in the kernel's backlog meanwhile.
- ``accept(2)`` failing for want of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) stops
  accepting for ``ACCEPT_RETRY_S`` and is logged at most once per interval, with a count
  (``rate_limited_log``), never with a traceback per attempt.

Each accepted socket becomes a transport with ``loop.connect_accepted_socket`` (a TLS
handshake on an SSL listener); its protocol is made by ``protocol_factory(host)`` and
releases the quota taken at accept when the connection ends (``release_quota``, also
called here when the transport could not be made).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
import time
from collections.abc import Callable

from broker_py.network.connection_quotas import ConnectionQuotas
from broker_py.network.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)
rate_limited = RateLimitedLog(log)

ACCEPT_RETRY_S = 0.2
ACCEPTS_PER_WAKEUP = 64
MAX_HELD_CONNECTIONS = 1024  # over connection_creation_rate, held before closing
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_TRANSIENT_ERRORS = frozenset(
    {errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED, errno.EINTR, errno.EPROTO, errno.EPERM}
)


class Acceptor:
    def __init__(
        self,
        sock: socket.socket,
        quotas: ConnectionQuotas,
        protocol_factory: Callable[[str], asyncio.Protocol],
        ssl_context: ssl.SSLContext | None,
        name: str,
    ) -> None:
        self.sock = sock
        self.quotas = quotas
        self.protocol_factory = protocol_factory
        self.ssl_context = ssl_context
        self.name = name
        self.accepted = 0
        self.refused = 0
        self.accept_errors = 0
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False
        self._handshakes: set[asyncio.Task] = set()
        # Connections over their address's connection_creation_rate, held until closed.
        self._held: dict[socket.socket, asyncio.TimerHandle] = {}
        self.throttled = 0
        sock.setblocking(False)

    def start(self) -> None:
        self._resume()

    def _resume(self) -> None:
        self._retry = None
        if self._closed or self._reading:
            return
        if self.quotas.at_limit():
            self.quotas.wait_for_room(self._resume)
            return
        self._loop.add_reader(self.sock.fileno(), self._on_readable)
        self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self.sock.fileno())
            self._reading = False

    def _on_readable(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            if self.quotas.at_limit():
                self._pause()
                self.quotas.wait_for_room(self._resume)
                rate_limited.warning(
                    "at-limit",
                    "listener %s stops accepting: %s",
                    self.name,
                    self.quotas.refusal("") or "at the connection limit",
                )
                return
            try:
                conn, addr = self.sock.accept()
            except OSError as e:
                if e.errno in _TRANSIENT_ERRORS:
                    return
                self.accept_errors += 1
                self._pause()
                self._retry = self._loop.call_later(ACCEPT_RETRY_S, self._resume)
                rate_limited.warning(
                    f"accept-{e.errno}",
                    "listener %s cannot accept connections: %s; retrying in %.1f s",
                    self.name,
                    e.strerror or e,
                    ACCEPT_RETRY_S,
                )
                return
            self._accepted(conn, addr)

    def _accepted(self, conn: socket.socket, addr) -> None:
        host = addr[0] if isinstance(addr, tuple) and addr else "?"
        reason = self.quotas.refusal(host)
        if reason is not None:
            self.refused += 1
            rate_limited.warning(
                f"refused-{self.name}",
                "listener %s refused a connection from %s: %s",
                self.name,
                host,
                reason,
            )
            _close_now(conn)
            return
        throttle = self.quotas.ip_throttle_ms(host, int(time.monotonic() * 1000))
        if throttle > 0:
            self.throttled += 1
            rate_limited.log(
                logging.INFO,
                f"throttled-{self.name}",
                "listener %s holds a connection from %s for %d ms, then closes it: over its "
                "connection_creation_rate",
                self.name,
                host,
                throttle,
            )
            self._close_later(conn, throttle)
            return
        self.quotas.acquire(host)
        self.accepted += 1
        conn.setblocking(False)
        protocol = self.protocol_factory(host)
        task = self._loop.create_task(self._connect(conn, host, protocol))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _connect(self, conn: socket.socket, host: str, protocol) -> None:
        """Makes the transport (with the TLS handshake on an SSL listener); a failure
        releases the connection's quota (``protocol.release_quota`` is idempotent)."""
        try:
            await self._loop.connect_accepted_socket(lambda: protocol, conn, ssl=self.ssl_context)
        except (TimeoutError, OSError, ssl.SSLError, ConnectionError) as e:
            rate_limited.log(
                logging.INFO,
                f"handshake-{self.name}",
                "connection from %s on %s failed: %s",
                host,
                self.name,
                e,
            )
            protocol.release_quota()
            _close_now(conn)
        except asyncio.CancelledError:
            protocol.release_quota()
            _close_now(conn)
            raise

    def _close_later(self, conn: socket.socket, delay_ms: int) -> None:
        """Closes ``conn`` (never served) ``delay_ms`` later; at once when
        MAX_HELD_CONNECTIONS are already held."""
        if len(self._held) >= MAX_HELD_CONNECTIONS:
            _close_now(conn)
            return

        def close() -> None:
            self._held.pop(conn, None)
            conn.close()

        self._held[conn] = self._loop.call_later(delay_ms / 1000, close)

    def close(self) -> None:
        self._closed = True
        for conn, handle in list(self._held.items()):
            handle.cancel()
            conn.close()
        self._held.clear()
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self.sock.close()


def _close_now(conn: socket.socket) -> None:
    """Closes with a reset: the refused client learns at once and no TIME_WAIT is left."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    conn.close()
