"""Failures of the wire codec.

All derive from :class:`ProtocolError` (itself a ``BrokerError``).  The
decoder raises them when the peer breaks the protocol; after a framing
error the byte stream can no longer be trusted and the connection must be
closed.  :class:`EncodeError` is the one raised on our side: a response
object holds a value its version cannot carry.
"""

from __future__ import annotations

from broker_py.errors import BrokerError


class ProtocolError(BrokerError):
    """The wire codec could not decode or encode something."""


class CorruptFrameError(ProtocolError):
    """The size prefix or request header of a frame is unusable.

    Raised for a negative size, or for a frame too short to hold the fixed
    part of a request header (api key, api version, correlation id).
    """


class FrameTooLargeError(CorruptFrameError):
    """A frame declares more bytes than ``socket.request.max.bytes`` allows.

    Raised as soon as the 4-byte size prefix is seen, before any of the
    body is buffered.
    """

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {max_size} bytes")
        self.size = size
        self.max_size = max_size


class MalformedMessageError(ProtocolError):
    """A message (header or body) does not parse at its declared version.

    When the request header was read, ``api_key``, ``api_version`` and
    ``correlation_id`` say which request was at fault; otherwise they are
    ``None``.
    """

    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None


class TruncatedMessageError(MalformedMessageError):
    """A message ended before a field it declares was complete."""


class UnsupportedApiVersionError(ProtocolError):
    """A message was asked for at an api key or version this codec lacks."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"api key {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version


class EncodeError(ProtocolError):
    """A value cannot be written at the requested version.

    Examples: ``None`` in a field that is not nullable at that version, an
    integer outside its type's range, a string longer than int16 length
    allows, or deferred records where bytes are required.
    """
