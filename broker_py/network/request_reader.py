"""The read side of one client connection (Kafka's ``KafkaChannel`` receiving
``NetworkReceive`` frames from the ``MemoryPool``): received bytes into request frames.

- Decoding: received bytes go straight into the sans-IO decoder. A frame over
  OFFLOAD_FRAME_BYTES (but Produce and Fetch, big by nature and cheap to decode) is kept
  undecoded as a :class:`LargeRequestFrame`: a request of a million array elements costs
  seconds of pure-Python codec work, so it is decoded, and its answer encoded, on a
  worker thread while the event loop serves every other connection.
- Size limits: a frame over ``socket.request.max.bytes`` is refused (ProtocolError)
  before its body is read; on a SASL listener the limit is Kafka's
  ``sasl.server.max.receive.size`` until the client has authenticated.
- Memory: the bytes the connection holds before handling (the decoder's buffer plus the
  requests read and queued) are counted against ``queued.max.request.bytes`` over every
  connection (``request_memory_pool``); the reader is the pool's holder.
- Back-pressure: reading stops while the connection is muted (``request_channel``),
  while the pool holds it back, or for good once a failed authentication is answered;
  the socket stays registered for reading otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import Request, RequestDecoder, UnsupportedRequest, decode_request
from logstore.protocol.produce_frame import ProduceFrame

if TYPE_CHECKING:
    from broker_py.network.socket_server import ClientConnection

SASL_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size
OFFLOAD_FRAME_BYTES = 256 << 10
_DECODED_ON_LOOP = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})


class LargeRequestFrame:
    """A request frame over OFFLOAD_FRAME_BYTES, queued undecoded (decoded off the loop)."""

    __slots__ = ("frame", "size")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.size = len(frame)


QueuedRequest = Request | ProduceFrame | UnsupportedRequest | LargeRequestFrame


class RequestReader:
    def __init__(self, conn: ClientConnection, max_request_size: int, sasl: bool) -> None:
        self._conn = conn
        self._max_request_size = max_request_size
        limit = max_request_size if not sasl else min(max_request_size, SASL_MAX_RECEIVE_SIZE)
        self.decoder = RequestDecoder(max_request_size=limit)
        self.held = 0  # request bytes counted in the memory pool
        self._memory_paused = False
        self._reading_paused = False
        self._stopped = False

    def read_requests(
        self, enqueue: Callable[[QueuedRequest, float], None], received: float
    ) -> None:
        """Passes each complete request received to ``enqueue``, with ``received`` (a
        large one undecoded). MalformedMessageError or ProtocolError for a frame that
        cannot be a request."""
        decoder = self.decoder
        while (frame := decoder.next_request_frame()) is not None:
            if (
                len(frame) > OFFLOAD_FRAME_BYTES
                and int.from_bytes(frame[:2], "big", signed=True) not in _DECODED_ON_LOOP
            ):
                enqueue(LargeRequestFrame(frame), received)
            else:
                enqueue(decode_request(frame), received)

    def authenticated(self) -> None:
        """The client authenticated: frames up to ``socket.request.max.bytes`` from now."""
        self.decoder.max_request_size = self._max_request_size

    # ---- memory ----

    def account(self, queued_bytes: int) -> None:
        """Tells the memory pool what the connection holds now: the decoder's buffer and
        ``queued_bytes`` of requests read and not yet handled."""
        conn = self._conn
        if not conn.closed:
            conn.server.memory_pool.update(self, self.decoder.buffered + queued_bytes)

    def pause_for_memory(self) -> None:
        self._memory_paused = True
        self.update_reading(self._conn.channel.muted)

    def resume_for_memory(self) -> None:
        self._memory_paused = False
        self.update_reading(self._conn.channel.muted)

    # ---- back-pressure ----

    def stop(self) -> None:
        """Reads nothing more, for good (the connection is about to close)."""
        conn = self._conn
        if conn.transport is None or conn.closed:
            return
        self._stopped = True
        self.update_reading(conn.channel.muted)

    def update_reading(self, muted: bool) -> None:
        """Stops reading while the connection is ``muted``, the memory pool holds it back
        or it is stopped; reads again once none of these holds."""
        conn = self._conn
        if conn.transport is None or conn.closed:
            return
        busy = muted or self._memory_paused or self._stopped
        if busy and not self._reading_paused:
            conn.transport.pause_reading()
            self._reading_paused = True
        elif not busy and self._reading_paused:
            conn.transport.resume_reading()
            self._reading_paused = False
