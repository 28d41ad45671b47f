"""Sans-IO connection codec: request frames in, response frames out.

Every Kafka message travels in a frame: an int32 size (the number of bytes
that follow), then a header, then the body.  The broker side feeds received
bytes to a :class:`RequestDecoder` and pulls events from it, in the manner
of h11::

    decoder = RequestDecoder(max_request_size=config.socket_request_max_bytes)
    decoder.receive_data(data)
    while (event := decoder.next_request()) is not None:
        if isinstance(event, Request):
            response = handle(event.body)
            transport.write(encode_response(
                event.correlation_id, event.api_key, event.api_version, response))
        else:  # UnsupportedRequest
            ...

``next_request`` returns ``None`` when it needs more bytes.  A frame whose
size is negative, too small for a request header, or larger than
``max_request_size`` raises :class:`FrameTooLargeError` /
:class:`CorruptFrameError` as soon as its 4-byte size is seen, before its
body is buffered; the stream is then out of sync and the decoder keeps
raising the same error.  A body that does not parse raises
:class:`MalformedMessageError` carrying the header's api key, version and
correlation id; its frame has been consumed, so decoding may go on.

A Produce request in the common shape comes out as a :class:`ProduceFrame`,
read in place by the storage engine's codec, rather than a :class:`Request`
(``produce_frame``); a follower's sessionless Fetch (v12+) as a
:class:`FollowerFetchFrame` (``follower_fetch_frame``).

A request for an api key we do not serve, or a version outside our range,
is not an error but an :class:`UnsupportedRequest` event, which keeps the
header so the broker can answer.  For ApiVersions Kafka's rule is: answer
in the v0 body (header v0) with error 35 (UNSUPPORTED_VERSION) and our
ranges, so the client retries at a version we list::

    encode_response(event.correlation_id, ApiKey.API_VERSIONS, 0,
                    api_versions_response(error_code=ErrorCode.UNSUPPORTED_VERSION))

Fetch responses and sendfile
----------------------------

:func:`encode_response_chunks` encodes a response whose records fields may
hold :class:`~logstore.protocol.types.DeferredRecords` instead of bytes.
For each, the encoder writes the field's length prefix and leaves the
``DeferredRecords`` object in the returned list where the record bytes go.
The size prefix at the start counts the deferred lengths.  The network
layer writes the byte chunks and, for each placeholder, sends exactly
``length`` bytes from its ``source`` (a segment file range) with
``sendfile(2)``; no record bytes pass through Python::

    for chunk in encode_response_chunks(corr_id, ApiKey.FETCH, 12, response):
        if isinstance(chunk, DeferredRecords):
            await send_file_range(chunk.source, chunk.length)
        else:
            transport.write(chunk)

The client side (:func:`encode_request`, :class:`FrameDecoder`,
:func:`decode_response`) serves broker-to-broker calls and tests.
"""

from __future__ import annotations

import dataclasses
import struct
import threading

from logstore._native import FrameBuffer
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import (
    CorruptFrameError,
    EncodeError,
    FrameTooLargeError,
    MalformedMessageError,
    ProtocolError,
    UnsupportedApiVersionError,
)
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame, parse_follower_fetch_frame
from logstore.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    read_client_id,
    read_request_header,
    read_response_header,
    write_request_header,
    write_response_header,
)
from logstore.protocol.messages import request_class, response_class
from logstore.protocol.produce_frame import ProduceFrame, parse_produce_frame
from logstore.protocol.schema import Message
from logstore.protocol.types import DeferredRecords, Reader, Writer

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "FrameDecoder",
    "Request",
    "RequestDecoder",
    "UnsupportedRequest",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "splice_records",
]

DEFAULT_MAX_REQUEST_SIZE = 104857600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

# api_key int16 + api_version int16 + correlation_id int32
_HEADER_PREFIX = 8
_SIZE = struct.Struct(">i")
# A frame this large is read into a buffer of its own (FrameDecoder).
DIRECT_FRAME_BYTES = 64 << 10
# The spare buffer reads land in outside such a frame (asyncio reads 256 KiB at a time).
READ_BYTES = 256 << 10
_SPARE = threading.local()
_PREFIX = struct.Struct(">hhi")
_ERROR_CODE = struct.Struct(">h")
# A follower's Fetch from this version on is read by the engine (follower_fetch_frame).
FOLLOWER_FETCH_MIN_VERSION = 12


