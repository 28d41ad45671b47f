"""SASL for the election's group client: SaslHandshake v1 naming the mechanism, then the
mechanism's messages, each in a SaslAuthenticate v1 request (Kafka's KIP-152 framing).

- PLAIN (RFC 4616): one message ``NUL user NUL password``, answered with no bytes.
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, 7677), by `scramp`: client-first, then
  client-final for the server-first (whose iteration count must be at least 4096, as
  Kafka's client requires), then the server-final's signature is verified.

The credentials come from the same librdkafka configuration the registry's producer and
consumer use (`security.protocol` SASL_PLAINTEXT or SASL_SSL, `sasl.mechanism(s)`,
`sasl.username`, `sasl.password`). A refused mechanism or failed exchange is a SaslFailed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import scramp

from logstore.protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from logstore.protocol.schema import Message

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MIN_ITERATIONS = 4096

Request = Callable[[Message, float], Awaitable[Message]]


class SaslFailed(ConnectionError):
    """The broker refused the mechanism or the credentials, or the exchange went wrong."""


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str  # one of MECHANISMS
    username: str
    password: str

    def __repr__(self) -> str:
        return f"SaslCredentials({self.mechanism}, {self.username!r}, password hidden)"

    @staticmethod
    def from_client_config(conf: Mapping[str, Any]) -> SaslCredentials | None:
        """The credentials of a librdkafka configuration; None unless its protocol is SASL.
        ValueError for a mechanism this client does not speak or missing credentials."""
        protocol = str(conf.get("security.protocol") or "PLAINTEXT").upper()
        if not protocol.startswith("SASL"):
            return None
        mechanism = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI")
        mechanism = mechanism.upper()
        if mechanism not in MECHANISMS:
            raise ValueError(
                f"sasl.mechanism {mechanism}: the election client speaks {', '.join(MECHANISMS)}"
            )
        username, password = conf.get("sasl.username"), conf.get("sasl.password")
        if not username or password is None:
            raise ValueError(f"SASL {mechanism} needs sasl.username and sasl.password")
        return SaslCredentials(mechanism, str(username), str(password))


async def authenticate(request: Request, creds: SaslCredentials, timeout: float) -> None:
    """Authenticates a fresh connection (`request` sends one request and awaits its answer)."""
    hs = await request(SaslHandshakeRequest(mechanism=creds.mechanism), timeout)
    assert isinstance(hs, SaslHandshakeResponse)
    if hs.error_code != 0:
        raise SaslFailed(
            f"SASL mechanism {creds.mechanism} refused (error {hs.error_code}); "
            f"the broker enables {', '.join(hs.mechanisms)}"
        )

    async def step(token: bytes) -> bytes:
        resp = await request(SaslAuthenticateRequest(auth_bytes=token), timeout)
        assert isinstance(resp, SaslAuthenticateResponse)
        if resp.error_code != 0:
            raise SaslFailed(
                f"SASL {creds.mechanism} authentication of {creds.username!r} failed "
                f"(error {resp.error_code}): {resp.error_message or ''}"
            )
        return bytes(resp.auth_bytes)

    if creds.mechanism == "PLAIN":
        await step(f"\0{creds.username}\0{creds.password}".encode())
        return
    client = scramp.ScramClient([creds.mechanism], creds.username, creds.password)
    try:
        server_first = (await step(client.get_client_first().encode())).decode()
        attrs = dict(part.partition("=")[::2] for part in server_first.split(","))
        if int(attrs.get("i") or 0) < SCRAM_MIN_ITERATIONS:
            raise SaslFailed(f"SCRAM iteration count below {SCRAM_MIN_ITERATIONS}")
        client.set_server_first(server_first)
        server_final = (await step(client.get_client_final().encode())).decode()
        client.set_server_final(server_final)
    except (scramp.ScramException, UnicodeDecodeError, ValueError) as exc:
        raise SaslFailed(f"SCRAM exchange failed: {exc}") from None
