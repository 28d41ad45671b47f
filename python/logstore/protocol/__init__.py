"""Sans-IO Kafka wire protocol codec.

Bytes in, typed request objects out; response objects in, bytes out.  No
sockets and no asyncio here: the network layer feeds a
:class:`RequestDecoder` and writes what :func:`encode_response` /
:func:`encode_response_chunks` return.

Modules: ``types`` (primitive encodings, bounded reader), ``schema``
(declarative message schemas), ``messages`` (one module per API family),
``api_keys`` (the APIs and version ranges we advertise), ``headers``,
``frame`` (the connection codec) and ``errors``.
"""

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import (
    CorruptFrameError,
    EncodeError,
    FrameTooLargeError,
    MalformedMessageError,
    ProtocolError,
    TruncatedMessageError,
    UnsupportedApiVersionError,
)
from logstore.protocol.frame import (
    DEFAULT_MAX_REQUEST_SIZE,
    FrameDecoder,
    Request,
    RequestDecoder,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)
from logstore.protocol.headers import RequestHeader, ResponseHeader
from logstore.protocol.messages import REQUESTS, RESPONSES, request_class, response_class
from logstore.protocol.produce_frame import ProduceFrame
from logstore.protocol.types import DeferredRecords

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "REQUESTS",
    "RESPONSES",
    "ApiKey",
    "CorruptFrameError",
    "DeferredRecords",
    "EncodeError",
    "FrameDecoder",
    "FrameTooLargeError",
    "MalformedMessageError",
    "ProtocolError",
    "ProduceFrame",
    "Request",
    "RequestDecoder",
    "RequestHeader",
    "ResponseHeader",
    "TruncatedMessageError",
    "UnsupportedApiVersionError",
    "UnsupportedRequest",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "request_class",
    "response_class",
]