@dataclasses.dataclass(slots=True)
class Request:
    """A decoded request: its header, its body, and the frame size."""

    header: RequestHeader
    body: Message
    size: int

    @property
    def api_key(self) -> ApiKey:
        return ApiKey(self.header.api_key)  # type: ignore[call-arg]  # value lookup (mypy#10573)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


@dataclasses.dataclass(slots=True)
class UnsupportedRequest:
    """A request whose api key or version we do not serve.

    ``header.client_id`` is ``None`` if it could not be read.  ``known_api``
    tells an unknown api key from a known api key at an unsupported version.
    For a known api key, ``nearest_version`` is the version the codec serves
    closest to the one asked, and ``body`` the body read at that version
    (``None`` when it does not parse that way), so the broker can answer
    with an error response that names the request's topics or groups.
    """

    header: RequestHeader
    size: int
    known_api: bool
    nearest_version: int | None = None
    body: Message | None = None

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class FrameDecoder:
    """Splits a byte stream into frames (the bytes after each size prefix).

    A declared size outside ``min_size..max_size`` raises at once, before
    the body is buffered, and leaves the decoder failed: every later call
    raises the same error.

    Bytes come in by :meth:`receive_data`, or are read straight into the buffer
    :meth:`get_buffer` lends (then :meth:`buffer_updated`), as an
    ``asyncio.BufferedProtocol`` reads. A frame of at least ``DIRECT_FRAME_BYTES`` of
    which a quarter has arrived gets a :class:`logstore.FrameBuffer` of its size, the
    ``bytes`` object it becomes: the rest of it is read into that in place, not
    copied in user space (bytes that went through the spare buffer are copied twice).
    A frame's buffer is at most four times what arrived of it, and :attr:`buffered`
    counts the whole buffer.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_REQUEST_SIZE, min_size: int = 0):
        self.max_size = max_size
        self.min_size = min_size
        self._buf = bytearray()
        self._error: ProtocolError | None = None
        # A large frame being read into its own buffer; the bytes in _buf, if any, come
        # after it.
        self._frame: FrameBuffer | None = None
        self._lent: memoryview | None = None  # the frame's tail get_buffer lent last

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        frame = self._frame
        if frame is None:
            self._buf += data
            return
        take = frame.write(data)
        if take < len(data):
            self._buf += memoryview(data)[take:]

    def get_buffer(self) -> memoryview:
        """Where the next bytes read should go (never empty; then :meth:`buffer_updated`
        on the same thread): the rest of a large frame's buffer, else the thread's spare
        buffer of READ_BYTES, shared by every decoder, whose bytes buffer_updated copies
        out."""
        if self._lent is not None:  # the last read failed: lend it afresh
            self._lent.release()
            self._lent = None
        frame = self._frame
        if frame is not None and frame.filled < len(frame) and not self._buf:
            self._lent = memoryview(frame)
            return self._lent
        spare: bytearray | None = getattr(_SPARE, "buf", None)
        if spare is None:
            spare = _SPARE.buf = bytearray(READ_BYTES)
        return memoryview(spare)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the buffer :meth:`get_buffer` lent last."""
        lent = self._lent
        if lent is not None:
            lent.release()  # the reader is done with it; the frame can be taken
            self._lent = None
            assert self._frame is not None
            self._frame.advance(nbytes)
            return
        with memoryview(_SPARE.buf) as view:
            self.receive_data(view[:nbytes])

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames, and the rest of a large frame's
        buffer."""
        return len(self._buf) + (len(self._frame) if self._frame is not None else 0)

    def next_frame(self, min_size: int | None = None) -> bytes | None:
        """The next complete frame, or ``None`` if more bytes are needed; ``min_size``
        overrides the decoder's minimum for this frame."""
        if self._error is not None:
            raise self._error
        if self._frame is not None:
            if self._frame.filled < len(self._frame):
                return None
            done, self._frame = self._frame.take(), None
            return done
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        least = self.min_size if min_size is None else min_size
        if size > self.max_size:
            self._error = FrameTooLargeError(size, self.max_size)
        elif size < least:
            self._error = CorruptFrameError(
                f"frame size {size} is below the minimum of {least} bytes"
            )
        if self._error is not None:
            raise self._error
        end = 4 + size
        if len(buf) < end:
            if size >= DIRECT_FRAME_BYTES and len(buf) - 4 >= size >> 2:
                self._frame = FrameBuffer(size)
                self._frame.write(memoryview(buf)[4:])
                buf.clear()
            return None
        with memoryview(buf) as view:
            frame = bytes(view[4:end])  # one copy; the view is released before the del
        del buf[:end]
        return frame


