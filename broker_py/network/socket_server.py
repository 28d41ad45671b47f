"""A listener's client connections (Kafka's ``SocketServer``: the ``Acceptor`` and the
``Processor`` serving its connections).

Each connection is an ``asyncio.Protocol`` (:class:`ClientConnection`) whose socket stays
registered for reading; it only wires three parts together, one concept each:

- reading frames (:mod:`broker_py.network.request_reader`): decoding, size limits
  (``socket.request.max.bytes``), the request memory pool (``queued.max.request.bytes``)
  and back-pressure;
- ordering responses (:mod:`broker_py.network.request_channel`): requests handled in
  arrival order and answered in that order, muting, the request log, closing after a
  failed authentication;
- sending (:mod:`broker_py.network.response_sender`): writes, draining, and ``sendfile``
  of fetched records.

A SASL listener's connections authenticate before anything else is served
(``broker_py/security/sasl/sasl_authenticator.py``); a TLS client certificate names the
principal (``ssl.principal.mapping.rules``). A frame that does not decode closes that one
connection; every other connection goes on. The warnings such connections cause are
rate-limited (``rate_limited_log``).

Limits (Kafka's keys): connections are accepted under ``max.connections`` and
``max.connections.per.ip`` (``acceptor``, ``connection_quotas``); a connection with no
socket activity and no request in progress for ``connections.max.idle.ms`` is closed; a
failed SASL authentication is answered, and the connection closed,
``connection.failed.authentication.delay.ms`` later.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from broker_py.network.acceptor import Acceptor
from broker_py.network.connection_quotas import ConnectionQuotas
from broker_py.network.rate_limited_log import RateLimitedLog
from broker_py.network.request_channel import RequestChannel
from broker_py.network.request_logger import now
from broker_py.network.request_memory_pool import RequestMemoryPool
from broker_py.network.request_reader import RequestReader
from broker_py.network.response_sender import WRITE_HIGH_WATER, WRITE_LOW_WATER, ResponseSender
from broker_py.security.sasl.sasl_authenticator import SaslServerAuthenticator
from broker_py.security.ssl.ssl_context import distinguished_name
from broker_py.security.ssl.ssl_principal_mapper import NoMatchingRuleError, SslPrincipalMapper
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, MalformedMessageError, ProtocolError
from logstore.protocol.frame import Request, UnsupportedRequest
from logstore.protocol.produce_frame import ProduceFrame
from logstore.protocol.schema import Message

log = logging.getLogger(__name__)
rate_limited = RateLimitedLog(log)

UnsupportedHandler = Callable[[UnsupportedRequest], Message | None]


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(self, server: SocketServer, quota_host: str | None = None) -> None:
        self.server = server
        # The address this connection counts against in the connection quotas (None: not
        # counted, a connection made outside the acceptor).
        self._quota_host = quota_host
        self.last_active = time.monotonic()
        # A SASL listener's connection authenticates first (sasl_authenticator), with
        # requests no larger than Kafka's sasl.server.max.receive.size until then.
        self.sasl = server.new_authenticator() if server.new_authenticator is not None else None
        self.closed = False
        self.peer = "?"
        self.local = "?"
        self.host = "?"  # the client's address, as ACLs name hosts
        self._tls_principal: str | None = None
        self.client_id: str | None = None
        self.client_software: str | None = None
        # The clock reading (request_logger.now) of the socket read that completed the
        # request being handled: where its time in the request queue starts.
        self.request_received = 0.0
        # Set while a request is handled: how long to mute the connection once its response
        # is sent (a client over a quota, KIP-219); 0: not throttled.
        self.throttle_ms = 0
        self.transport: asyncio.Transport | None = None
        self.reader = RequestReader(self, server.max_request_size, self.sasl is not None)
        self.channel = RequestChannel(self)
        self.sender = ResponseSender(self)
        # Called once the connection is gone (a share session ends with its connection).
        self.on_close: list[Callable[[], None]] = []

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sender.attach(transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = peer[0] if peer else "?"
        cert = transport.get_extra_info("peercert")
        if cert:
            try:
                self._tls_principal = "User:" + self.server.principal_mapper.name(
                    distinguished_name(cert.get("subject", ()))
                )
            except NoMatchingRuleError as e:
                log.warning("closing %s: %s", self.peer, e)
                transport.close()
                return
        local = transport.get_extra_info("sockname")
        self.local = f"{local[0]}:{local[1]}" if local else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        self.server.connections[self] = None

    def get_buffer(self, sizehint: int) -> memoryview:
        # The decoder lends where the bytes go: a large frame is read in place.
        return self.reader.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        received = now()
        self._active()
        reader = self.reader
        channel = self.channel
        try:
            reader.decoder.buffer_updated(nbytes)
            if self.sasl is not None and not self.sasl.authenticated:
                self._authenticating(received)
                if self.closed:
                    return
            reader.read_requests(channel.enqueue, received)
        except MalformedMessageError as e:
            self.close_with_warning("malformed", "malformed %s request: %s", e.api_key, e)
            return
        except ProtocolError as e:
            self.close_with_warning("protocol", "%s", e)
            return
        channel.process()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.pop(self, None)
        self.server.memory_pool.release(self.reader)
        self.release_quota()
        self.sender.connection_lost(self.channel.connection_lost())
        callbacks, self.on_close = self.on_close, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("closing %s", self.peer)

    def pause_writing(self) -> None:
        self.sender.pause_writing()

    def resume_writing(self) -> None:
        self.sender.resume_writing()
        self.channel.process()

    # ---- what a handler sees (broker_py.server.request_context) ----

    @property
    def principal(self) -> str:
        """``User:<name>`` a SASL exchange authenticated, ``User:<subject DN>`` of a TLS
        client certificate, or ``User:ANONYMOUS`` (Kafka's default principal builder)."""
        if self.sasl is not None and self.sasl.principal is not None:
            return "User:" + self.sasl.principal
        return self._tls_principal or "User:ANONYMOUS"

    def authentication_failed(self, mechanism: str | None, reason: object) -> None:
        """Logs a failed SASL authentication at INFO as Kafka does, with the listener, the
        mechanism and the user name the client gave (never its password): ``Failed
        authentication with /<host> (channelId=<local>-<peer>, listener <name>, mechanism
        <mechanism>, user '<user>') (<reason>)``. A client retrying the same failure is
        rate-limited per client host, mechanism and user (the next line counts them)."""
        user = self.sasl.user if self.sasl is not None else None
        rate_limited.log(
            logging.INFO,
            f"authentication {self.host} {mechanism} {user}",
            "Failed authentication with /%s (channelId=%s-%s, listener %s, mechanism %s, "
            "user %s) (%s)",
            self.host,
            self.local,
            self.peer,
            self.server.name,
            mechanism or "none",
            repr(user) if user is not None else "not given",
            reason,
        )

    def close_after_response(self) -> None:
        """Closes the connection once the response being made is sent (a failed
        authentication)."""
        self.channel.close_after_response()

    # ---- the connection's life ----

    def _active(self) -> None:
        self.last_active = time.monotonic()
        connections = self.server.connections
        if self in connections:
            connections.move_to_end(self)

    def _authenticating(self, received: float) -> None:
        """Before authentication each request is answered before the next is read, and
        after a v0 SaslHandshake the frames are bare SASL tokens."""
        sasl = self.sasl
        assert sasl is not None
        decoder = self.reader.decoder
        while not sasl.authenticated and not self.closed:
            if sasl.raw_tokens:
                token = decoder.next_raw_frame()
                if token is None:
                    return
                try:
                    challenge = sasl.authenticate(token)
                except KafkaError as e:
                    self.authentication_failed(sasl.mechanism, e)
                    self.channel.close_after_delay(None)
                    return
                self.sender.write_frame(len(challenge).to_bytes(4, "big") + challenge)
                continue
            event = decoder.next_request()
            if event is None:
                return
            self.channel.enqueue(event, received)
            self.channel.process()
        if sasl.authenticated:
            self.reader.authenticated()

    def release_quota(self) -> None:
        """Gives back what the connection counts against (idempotent)."""
        if self._quota_host is not None:
            self.server.quotas.release(self._quota_host)
            self._quota_host = None

    def quota_released(self) -> bool:
        return self._quota_host is None

    @property
    def idle(self) -> bool:
        """No request queued or in progress and nothing left to send."""
        return (
            self.channel.idle
            and not self.sender.write_paused
            and (self.transport is None or self.transport.get_write_buffer_size() == 0)
        )

    def close_with_warning(self, kind: str, msg: str, *args: object) -> None:
        """Closes the connection, saying why (at most once per interval per ``kind``)."""
        rate_limited.warning(kind, "closing %s: " + msg, self.peer, *args)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class _Defaults(dict):
    """Kafka's defaults of the limit keys, for a server made without a broker config."""

    def __init__(self) -> None:
        super().__init__(
            {
                "max.connections": 2147483647,
                "max.connections.per.ip": 2147483647,
                "max.connections.per.ip.overrides": {},
                "connections.max.idle.ms": 600000,
                "connection.failed.authentication.delay.ms": 100,
            }
        )


IDLE_CHECK_MAX_S = 1.0


class SocketServer:
    """Accepts connections on one listener, each served by a :class:`ClientConnection`.

    ``connections`` is ordered by last socket activity, the least recent first: the idle
    check walks it from the front and stops at the first connection not idle long enough.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handlers: dict,
        on_unsupported: UnsupportedHandler,
        max_request_size: int,
        name: str = "PLAINTEXT",
        new_authenticator: Callable[[], SaslServerAuthenticator] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        principal_mapper: SslPrincipalMapper | None = None,
        on_error: Callable[[Request | ProduceFrame, ErrorCode], Any] | None = None,
        config=None,
        quotas: ConnectionQuotas | None = None,
        memory_pool: RequestMemoryPool | None = None,
    ) -> None:
        self.name = name
        # The answer to a request whose handler raised (None: send nothing).
        self.on_error = on_error or (lambda event, code: None)
        self.new_authenticator = new_authenticator
        self.ssl_context = ssl_context
        self.principal_mapper = principal_mapper or SslPrincipalMapper("DEFAULT")
        self.host = host
        self.port = port
        self.handlers = handlers
        self.on_unsupported = on_unsupported
        self.max_request_size = max_request_size
        self.config = config if config is not None else _Defaults()
        self.quotas = quotas or ConnectionQuotas(self.config, 1 << 30)
        self.memory_pool = memory_pool or RequestMemoryPool(max(512 << 20, max_request_size))
        self.connections: collections.OrderedDict[ClientConnection, None] = (
            collections.OrderedDict()
        )
        self._acceptor: Acceptor | None = None
        self._idle_check: asyncio.Task[None] | None = None
        # False while a broker joining a cluster is not registered yet: connections are
        # accepted and their requests queued, answered once it is (Kafka's
        # enableRequestProcessing after the broker's registration).
        self.processing = True

    @property
    def failed_authentication_delay_s(self) -> float:
        return self.config["connection.failed.authentication.delay.ms"] / 1000

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listens on ``host:port``, or on ``sock`` already bound and listening there."""
        if sock is None:
            sock = self.bind()
        self.port = sock.getsockname()[1]
        self._acceptor = Acceptor(
            sock,
            self.quotas,
            lambda host: ClientConnection(self, host),
            self.ssl_context,
            self.name,
        )
        self._acceptor.start()
        self._idle_check = asyncio.get_running_loop().create_task(
            self._close_idle_connections(), name=f"idle-{self.name}"
        )

    def bind(self) -> socket.socket:
        """A socket bound and listening on ``host:port`` for :meth:`start` (OSError if the
        address cannot be had)."""
        sock = socket.create_server((self.host, self.port), family=_family(self.host), backlog=1024)
        self.port = sock.getsockname()[1]
        return sock

    async def _close_idle_connections(self) -> None:
        """Closes connections idle for ``connections.max.idle.ms`` (Kafka's
        Selector.maybeCloseOldestConnection, all that expired at each check)."""
        while True:
            idle_s = self.config["connections.max.idle.ms"] / 1000
            await asyncio.sleep(min(IDLE_CHECK_MAX_S, max(idle_s / 4, 0.01)))
            self.close_idle(time.monotonic(), idle_s)

    def close_idle(self, now_s: float, idle_s: float) -> int:
        closed = 0
        for conn in list(self.connections):
            if now_s - conn.last_active < idle_s:
                break
            if not conn.idle:
                conn.last_active = now_s  # busy (a long poll, a send): not idle
                self.connections.move_to_end(conn)
                continue
            log.debug(
                "closing %s: idle for more than connections.max.idle.ms (%d ms)",
                conn.peer,
                idle_s * 1000,
            )
            conn.close()
            self.connections.pop(conn, None)
            closed += 1
        return closed

    def enable_request_processing(self) -> None:
        self.processing = True
        for conn in list(self.connections):
            conn.channel.process()

    async def stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
        if self._idle_check is not None:
            self._idle_check.cancel()
            await asyncio.gather(self._idle_check, return_exceptions=True)
        for conn in list(self.connections):
            conn.close()
        await asyncio.sleep(0)  # connection_lost callbacks run


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
