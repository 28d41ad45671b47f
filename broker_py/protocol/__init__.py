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

from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.errors import (
    CorruptFrameError,
    EncodeError,
    FrameTooLargeError,
    MalformedMessageError,
    ProtocolError,
    TruncatedMessageError,
    UnsupportedApiVersionError,
)
from broker_py.protocol.frame import (
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
from broker_py.protocol.headers import RequestHeader, ResponseHeader
from broker_py.protocol.messages import REQUESTS, RESPONSES, request_class, response_class
from broker_py.protocol.produce_frame import ProduceFrame
from broker_py.protocol.types import DeferredRecords

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