class RequestDecoder:
    """Turns received bytes into :class:`Request` / :class:`UnsupportedRequest` events."""

    def __init__(self, max_request_size: int = DEFAULT_MAX_REQUEST_SIZE):
        # The smallest request holds the header prefix and a client id length.
        self._frames = FrameDecoder(max_request_size, _HEADER_PREFIX + 2)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive_data(data)

    def get_buffer(self) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)

    @property
    def buffered(self) -> int:
        return self._frames.buffered

    @property
    def max_request_size(self) -> int:
        return self._frames.max_size

    @max_request_size.setter
    def max_request_size(self, size: int) -> None:
        self._frames.max_size = size

    def next_raw_frame(self) -> bytes | None:
        """The next frame as bare bytes, not a request (SASL tokens after a v0
        SaslHandshake travel so); ``None`` if more bytes are needed."""
        return self._frames.next_frame(min_size=0)

    def next_request_frame(self) -> bytes | None:
        """The next request frame, not yet decoded (:func:`decode_request`); ``None``
        if more bytes are needed."""
        return self._frames.next_frame()

    def next_request(
        self,
    ) -> Request | ProduceFrame | FollowerFetchFrame | UnsupportedRequest | None:
        frame = self._frames.next_frame()
        if frame is None:
            return None
        return decode_request(frame)


