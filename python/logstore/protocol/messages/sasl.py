"""SASL: SaslHandshake (17) and SaslAuthenticate (36).

SaslHandshake picks a mechanism and lists the enabled ones.  With v0 the
SASL tokens then travel as raw size-prefixed frames outside the Kafka
protocol; with v1 each token is wrapped in a SaslAuthenticate request.
``auth_bytes`` are the mechanism's tokens, opaque to the codec.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, message
from logstore.protocol.types import BYTES, INT16, INT64, STRING

__all__ = [
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
]

SaslHandshakeRequest = message(
    ApiKey.SASL_HANDSHAKE,
    "request",
    [
        Field("mechanism", STRING, "0+"),
    ],
)

SaslHandshakeResponse = message(
    ApiKey.SASL_HANDSHAKE,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field("mechanisms", Array(STRING), "0+"),
    ],
)

SaslAuthenticateRequest = message(
    ApiKey.SASL_AUTHENTICATE,
    "request",
    [
        Field("auth_bytes", BYTES, "0+"),
    ],
)

SaslAuthenticateResponse = message(
    ApiKey.SASL_AUTHENTICATE,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+"),
        Field("auth_bytes", BYTES, "0+"),
        Field("session_lifetime_ms", INT64, "1+"),
    ],
)
