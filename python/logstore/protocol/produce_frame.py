"""Produce requests in their common shape, read in place by the storage engine's codec.

Produce is the broker's hottest API: at linger.ms=0 every record is its own request, so
the per-request cost bounds both the request rate and the latency under load. A frame
in the common shape (no tagged fields; see ``rust/src/produce_request.rs``) becomes a
:class:`ProduceFrame`: the version, ids and acks, and per partition the byte range of
its records in the frame, with no message objects built. Its answer is a whole response
frame from :func:`logstore.encode_produce_response`. Any other Produce frame, malformed
ones included, goes through the generic schema codec and its errors.
"""

from __future__ import annotations

import logstore
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.engine_frame import EngineFrame

# What logstore.parse_produce_request returns for a frame in the common shape:
# (api_version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics).
ParsedProduce = tuple[
    int,
    int,
    str | None,
    str | None,
    int,
    int,
    tuple[tuple[str, tuple[tuple[int, int, int, bool], ...]], ...],
]


class ProduceFrame(EngineFrame):
    """A Produce request as ranges into its frame.

    It reads as a :class:`~logstore.protocol.frame.Request` does (``header``,
    ``body``, ``size``); ``body`` is decoded on demand. ``topics`` is ``((name,
    ((partition, records_start, records_end, has_producer_id), ...)), ...)``;
    records_start is -1 for null records.
    """

    __slots__ = (
        "acks",
        "timeout_ms",
        "topics",
        "transactional_id",
    )

    api_key = ApiKey.PRODUCE

    def __init__(self, frame: bytes, parsed: ParsedProduce) -> None:
        self.frame = frame
        (
            self.api_version,
            self.correlation_id,
            self.client_id,
            self.transactional_id,
            self.acks,
            self.timeout_ms,
            self.topics,
        ) = parsed

    def records(self, start: int, end: int) -> memoryview | None:
        """The records of one partition (None when the request carries null)."""
        return None if start < 0 else memoryview(self.frame)[start:end]


def parse_produce_frame(frame: bytes) -> ProduceFrame | None:
    """The frame as a :class:`ProduceFrame`, or None to decode it with the generic codec."""
    parsed = logstore.parse_produce_request(frame)
    return None if parsed is None else ProduceFrame(frame, parsed)
