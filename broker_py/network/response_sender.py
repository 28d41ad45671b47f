"""The write side of one client connection (Kafka's ``Selector`` sending a ``Send``):
response frames onto the socket.

An encoded response is a list of chunks: bytes, and for Fetch :class:`DeferredRecords`
placeholders holding a segment ``FileSlice``. Bytes go to the transport's buffer. A
segment range is sent from the segment file to the socket with ``sendfile(2)`` once the
transport's buffer has drained (so the frame's bytes stay in order), resuming on EAGAIN
when the socket is writable again. A response is first sent at once, as far as the
socket takes it (:meth:`ResponseSender.send_now`): a slice under ``SMALL_SLICE`` bytes is
read and joined to the frame's other bytes, one ``send`` for the whole frame; a larger
one goes by ``sendfile`` after the bytes before it (sent with ``MSG_MORE``), so its
record bytes never pass through Python objects. On a
TLS listener (SSL, SASL_SSL) the records are read and written through the transport to
be encrypted, waiting whenever it holds more than its high-water mark.

The transport's buffer is bounded by WRITE_HIGH_WATER: over it the transport pauses
writing (``write_paused``), which mutes the connection until it drains to
WRITE_LOW_WATER, so a client that does not read cannot grow the broker's memory.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import TYPE_CHECKING

import logstore
from logstore.protocol.types import DeferredRecords

if TYPE_CHECKING:
    from broker_py.network.socket_server import ClientConnection

WRITE_HIGH_WATER = 4 << 20
WRITE_LOW_WATER = 1 << 20
# Record slices shorter than this are read and sent with the frame's bytes in one write.
SMALL_SLICE = 64 << 10


class ConnectionClosed(Exception):
    """The connection is being closed for a protocol violation or a failed handler;
    ``kind`` is the rate-limited warning's kind that says so."""

    def __init__(self, message: str, kind: str = "protocol") -> None:
        super().__init__(message)
        self.kind = kind


