"""A request frame read by the storage engine's codec in one call (``produce_frame``,
``follower_fetch_frame``).

Such a frame keeps its bytes and the header's fields, and reads as a
:class:`~logstore.protocol.frame.Request` does: ``header``, ``size``, and ``body``
decoded on demand by the generic schema codec for code that wants a message.
"""

from __future__ import annotations

from typing import ClassVar

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.headers import RequestHeader
from logstore.protocol.schema import Message


class EngineFrame:
    """The header's fields and the frame; subclasses name their ``api_key`` and add the
    fields the engine's codec read from the body."""

    __slots__ = ("api_version", "client_id", "correlation_id", "frame")

    api_key: ClassVar[ApiKey]
    frame: bytes
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def size(self) -> int:
        return len(self.frame)

    @property
    def header(self) -> RequestHeader:
        return RequestHeader(
            api_key=int(self.api_key),
            api_version=self.api_version,
            correlation_id=self.correlation_id,
            client_id=self.client_id,
        )

    @property
    def body(self) -> Message:
        """The request as a message, decoded by the schema codec."""
        from logstore.protocol.frame import read_request

        return read_request(self.frame, self.api_key).body
