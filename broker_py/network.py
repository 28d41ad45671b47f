"""The socket layer: the only module that reads from or writes to client sockets.

Per connection, requests are handled one at a time in arrival order and answered in
that order, as Kafka's own network layer does; clients may pipeline requests and the
bytes of later ones are buffered meanwhile (within ``socket.request.max.bytes`` each).

A response is a list of chunks from :func:`encode_response_chunks`: byte strings
are written with ``sock_sendall``, and each :class:`DeferredRecords` placeholder (fetch
records) is sent from its segment file with ``sendfile(2)`` by the storage engine, so
record bytes never pass through Python objects. Sockets are non-blocking: a partial
send resumes when the socket is writable again.

A frame over ``socket.request.max.bytes`` is refused before its body is read, and a
frame that does not decode closes that one connection; every other connection goes on.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable

import logstore

from broker_py.protocol.errors import MalformedMessageError, ProtocolError
from broker_py.protocol.frame import Request, RequestDecoder, UnsupportedRequest, encode_response_chunks
from broker_py.protocol.schema import Message
from broker_py.protocol.types import DeferredRecords

log = logging.getLogger(__name__)

RECV_SIZE = 256 * 1024

Handler = Callable[[Request, "ClientConnection"], Awaitable[Message | None]]
UnsupportedHandler = Callable[[UnsupportedRequest], Message | None]


class ConnectionClosed(Exception):
    """The peer went away or the connection was closed for a protocol violation."""


class ClientConnection:
    def __init__(self, sock: socket.socket, peer: str, server: KafkaServer) -> None:
        self.sock = sock
        self.peer = peer
        self.server = server
        self.decoder = RequestDecoder(max_request_size=server.max_request_size)
        self.client_id: str | None = None
        self.client_software: str | None = None
        self._loop = asyncio.get_running_loop()

    async def serve(self) -> None:
        try:
            while True:
                data = await self._loop.sock_recv(self.sock, RECV_SIZE)
                if not data:
                    return
                self.decoder.receive_data(data)
                while True:
                    event = self.decoder.next_request()
                    if event is None:
                        break
                    await self._handle(event)
        except MalformedMessageError as e:
            log.warning("closing %s: malformed %s request: %s", self.peer, e.api_key, e)
        except ProtocolError as e:
            log.warning("closing %s: %s", self.peer, e)
        except (ConnectionClosed, ConnectionError, TimeoutError):
            pass
        except OSError as e:
            if e.errno not in (errno.EBADF, errno.ENOTCONN, errno.EPIPE):
                log.warning("closing %s: %s", self.peer, e)
        finally:
            self.close()

    async def _handle(self, event: Request | UnsupportedRequest) -> None:
        if isinstance(event, UnsupportedRequest):
            response = self.server.on_unsupported(event)
            if response is None:
                raise ConnectionClosed(f"unsupported api key {event.api_key} v{event.api_version}")
            await self.send(event.correlation_id, response.API_KEY, 0, response)
            return
        self.client_id = event.header.client_id
        handler = self.server.handlers.get(event.api_key)
        if handler is None:
            raise ConnectionClosed(f"no handler for {event.api_key.api_name}")
        try:
            response = await handler(event, self)
        except (ConnectionClosed, ProtocolError):
            raise
        except Exception:
            log.exception("%s v%d from %s failed", event.api_key.api_name, event.api_version, self.peer)
            raise ConnectionClosed("handler failed") from None
        if response is not None:
            await self.send(event.correlation_id, event.api_key, event.api_version, response)

    async def send(self, correlation_id: int, api_key, api_version: int, response: Message) -> None:
        chunks = encode_response_chunks(correlation_id, api_key, api_version, response)
        pending: list[bytes | bytearray] = []
        for chunk in chunks:
            if isinstance(chunk, DeferredRecords):
                if pending:
                    await self._loop.sock_sendall(self.sock, b"".join(pending))
                    pending.clear()
                if chunk.length:
                    await self._sendfile(chunk.source, chunk.length)
            else:
                pending.append(chunk)
        if pending:
            await self._loop.sock_sendall(self.sock, pending[0] if len(pending) == 1 else b"".join(pending))

    async def _sendfile(self, source: logstore.FileSlice, length: int) -> None:
        fd = self.sock.fileno()
        sent = 0
        while sent < length:
            try:
                n = source.sendfile(fd, sent, length - sent)
            except BlockingIOError:
                await self._writable(fd)
                continue
            if n == 0:
                # The segment file shrank under the slice (truncation): the frame can no
                # longer be completed, so the connection must go.
                raise ConnectionClosed("segment truncated during a fetch")
            sent += n

    def _writable(self, fd: int) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self._loop.create_future()

        def ready() -> None:
            self._loop.remove_writer(fd)
            if not fut.done():
                fut.set_result(None)

        self._loop.add_writer(fd, ready)
        fut.add_done_callback(lambda _: self._loop.remove_writer(fd))
        return fut

    def close(self) -> None:
        self.server.connections.discard(self)
        try:
            self.sock.close()
        except OSError:
            pass


class KafkaServer:
    """Accepts connections on one listener and runs a :class:`ClientConnection` each."""

    def __init__(
        self,
        host: str,
        port: int,
        handlers: dict,
        on_unsupported: UnsupportedHandler,
        max_request_size: int,
    ) -> None:
        self.host = host
        self.port = port
        self.handlers = handlers
        self.on_unsupported = on_unsupported
        self.max_request_size = max_request_size
        self.connections: set[ClientConnection] = set()
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(1024)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self._accept_task = asyncio.create_task(self._accept_loop(), name="kafka-accept")

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            try:
                sock, addr = await loop.sock_accept(self._listener)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    log.error("accept: %s; backing off", e)
                    await asyncio.sleep(0.1)
                    continue
                raise
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = ClientConnection(sock, f"{addr[0]}:{addr[1]}", self)
            self.connections.add(conn)
            task = asyncio.create_task(conn.serve(), name=f"conn-{addr[0]}:{addr[1]}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        if self._accept_task is not None:
            self._accept_task.cancel()
            try:
                await self._accept_task
            except (asyncio.CancelledError, OSError):
                pass
        if self._listener is not None:
            self._listener.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