class ResponseSender:
    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn
        self.write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._send_fd: int | None = None  # a duplicate of the socket's, for sendfile
        self._send_sock: socket.socket | None = None  # over _send_fd, for send_now

    def attach(self, transport: asyncio.Transport) -> None:
        """The connection is made: :meth:`write_frame` is the transport's own write."""
        self.write_frame = transport.write

    # ---- the transport's flow control ----

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def connection_lost(self, task: asyncio.Task[None] | None) -> None:
        """Lets go of the sendfile descriptor (once ``task``, a cancelled send that may
        still have it registered, is done) and of a wait for the buffer to drain."""
        if self._send_sock is not None:
            self._send_sock.detach()  # the descriptor is _send_fd, closed below
            self._send_sock = None
        if self._send_fd is not None:
            if task is None:
                os.close(self._send_fd)
            else:
                fd = self._send_fd
                task.add_done_callback(lambda _: os.close(fd))
            self._send_fd = None
        if self._drained is not None and not self._drained.done():
            self._drained.cancel()

    # ---- writes ----

    def write_frame(self, frame: bytes) -> None:
        """Writes one encoded frame (replaced by the transport's write on :meth:`attach`)."""
        assert self._conn.transport is not None
        self._conn.transport.write(frame)

    def write(self, chunks: list) -> None:
        assert self._conn.transport is not None
        self._conn.transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def send_now(self, chunks: list) -> list | None:
        """Sends chunks with DeferredRecords among them as far as the socket takes them
        now, without waiting: None when all went, else the chunks still to send (for
        :meth:`send_with_files`; a partly sent DeferredRecords comes back as a
        ``_Rest``). Only on a plaintext listener whose transport holds nothing.

        The frame goes out in as few writes as it can: the records of a slice under
        ``SMALL_SLICE`` bytes are read and joined to the bytes around them (one
        ``send``), and a larger slice goes by ``sendfile`` after the bytes before it
        were sent with ``MSG_MORE``, so header and records leave in one TCP segment
        where they fit (the receiver is woken once, not twice)."""
        conn = self._conn
        transport = conn.transport
        if (
            conn.server.ssl_context is not None
            or transport is None
            or transport.get_write_buffer_size()
        ):
            return chunks
        sock = self._send_socket()
        pending: list = []
        n = len(chunks)
        i = 0
        while i < n:
            chunk = chunks[i]
            if type(chunk) is not DeferredRecords:
                pending.append(chunk)
                i += 1
                continue
            if chunk.length < SMALL_SLICE:
                if chunk.length:
                    try:
                        pending.append(chunk.source.read()[: chunk.length])
                    except (OSError, logstore.LogStoreError):
                        raise ConnectionClosed("segment truncated during a fetch") from None
                i += 1
                continue
            if pending:
                left = _send_some(sock, pending, socket.MSG_MORE)
                if left is not None:
                    return [left, *chunks[i:]]
                pending = []
            sent = _sendfile_some(chunk.source, sock.fileno(), 0, chunk.length)
            if sent < chunk.length:
                return [_Rest(chunk.source, sent, chunk.length), *chunks[i + 1 :]]
            i += 1
        if pending:
            left = _send_some(sock, pending, 0)
            if left is not None:
                return [left]
        return None

    async def send_with_files(self, chunks: list) -> None:
        """Sends chunks with DeferredRecords (or a ``_Rest`` of one) among them, in order."""
        pending: list[bytes | bytearray] = []
        for chunk in chunks:
            if type(chunk) is _Rest:
                if pending:
                    self.write(pending)
                    pending = []
                await self._drain()
                await self._sendfile(chunk.source, chunk.length, chunk.start)
                continue
            if isinstance(chunk, DeferredRecords) and self._conn.server.ssl_context is not None:
                # TLS encrypts in user space: the records pass through the transport.
                data = chunk.source.read() if chunk.length else b""
                if len(data) < chunk.length:
                    raise ConnectionClosed("segment truncated during a fetch")
                pending.append(data[: chunk.length])
                if sum(len(p) for p in pending) >= WRITE_LOW_WATER:
                    self.write(pending)
                    pending = []
                    await self._drain_tls()
            elif isinstance(chunk, DeferredRecords):
                if pending:
                    self.write(pending)
                    pending = []
                if chunk.length:
                    await self._drain()
                    await self._sendfile(chunk.source, chunk.length)
            else:
                pending.append(chunk)
        if pending:
            self.write(pending)

    async def _drain_tls(self) -> None:
        """Waits while the transport holds more than its high-water mark."""
        if self.write_paused:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await self._drained
            finally:
                self._drained = None

    async def _drain(self) -> None:
        """Waits until the transport's buffer is empty (sendfile writes around it)."""
        transport = self._conn.transport
        assert transport is not None
        if transport.get_write_buffer_size() == 0:
            return
        self._drained = asyncio.get_running_loop().create_future()
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            if transport.get_write_buffer_size() > 0:
                await self._drained
        finally:
            self._drained = None
            if not self._conn.closed:
                transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)

    def _sendfile_fd(self) -> int:
        """A duplicate of the socket's descriptor: the event loop refuses to watch the
        transport's own descriptor for writability, but the duplicate (same socket) may
        be watched while the transport's buffer is empty and it does not write."""
        if self._send_fd is None:
            transport = self._conn.transport
            assert transport is not None
            sock = transport.get_extra_info("socket")
            if sock is None or self._conn.closed:
                raise ConnectionClosed("socket gone")
            self._send_fd = os.dup(sock.fileno())
        return self._send_fd

    def _send_socket(self) -> socket.socket:
        """A socket object over :meth:`_sendfile_fd`'s duplicate (it does not own it)."""
        if self._send_sock is None:
            sock = socket.socket(fileno=self._sendfile_fd())
            sock.setblocking(False)
            self._send_sock = sock
        return self._send_sock

    async def _sendfile(self, source: logstore.FileSlice, length: int, sent: int = 0) -> None:
        fd = self._sendfile_fd()
        loop = asyncio.get_running_loop()
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


class _Rest:
    """The part of a DeferredRecords slice not sent yet: bytes ``start``..``length``."""

    __slots__ = ("length", "source", "start")

    def __init__(self, source: logstore.FileSlice, start: int, length: int) -> None:
        self.source = source
        self.start = start
        self.length = length


def _send_some(sock: socket.socket, chunks: list, flags: int) -> memoryview | None:
    """Sends the chunks joined, as far as the socket takes them now: None when all went,
    else the bytes left (also on an error, which the transport then meets and closes on)."""
    data = memoryview(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:], flags)
    except OSError:  # EAGAIN, or a broken connection
        return data[sent:]
    return None


def _sendfile_some(source: logstore.FileSlice, fd: int, start: int, length: int) -> int:
    """Sends the slice's bytes ``start``..``length`` by sendfile as far as the socket
    takes them now; returns where it stopped (``length`` when all went)."""
    sent = start
    try:
        while sent < length:
            n = source.sendfile(fd, sent, length - sent)
            if n == 0:
                raise ConnectionClosed("segment truncated during a fetch")
            sent += n
    except (OSError, logstore.LogStoreError):
        pass  # EAGAIN, or a failure: the async path goes on from here (and meets the failure)
    return sent