def decode_request(
    frame: bytes,
) -> Request | ProduceFrame | FollowerFetchFrame | UnsupportedRequest:
    """Decode one request frame (without its size prefix); a Produce request in the
    common shape is a :class:`ProduceFrame` (see ``produce_frame``), a follower's
    sessionless Fetch a :class:`FollowerFetchFrame` (``follower_fetch_frame``)."""
    if len(frame) < _HEADER_PREFIX:
        raise CorruptFrameError(f"request frame of {len(frame)} bytes has no room for a header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
    key = ApiKey.lookup(api_key)
    if key is None or not key.supports(api_version):
        return _unsupported(frame, key, api_key, api_version, correlation_id)
    if key is ApiKey.PRODUCE:
        produce = parse_produce_frame(frame)
        if produce is not None:
            return produce
    elif key is ApiKey.FETCH and api_version >= FOLLOWER_FETCH_MIN_VERSION:
        fetch = parse_follower_fetch_frame(frame)
        if fetch is not None:
            return fetch
    return read_request(frame, key)


def _unsupported(
    frame: bytes, key: ApiKey | None, api_key: int, api_version: int, correlation_id: int
) -> UnsupportedRequest:
    header = RequestHeader(api_key=api_key, api_version=api_version, correlation_id=correlation_id)
    r = Reader(frame, _HEADER_PREFIX)
    try:
        header.client_id = read_client_id(r)
    except ProtocolError:
        pass
    if key is None:
        return UnsupportedRequest(header, len(frame), known_api=False)
    nearest = min(max(api_version, key.min_version), key.max_version)
    body = None
    if key.is_flexible(nearest) == key.is_flexible(api_version) and r.pos > _HEADER_PREFIX:
        try:
            if key.is_flexible(nearest):
                r.tagged_fields()  # the request header's
            body = request_class(key).read(r, nearest)
        except ProtocolError:
            body = None
    return UnsupportedRequest(
        header, len(frame), known_api=True, nearest_version=nearest, body=body
    )


def read_request(frame: bytes, key: ApiKey) -> Request:
    """Decode one request frame of a served api key and version with the schema codec."""
    api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
    r = Reader(frame)
    try:
        header = read_request_header(r, key.request_header_version(api_version))
        body = request_class(key).read(r, api_version)
    except MalformedMessageError as exc:
        exc.api_key, exc.api_version, exc.correlation_id = api_key, api_version, correlation_id
        raise
    return Request(header, body, len(frame))


def _frame_chunks(w: Writer) -> list[bytearray | DeferredRecords]:
    """Patch the size prefix reserved at the start of ``w``; return the chunks."""
    chunks = w.getchunks()
    head = chunks[0]
    assert isinstance(head, bytearray)  # the size prefix opens the first byte chunk
    total = sum(len(c) for c in chunks) - 4
    _SIZE.pack_into(head, 0, total)
    return chunks


def _start_frame() -> Writer:
    w = Writer()
    w.buf += b"\0\0\0\0"
    return w


def encode_response_chunks(
    correlation_id: int, api_key: ApiKey, api_version: int, body: Message
) -> list[bytearray | DeferredRecords]:
    """A whole response frame (size prefix, header, body) as chunks.

    Byte chunks and :class:`DeferredRecords` placeholders alternate in wire
    order; see the module docstring.
    """
    if body.API_KEY is not api_key or body.KIND != "response":
        raise EncodeError(f"{type(body).__name__} is not a {api_key.api_name} response")
    if api_key is ApiKey.API_VERSIONS and body.error_code != 0:
        # Clients read an ApiVersions error response as v0 (see messages.api_versions).
        api_version = 0
    w = _start_frame()
    write_response_header(
        w,
        ResponseHeader(correlation_id=correlation_id),
        api_key.response_header_version(api_version),
    )
    body.write(w, api_version)
    chunks = _frame_chunks(w)
    if sum(len(c) for c in chunks) - 4 > 0x7FFFFFFF:
        raise EncodeError("response frame exceeds the int32 size limit")
    return chunks


def splice_records(
    head: bytes, records_at: list[int], records: list[DeferredRecords]
) -> list[memoryview | DeferredRecords]:
    """A frame encoded without its records' bytes (``head``, e.g. by
    ``logstore.encode_fetch_response``) as chunks, each of ``records`` placed at its
    offset in ``records_at``."""
    if len(records_at) != len(records):
        raise EncodeError(f"{len(records)} records for {len(records_at)} places")
    view = memoryview(head)
    chunks: list[memoryview | DeferredRecords] = []
    start = 0
    for at, rec in zip(records_at, records):
        chunks.append(view[start:at])
        chunks.append(rec)
        start = at
    chunks.append(view[start:])
    return chunks


def encode_response(correlation_id: int, api_key: ApiKey, api_version: int, body: Message) -> bytes:
    """A whole response frame (size prefix, header, body) as bytes.

    The header version follows the api key and version (always v0 for
    ApiVersions, whose error responses also use the v0 body).  Raises
    :class:`EncodeError` if ``body`` holds :class:`DeferredRecords`.
    """
    chunks = encode_response_chunks(correlation_id, api_key, api_version, body)
    if len(chunks) != 1 or isinstance(chunks[0], DeferredRecords):
        raise EncodeError("response holds deferred records; use encode_response_chunks")
    return bytes(chunks[0])


def encode_request(header: RequestHeader, body: Message) -> bytes:
    """A whole request frame; the body is written at ``header.api_version``."""
    key = ApiKey(header.api_key)  # type: ignore[call-arg]  # value lookup (mypy#10573)
    if body.API_KEY is not key or body.KIND != "request":
        raise EncodeError(f"{type(body).__name__} is not a {key.api_name} request")
    w = _start_frame()
    try:
        write_request_header(w, header, key.request_header_version(header.api_version))
    except struct.error as exc:
        raise EncodeError(f"request header: {exc}") from None
    body.write(w, header.api_version)
    head = _frame_chunks(w)[0]
    assert isinstance(head, bytearray)  # as in _frame_chunks
    return bytes(head)


def decode_response(frame: bytes, api_key: ApiKey, api_version: int) -> tuple[int, Message]:
    """Decode a response frame (without its size prefix): ``(correlation_id, body)``.

    The caller knows ``api_key`` and ``api_version`` from the request it
    sent with that correlation id.  The mirror of :func:`encode_response`'s
    ApiVersions rule applies: an ApiVersions response whose ``error_code``
    (the int16 after the v0 header, at every version) is not 0 is read as
    the v0 body, so a client that asked at a version the broker does not
    serve still gets the broker's ranges and can retry lower.
    """
    if not api_key.supports(api_version):
        raise UnsupportedApiVersionError(int(api_key), api_version)
    r = Reader(frame)
    header = read_response_header(r, api_key.response_header_version(api_version))
    if api_key is ApiKey.API_VERSIONS and len(frame) >= r.pos + 2:
        (error_code,) = _ERROR_CODE.unpack_from(frame, r.pos)
        if error_code != 0:
            api_version = 0
    return header.correlation_id, response_class(api_key).read(r, api_version)
