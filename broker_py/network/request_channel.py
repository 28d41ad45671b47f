"""One client connection's requests, handled in arrival order and answered in that order
(Kafka's ``RequestChannel`` with the ``Processor`` muting a channel while a request is in
flight).

Requests read are queued; they are handled one at a time while no handler is waiting,
the transport is not paused for writing and request processing is enabled. A handler
that completes at once (most of them) runs inline and its response is written at once;
a handler that waits (a Fetch long poll, JoinGroup, SyncGroup) runs as a task, and the
requests that arrive meanwhile queue behind it; a handler may instead return a
:class:`~broker_py.network.pending_response.PendingResponse` (a follower's parked Fetch),
whose response is sent in the turn it completes in, with no task. A handler may answer
with a response frame already encoded: ``bytes``, as Produce does for its common shape,
or a ``list`` of chunks with DeferredRecords among them, as Fetch does. A large request
is decoded and its answer encoded on a worker thread (``request_reader.LargeRequestFrame``).

Muting: the connection is muted while MAX_QUEUED_REQUESTS requests queue or the
transport is paused for writing; a muted connection reads nothing more
(``request_reader``). A handler that raises is answered with the server's ``on_error``
response and the connection stays open; a request the connection may not make closes it.

Throttling (KIP-219): a handler that sets the connection's ``throttle_ms`` (a client over
its quota) has its response sent at once, then the connection reads and handles nothing
more for that many milliseconds; other connections go on.

A failed SASL authentication is answered, and the connection closed,
``connection.failed.authentication.delay.ms`` later, reading nothing meanwhile. With
``kafka.request.logger`` at DEBUG every completed request is logged with its phases
(``request_logger``).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
from typing import TYPE_CHECKING

from broker_py.network.pending_response import PendingResponse
from broker_py.network.request_logger import RequestTimes, log_completed, now
from broker_py.network.request_logger import enabled as request_log_enabled
from broker_py.network.request_reader import LargeRequestFrame, QueuedRequest
from broker_py.network.response_sender import ConnectionClosed
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, MalformedMessageError, ProtocolError
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame
from logstore.protocol.frame import (
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response_chunks,
)
from logstore.protocol.produce_frame import ProduceFrame
from logstore.protocol.schema import Message
from logstore.protocol.types import DeferredRecords

if TYPE_CHECKING:
    from broker_py.network.socket_server import ClientConnection

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64
_BEFORE_AUTHENTICATION = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)
_REAUTHENTICATION = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class RequestChannel:
    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn
        self._server = conn.server
        # Each request with the clock reading of the socket read that completed it.
        self._queue: collections.deque[tuple[QueuedRequest, float]] = collections.deque()
        self.queued_bytes = 0
        # A waiting handler, a sendfile, or a pending response.
        self.task: asyncio.Task[None] | PendingResponse | None = None
        self._close_after = False
        self._delayed_close: asyncio.TimerHandle | None = None
        self._throttled: asyncio.TimerHandle | None = None  # muted until it fires

    @property
    def muted(self) -> bool:
        """Too many requests queue, the client does not read its responses, or it is
        throttled."""
        return (
            len(self._queue) >= MAX_QUEUED_REQUESTS
            or self._conn.sender.write_paused
            or self._throttled is not None
        )

    @property
    def idle(self) -> bool:
        """No request queued or in progress, and no close pending."""
        return (
            not self._queue
            and self.task is None
            and self._delayed_close is None
            and self._throttled is None
        )

    def enqueue(self, event: QueuedRequest, received: float) -> None:
        self._queue.append((event, received))
        self.queued_bytes += event.size

    def close_after_response(self) -> None:
        self._close_after = True

    def connection_lost(self) -> asyncio.Task[None] | None:
        """Cancels what is pending; the running task, if any (now cancelled)."""
        if self._delayed_close is not None:
            self._delayed_close.cancel()
            self._delayed_close = None
        if self._throttled is not None:
            self._throttled.cancel()
            self._throttled = None
        task = self.task
        if task is not None:
            task.cancel()
        return task if type(task) is not PendingResponse else None

    # ---- handling in order ----

    def process(self) -> None:
        """Handles queued requests in order while no task is running and writes can go on."""
        conn = self._conn
        sender = conn.sender
        server = self._server
        queue = self._queue
        while (
            queue
            and self.task is None
            and not sender.write_paused
            and not conn.closed
            and server.processing
            and self._throttled is None
        ):
            event, received = queue.popleft()
            self.queued_bytes -= event.size
            conn.request_received = received  # the request queue time's start, for metrics
            times = RequestTimes(received, now()) if request_log_enabled() else None
            if type(event) is LargeRequestFrame:
                self._start(self._handle_off_loop(event, times))
                break
            try:
                result = self._dispatch(event)
                if self._close_after and server.failed_authentication_delay_s > 0:
                    # A failed authentication: answered, and closed, after the delay.
                    self.close_after_delay(
                        self._encode(event, result)
                        if result is not None and not asyncio.iscoroutine(result)
                        else None
                    )
                    return
                if times is not None:
                    times.local_done = times.remote_done = times.send_started = now()
                if type(result) is bytes:  # an encoded response frame
                    sender.write_frame(result)
                    if times is not None:
                        self._completed(event, times)
                elif asyncio.iscoroutine(result):
                    self._start(self._finish(event, result, times))
                elif type(result) is PendingResponse:
                    self._pend(event, result, times)
                elif result is not None:
                    self._respond(event, result, times)
                elif times is not None:
                    self._completed(event, times)
            except (ConnectionClosed, ProtocolError) as e:
                conn.close_with_warning(getattr(e, "kind", "protocol"), "%s", e)
                return
            if self._close_after:
                conn.closed = True
                assert conn.transport is not None
                conn.transport.close()  # after what is buffered is sent
                return
            if conn.throttle_ms > 0 and self.task is None:
                self._throttle()
        reader = conn.reader
        # self.muted, inline: this runs once per read
        reader.update_reading(
            len(queue) >= MAX_QUEUED_REQUESTS or sender.write_paused or self._throttled is not None
        )
        reader.account(self.queued_bytes)

    def _dispatch(self, event: Request | ProduceFrame | UnsupportedRequest):
        conn = self._conn
        if isinstance(event, UnsupportedRequest):
            response = self._server.on_unsupported(event)
            if response is None:
                raise ConnectionClosed(f"unsupported api key {event.api_key} v{event.api_version}")
            return response
        conn.client_id = event.client_id
        sasl = conn.sasl
        if sasl is not None:
            if not sasl.authenticated and event.api_key not in _BEFORE_AUTHENTICATION:
                # Its own warning kind: other protocol errors do not hold this one back.
                raise ConnectionClosed(
                    f"{event.api_key.api_name} request before SASL authentication on "
                    f"listener {self._server.name} (a client without SASL settings? it must "
                    f"authenticate with one of {', '.join(sasl.mechanisms)} first)",
                    kind="unauthenticated",
                )
            if event.api_key not in _REAUTHENTICATION and sasl.session_expired():
                raise ConnectionClosed(
                    f"{event.api_key.api_name} request after the SASL session expired "
                    "(connections.max.reauth.ms)"
                )
        handler = self._server.handlers.get(event.api_key)
        if handler is None:
            raise ConnectionClosed(f"no handler for {event.api_key.api_name}")
        try:
            return handler(event, conn)
        except KafkaError as exc:
            # The handler refused the request as a whole (Kafka's Errors.forException).
            log.info(
                "%s v%d from %s: %s %s",
                event.api_key.api_name,
                event.api_version,
                conn.peer,
                exc.errno.name,
                exc,
            )
            return self._error_response(event, exc.errno)
        except Exception:
            log.exception(
                "%s v%d from %s failed", event.api_key.api_name, event.api_version, conn.peer
            )
            return self._error_response(event)

    def _error_response(
        self, event: Request | ProduceFrame, code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    ):
        """The answer to a request whose handler raised (``code`` in every error field;
        None: nothing is sent); the connection stays open unless even that fails."""
        try:
            return self._server.on_error(event, code)
        except Exception:
            log.exception(
                "answering the failed %s from %s failed too",
                event.api_key.api_name,
                self._conn.peer,
            )
            raise ConnectionClosed("handler failed") from None

    def _pend(self, event, pending: PendingResponse, times: RequestTimes | None) -> None:
        self.task = pending
        pending.on_complete(functools.partial(self._pending_done, event, pending, times))

    def _pending_done(self, event, pending: PendingResponse, times: RequestTimes | None, build):
        """Sends the pending response now. Runs inside whatever completed it (a purgatory
        check): it never raises, and queued requests are handled in a later callback."""
        if self.task is not pending:
            return
        self.task = None
        conn = self._conn
        if conn.closed:
            return
        if times is not None:
            times.remote_done = times.send_started = now()
        try:
            self._respond(event, build(), times)
        except (ConnectionClosed, ProtocolError) as e:
            conn.close_with_warning(getattr(e, "kind", "protocol"), "%s", e)
            return
        except Exception:
            log.exception("answering %s from %s failed", event.api_key.api_name, conn.peer)
            conn.close()
            return
        if conn.throttle_ms > 0 and self.task is None:
            self._throttle()
        if self.task is None:
            if self._queue:  # not handled inside the purgatory check that got here
                asyncio.get_running_loop().call_soon(self.process)
            else:
                self.process()  # reading and the memory pool's count only

    def _start(self, coro) -> None:
        self.task = asyncio.get_running_loop().create_task(coro)
        self.task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.task = None
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, (ConnectionClosed, ProtocolError, ConnectionError)):
                log.error("closing %s: %s", self._conn.peer, exc, exc_info=exc)
            self._conn.close()
            return
        self.process()

    async def _handle_off_loop(self, large: LargeRequestFrame, times: RequestTimes | None) -> None:
        """A large request: decoded on a worker thread, handled here, its answer encoded
        on a worker thread."""
        try:
            event = await asyncio.to_thread(decode_request, large.frame)
        except (MalformedMessageError, ProtocolError) as e:
            self._conn.close_with_warning("malformed", "malformed request: %s", e)
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
                "%s from %s failed",
                getattr(event.api_key, "api_name", event.api_key),
                self._conn.peer,
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
                rest = self._conn.sender.send_now(chunks)
                if rest is not None:
                    await self._conn.sender.send_with_files(rest)
            else:
                self._conn.sender.write(chunks)
        if times is not None:
            self._completed(event, times)
        if self._conn.throttle_ms > 0:
            self._throttle()

    def _throttle(self) -> None:
        """Mutes the connection for its ``throttle_ms`` (the response is on its way)."""
        conn = self._conn
        delay_s, conn.throttle_ms = conn.throttle_ms / 1000, 0
        if self._throttled is not None or conn.closed:
            return
        self._throttled = asyncio.get_running_loop().call_later(delay_s, self._unthrottle)
        conn.reader.update_reading(True)

    def _unthrottle(self) -> None:
        self._throttled = None
        self.process()

    def _encode(
        self, event: Request | ProduceFrame | UnsupportedRequest, response: Message | bytes | list
    ) -> list:
        if type(response) is bytes:
            return [response]
        if type(response) is list:  # chunks encoded by the handler
            return response
        version = (
            event.api_version
            if isinstance(event, (Request, ProduceFrame, FollowerFetchFrame))
            else 0
        )
        return encode_response_chunks(event.correlation_id, response.API_KEY, version, response)

    def _respond(
        self,
        event: Request | ProduceFrame | UnsupportedRequest,
        response: Message | bytes | list,
        times: RequestTimes | None,
    ) -> None:
        chunks = self._encode(event, response)
        if any(isinstance(c, DeferredRecords) for c in chunks):
            rest = self._conn.sender.send_now(chunks)
            if rest is not None:
                self._start(self._send_with_files(rest, event, times))
                return
        else:
            self._conn.sender.write(chunks)
        if times is not None:
            self._completed(event, times)

    async def _send_with_files(
        self,
        chunks: list,
        event: Request | ProduceFrame | UnsupportedRequest,
        times: RequestTimes | None,
    ) -> None:
        await self._conn.sender.send_with_files(chunks)
        if times is not None:
            self._completed(event, times)
        if self._conn.throttle_ms > 0:
            self._throttle()

    def _completed(
        self, event: Request | ProduceFrame | UnsupportedRequest, times: RequestTimes
    ) -> None:
        times.sent = now()
        api = event.api_key
        conn = self._conn
        log_completed(
            getattr(api, "api_name", str(api)),
            event.api_version,
            event.correlation_id,
            event.client_id,
            conn.local,
            conn.peer,
            times,
            conn.principal,
        )

    # ---- closing after a failed authentication ----

    def close_after_delay(self, chunks: list | None) -> None:
        """Reads nothing more; ``connection.failed.authentication.delay.ms`` later writes
        ``chunks`` (the failed authentication's answer, if any) and closes."""
        conn = self._conn
        delay = self._server.failed_authentication_delay_s
        self._close_after = False
        self._queue.clear()
        self.queued_bytes = 0
        conn.reader.stop()

        def send_and_close() -> None:
            self._delayed_close = None
            if conn.closed or conn.transport is None:
                return
            conn.closed = True
            if chunks is not None:
                conn.sender.write(chunks)
            conn.transport.close()  # after what is buffered is sent

        if delay <= 0:
            send_and_close()
        else:
            self._delayed_close = asyncio.get_running_loop().call_later(delay, send_and_close)
