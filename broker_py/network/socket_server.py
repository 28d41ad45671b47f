"""The socket layer: the only module that reads from or writes to client sockets.

Each connection is an ``asyncio.Protocol``: its socket stays registered for reading,
received bytes go straight into the sans-IO decoder, and requests are handled in
arrival order and answered in that order, as Kafka's network layer does. A handler
that completes at once (most of them) runs inline in ``data_received`` and its
response is written to the transport's buffer; a handler that waits (a Fetch long
poll, JoinGroup, SyncGroup) runs as a task, and requests that arrive meanwhile queue
behind it. A handler may answer with a response frame already encoded: ``bytes``, as
Produce does for its common shape, or a ``list`` of chunks with DeferredRecords among
them, as Fetch does. Reading pauses while too many requests queue or too
much response data is buffered, so a client that does not read cannot grow the
broker's memory.

Fetch records are :class:`DeferredRecords` placeholders holding a segment
``FileSlice``: once the transport's buffer has drained, the storage engine sends the
range from the segment file to the socket with ``sendfile(2)``, resuming on EAGAIN
when the socket is writable again. Record bytes never pass through Python objects,
except on a TLS listener (SSL, SASL_SSL), where they are read and written through the
transport to be encrypted.

A SASL listener's connections authenticate before anything else is served
(``broker_py/security/sasl/sasl_authenticator.py``).

A frame over ``socket.request.max.bytes`` is refused before its body is read, and a
frame that does not decode closes that one connection; every other connection goes on.
The warnings such connections cause are rate-limited (``rate_limited_log``).

Limits (Kafka's keys): connections are accepted under ``max.connections`` and
``max.connections.per.ip`` (``acceptor``, ``connection_quotas``); a connection with no
socket activity and no request in progress for ``connections.max.idle.ms`` is closed;
request bytes held before handling are capped by ``queued.max.request.bytes`` over every
connection (``request_memory_pool``); a failed SASL authentication is answered, and the
connection closed, ``connection.failed.authentication.delay.ms`` later.

With ``kafka.request.logger`` at DEBUG every completed request is logged with its
phases (``broker_py/network/request_logger.py``).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import logstore
from broker_py.network.acceptor import Acceptor
from broker_py.network.connection_quotas import ConnectionQuotas
from broker_py.network.rate_limited_log import RateLimitedLog
from broker_py.network.request_logger import RequestTimes, log_completed, now
from broker_py.network.request_logger import enabled as request_log_enabled
from broker_py.network.request_memory_pool import RequestMemoryPool
from broker_py.security.sasl.sasl_authenticator import SaslServerAuthenticator
from broker_py.security.ssl.ssl_context import distinguished_name
from broker_py.security.ssl.ssl_principal_mapper import NoMatchingRuleError, SslPrincipalMapper
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import KafkaError, MalformedMessageError, ProtocolError
from logstore.protocol.frame import (
    Request,
    RequestDecoder,
    UnsupportedRequest,
    decode_request,
    encode_response_chunks,
)
from logstore.protocol.produce_frame import ProduceFrame
from logstore.protocol.schema import Message
from logstore.protocol.types import DeferredRecords

log = logging.getLogger(__name__)
rate_limited = RateLimitedLog(log)

MAX_QUEUED_REQUESTS = 64
SASL_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size
_BEFORE_AUTHENTICATION = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)
_REAUTHENTICATION = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# A request frame this large (but Produce and Fetch, big by nature and cheap to decode)
# is decoded, and its answer encoded, on a worker thread: a request of a million array
# elements costs seconds of pure-Python codec work, and meanwhile the event loop serves
# every other connection (the interpreter switches threads every few milliseconds).
OFFLOAD_FRAME_BYTES = 256 << 10
_DECODED_ON_LOOP = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})
WRITE_HIGH_WATER = 4 << 20
WRITE_LOW_WATER = 1 << 20

UnsupportedHandler = Callable[[UnsupportedRequest], Message | None]


class LargeRequestFrame:
    """A request frame over OFFLOAD_FRAME_BYTES, queued undecoded (decoded off the loop)."""

    __slots__ = ("frame", "size")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.size = len(frame)


class ConnectionClosed(Exception):
    """The connection is being closed for a protocol violation or a failed handler."""


class ClientConnection(asyncio.Protocol):
    def __init__(self, server: SocketServer, quota_host: str | None = None) -> None:
        self.server = server
        # The address this connection counts against in the connection quotas (None: not
        # counted, a connection made outside the acceptor).
        self._quota_host = quota_host
        self.held = 0  # request bytes held before handling (request_memory_pool)
        self._queued_bytes = 0
        self._memory_paused = False
        self.last_active = time.monotonic()
        # A SASL listener's connection authenticates first (broker_py/security/sasl/sasl_authenticator.py),
        # with requests no larger than Kafka's sasl.server.max.receive.size until then.
        self.sasl = server.new_authenticator() if server.new_authenticator is not None else None
        limit = (
            server.max_request_size
            if self.sasl is None
            else min(server.max_request_size, SASL_MAX_RECEIVE_SIZE)
        )
        self.decoder = RequestDecoder(max_request_size=limit)
        self._close_after = False
        self.peer = "?"
        self.local = "?"
        self.host = "?"  # the client's address, as ACLs name hosts
        self._tls_principal: str | None = None
        self.client_id: str | None = None
        self.client_software: str | None = None
        self.transport: asyncio.Transport | None = None
        # Each request with the clock reading of the socket read that completed it.
        self._queue: collections.deque[
            tuple[Request | ProduceFrame | UnsupportedRequest, float]
        ] = collections.deque()
        self._task: asyncio.Task[None] | None = None  # a waiting handler or a sendfile
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._closed = False
        self._send_fd: int | None = None
        self._delayed_close: asyncio.TimerHandle | None = None
        self._delayed_stop = False

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
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

    def data_received(self, data: bytes) -> None:
        received = now()
        self._active()
        try:
            self.decoder.receive_data(data)
            if self.sasl is not None and not self.sasl.authenticated:
                self._authenticating(received)
                if self._closed:
                    return
            while (frame := self.decoder.next_request_frame()) is not None:
                if (
                    len(frame) > OFFLOAD_FRAME_BYTES
                    and int.from_bytes(frame[:2], "big", signed=True) not in _DECODED_ON_LOOP
                ):
                    self._enqueue(LargeRequestFrame(frame), received)
                else:
                    self._enqueue(decode_request(frame), received)
        except MalformedMessageError as e:
            rate_limited.warning(
                "malformed", "closing %s: malformed %s request: %s", self.peer, e.api_key, e
            )
            self.close()
            return
        except ProtocolError as e:
            rate_limited.warning("protocol", "closing %s: %s", self.peer, e)
            self.close()
            return
        self._process()

    def _active(self) -> None:
        self.last_active = time.monotonic()
        connections = self.server.connections
        if self in connections:
            connections.move_to_end(self)

    def _enqueue(self, event, received: float) -> None:
        self._queue.append((event, received))
        self._queued_bytes += event.size

    def _account(self) -> None:
        """Tells the memory pool what this connection holds now."""
        if not self._closed:
            self.server.memory_pool.update(self, self.decoder.buffered + self._queued_bytes)

    def pause_for_memory(self) -> None:
        self._memory_paused = True
        self._flow_control()

    def resume_for_memory(self) -> None:
        self._memory_paused = False
        self._flow_control()

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
            not self._queue
            and self._task is None
            and not self._write_paused
            and self._delayed_close is None
            and (self.transport is None or self.transport.get_write_buffer_size() == 0)
        )

    def _authenticating(self, received: float) -> None:
        """Before authentication each request is answered before the next is read, and
        after a v0 SaslHandshake the frames are bare SASL tokens."""
        sasl = self.sasl
        assert sasl is not None
        while not sasl.authenticated and not self._closed:
            if sasl.raw_tokens:
                token = self.decoder.next_raw_frame()
                if token is None:
                    return
                try:
                    challenge = sasl.authenticate(token)
                except KafkaError as e:
                    rate_limited.warning(
                        "sasl", "closing %s: SASL authentication failed: %s", self.peer, e
                    )
                    self._close_after_delay(None)
                    return
                assert self.transport is not None
                self.transport.write(len(challenge).to_bytes(4, "big") + challenge)
                continue
            event = self.decoder.next_request()
            if event is None:
                return
            self._enqueue(event, received)
            self._process()
        if sasl.authenticated:
            self.decoder.max_request_size = self.server.max_request_size

    @property
    def principal(self) -> str:
        """``User:<name>`` a SASL exchange authenticated, ``User:<subject DN>`` of a TLS
        client certificate, or ``User:ANONYMOUS`` (Kafka's default principal builder)."""
        if self.sasl is not None and self.sasl.principal is not None:
            return "User:" + self.sasl.principal
        return self._tls_principal or "User:ANONYMOUS"

    def close_after_response(self) -> None:
        """Closes the connection once the response being made is sent (a failed
        authentication)."""
        self._close_after = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.server.connections.pop(self, None)
        self.server.memory_pool.release(self)
        self.release_quota()
        if self._delayed_close is not None:
            self._delayed_close.cancel()
            self._delayed_close = None
        if self._task is not None:
            self._task.cancel()
        if self._send_fd is not None:
            if self._task is None:
                os.close(self._send_fd)
            else:
                # The cancelled sendfile may still have the descriptor registered.
                fd = self._send_fd
                self._task.add_done_callback(lambda _: os.close(fd))
            self._send_fd = None
        if self._drained is not None and not self._drained.done():
            self._drained.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._process()

    # ---- request processing ----

    def _process(self) -> None:
        """Handles queued requests in order while no task is running and writes can go on."""
        while (
            self._queue
            and self._task is None
            and not self._write_paused
            and not self._closed
            and self.server.processing
        ):
            event, received = self._queue.popleft()
            self._queued_bytes -= event.size
            times = RequestTimes(received, now()) if request_log_enabled() else None
            if type(event) is LargeRequestFrame:
                self._start(self._handle_off_loop(event, times))
                break
            try:
                result = self._dispatch(event)
                if self._close_after and self.server.failed_authentication_delay_s > 0:
                    # A failed authentication: answered, and closed, after the delay.
                    self._close_after_delay(
                        self._encode(event, result)
                        if result is not None and not asyncio.iscoroutine(result)
                        else None
                    )
                    return
                if times is not None:
                    times.local_done = times.remote_done = times.send_started = now()
                if type(result) is bytes:  # an encoded response frame
                    self.transport.write(result)
                    if times is not None:
                        self._completed(event, times)
                elif asyncio.iscoroutine(result):
                    self._start(self._finish(event, result, times))
                elif result is not None:
                    self._respond(event, result, times)
                elif times is not None:
                    self._completed(event, times)
            except (ConnectionClosed, ProtocolError) as e:
                rate_limited.warning("protocol", "closing %s: %s", self.peer, e)
                self.close()
                return
            if self._close_after:
                self._closed = True
                assert self.transport is not None
                self.transport.close()  # after what is buffered is sent
                return
        self._flow_control()
        self._account()

    def _dispatch(self, event: Request | ProduceFrame | UnsupportedRequest):
        if isinstance(event, UnsupportedRequest):
            response = self.server.on_unsupported(event)
            if response is None:
                raise ConnectionClosed(f"unsupported api key {event.api_key} v{event.api_version}")
            return response
        self.client_id = event.client_id
        if self.sasl is not None:
            if not self.sasl.authenticated and event.api_key not in _BEFORE_AUTHENTICATION:
                raise ConnectionClosed(
                    f"{event.api_key.api_name} request before SASL authentication"
                )
            if event.api_key not in _REAUTHENTICATION and self.sasl.session_expired():
                raise ConnectionClosed(
                    f"{event.api_key.api_name} request after the SASL session expired (connections.max.reauth.ms)"
                )
        handler = self.server.handlers.get(event.api_key)
        if handler is None:
            raise ConnectionClosed(f"no handler for {event.api_key.api_name}")
        try:
            return handler(event, self)
        except Exception:
            log.exception(
                "%s v%d from %s failed", event.api_key.api_name, event.api_version, self.peer
            )
            return self._error_response(event)

    def _error_response(self, event: Request | ProduceFrame):
        """The answer to a request whose handler raised (UNKNOWN_SERVER_ERROR; None:
        nothing is sent); the connection stays open unless even that fails."""
        try:
            return self.server.on_error(event)
        except Exception:
            log.exception(
                "answering the failed %s from %s failed too", event.api_key.api_name, self.peer
            )
            raise ConnectionClosed("handler failed") from None

    def _start(self, coro) -> None:
        self._task = asyncio.get_running_loop().create_task(coro)
        self._task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, (ConnectionClosed, ProtocolError, ConnectionError)):
                log.error("closing %s: %s", self.peer, exc, exc_info=exc)
            self.close()
            return
        self._process()

    async def _handle_off_loop(self, large: LargeRequestFrame, times: RequestTimes | None) -> None:
        """A large request: decoded on a worker thread, handled here, its answer encoded
        on a worker thread."""
        try:
            event = await asyncio.to_thread(decode_request, large.frame)
        except (MalformedMessageError, ProtocolError) as e:
            rate_limited.warning("malformed", "closing %s: malformed request: %s", self.peer, e)
            self.close()
            return
        result = self._dispatch(event)
        await self._finish(event, result, times, encode_off_loop=True)

    async def _finish(
        self,
        event: Request | ProduceFrame | UnsupportedRequest,
        pending,
        times: RequestTimes | None,
        encode_off_loop: bool = False,
    ) -> None:
        try:
            response = await pending if inspect.isawaitable(pending) else pending
        except Exception:
            log.exception(
                "%s from %s failed", getattr(event.api_key, "api_name", event.api_key), self.peer
            )
            response = self._error_response(event)
        if times is not None:
            times.remote_done = times.send_started = now()
        if response is not None:
            chunks = (
                await asyncio.to_thread(self._encode, event, response)
                if encode_off_loop
                else self._encode(event, response)
            )
            if any(isinstance(c, DeferredRecords) for c in chunks):
                await self._send_with_files(chunks)
            else:
                self._write(chunks)
        if times is not None:
            self._completed(event, times)

    def _encode(
        self, event: Request | ProduceFrame | UnsupportedRequest, response: Message | bytes | list
    ) -> list:
        if type(response) is bytes:
            return [response]
        if type(response) is list:  # chunks encoded by the handler
            return response
        version = event.api_version if isinstance(event, (Request, ProduceFrame)) else 0
        return encode_response_chunks(event.correlation_id, response.API_KEY, version, response)

    def _respond(
        self,
        event: Request | ProduceFrame | UnsupportedRequest,
        response: Message | bytes | list,
        times: RequestTimes | None,
    ) -> None:
        chunks = self._encode(event, response)
        if any(isinstance(c, DeferredRecords) for c in chunks):
            self._start(self._send_with_files(chunks, event, times))
        else:
            self._write(chunks)
            if times is not None:
                self._completed(event, times)

    def _completed(
        self, event: Request | ProduceFrame | UnsupportedRequest, times: RequestTimes
    ) -> None:
        times.sent = now()
        api = event.api_key
        log_completed(
            getattr(api, "api_name", str(api)),
            event.api_version,
            event.correlation_id,
            event.client_id,
            self.local,
            self.peer,
            times,
            self.principal,
        )

    def _write(self, chunks: list) -> None:
        assert self.transport is not None
        self.transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    async def _send_with_files(
        self,
        chunks: list,
        event: Request | ProduceFrame | UnsupportedRequest | None = None,
        times: RequestTimes | None = None,
    ) -> None:
        pending: list[bytes | bytearray] = []
        for chunk in chunks:
            if isinstance(chunk, DeferredRecords) and self.server.ssl_context is not None:
                # TLS encrypts in user space: the records pass through the transport.
                data = chunk.source.read() if chunk.length else b""
                if len(data) < chunk.length:
                    raise ConnectionClosed("segment truncated during a fetch")
                pending.append(data[: chunk.length])
                if sum(len(p) for p in pending) >= WRITE_LOW_WATER:
                    self._write(pending)
                    pending = []
                    await self._drain_tls()
            elif isinstance(chunk, DeferredRecords):
                if pending:
                    self._write(pending)
                    pending = []
                if chunk.length:
                    await self._drain()
                    await self._sendfile(chunk.source, chunk.length)
            else:
                pending.append(chunk)
        if pending:
            self._write(pending)
        if times is not None and event is not None:
            self._completed(event, times)

    async def _drain_tls(self) -> None:
        """Waits while the transport holds more than its high-water mark."""
        if self._write_paused:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await self._drained
            finally:
                self._drained = None

    async def _drain(self) -> None:
        """Waits until the transport's buffer is empty (sendfile writes around it)."""
        assert self.transport is not None
        if self.transport.get_write_buffer_size() == 0:
            return
        self._drained = asyncio.get_running_loop().create_future()
        self.transport.set_write_buffer_limits(high=0, low=0)
        try:
            if self.transport.get_write_buffer_size() > 0:
                await self._drained
        finally:
            self._drained = None
            if not self._closed:
                self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)

    def _sendfile_fd(self) -> int:
        """A duplicate of the socket's descriptor: the event loop refuses to watch the
        transport's own descriptor for writability, but the duplicate (same socket) may
        be watched while the transport's buffer is empty and it does not write."""
        if self._send_fd is None:
            assert self.transport is not None
            sock = self.transport.get_extra_info("socket")
            if sock is None or self._closed:
                raise ConnectionClosed("socket gone")
            self._send_fd = os.dup(sock.fileno())
        return self._send_fd

    async def _sendfile(self, source: logstore.FileSlice, length: int) -> None:
        fd = self._sendfile_fd()
        loop = asyncio.get_running_loop()
        sent = 0
        while sent < length:
            try:
                n = source.sendfile(fd, sent, length - sent)
            except BlockingIOError:
                writable = loop.create_future()

                def ready(fut: asyncio.Future[None] = writable) -> None:
                    if not fut.done():
                        fut.set_result(None)

                loop.add_writer(fd, ready)
                try:
                    await writable
                finally:
                    loop.remove_writer(fd)
                continue
            if n == 0:
                # The segment shrank under the slice (truncation): the frame cannot be
                # completed, so the connection must go.
                raise ConnectionClosed("segment truncated during a fetch")
            sent += n

    def _close_after_delay(self, chunks: list | None) -> None:
        """Reads nothing more; ``connection.failed.authentication.delay.ms`` later writes
        ``chunks`` (the failed authentication's answer, if any) and closes."""
        delay = self.server.failed_authentication_delay_s
        self._close_after = False
        self._queue.clear()
        self._queued_bytes = 0
        self._flow_control(stop=True)

        def send_and_close() -> None:
            self._delayed_close = None
            if self._closed or self.transport is None:
                return
            self._closed = True
            if chunks is not None:
                self._write(chunks)
            self.transport.close()  # after what is buffered is sent

        if delay <= 0:
            send_and_close()
        else:
            self._delayed_close = asyncio.get_running_loop().call_later(delay, send_and_close)

    def _flow_control(self, stop: bool = False) -> None:
        """Stops reading while requests pile up behind a waiting handler or unsent data,
        while the request memory pool is over its cap, or for good (``stop``)."""
        if self.transport is None or self._closed:
            return
        if stop:
            self._delayed_stop = True
        busy = (
            len(self._queue) >= MAX_QUEUED_REQUESTS
            or self._write_paused
            or self._memory_paused
            or self._delayed_stop
        )
        if busy and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not busy and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    def close(self) -> None:
        self._closed = True
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
        on_error: Callable[[Request | ProduceFrame], Any] | None = None,
        config=None,
        quotas: ConnectionQuotas | None = None,
        memory_pool: RequestMemoryPool | None = None,
    ) -> None:
        self.name = name
        # The answer to a request whose handler raised (None: send nothing).
        self.on_error = on_error or (lambda event: None)
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
            conn._process()

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
