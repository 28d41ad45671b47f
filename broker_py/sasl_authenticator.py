"""SASL authentication of one connection to a SASL_PLAINTEXT listener, as Kafka's
SaslServerAuthenticator runs it.

Until authentication completes a connection may send only ApiVersions, SaslHandshake
and SaslAuthenticate; anything else closes it. SaslHandshake (v1) names a mechanism the
listener enables (else UNSUPPORTED_SASL_MECHANISM, with the enabled ones listed); then
each SaslAuthenticate carries the mechanism's next message and gets the server's answer.
A failed authentication is answered with SASL_AUTHENTICATION_FAILED and its reason, and
the connection closes once the answer is sent. After a SaslHandshake v0 the mechanism's
messages travel instead as bare size-prefixed frames, outside Kafka's request framing
(``raw_tokens``), and a failure closes the connection without an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from broker_py.errors import IllegalSaslStateError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str | None

    def evaluate(self, response: bytes) -> bytes: ...


class SaslServerAuthenticator:
    def __init__(self, mechanisms: list[str], new_server: Callable[[str], SaslServer]) -> None:
        self.mechanisms = mechanisms
        self._new_server = new_server
        self._server: SaslServer | None = None
        self.state = "handshake"  # -> "authenticate" -> "complete" | "failed"
        self.principal: str | None = None
        self.raw_tokens = False  # after a v0 handshake, until authentication ends

    @property
    def authenticated(self) -> bool:
        return self.state == "complete"

    def handshake(self, mechanism: str, version: int = 1) -> None:
        if self.state != "handshake":
            raise IllegalSaslStateError(f"SaslHandshake in state {self.state}")
        if mechanism not in self.mechanisms:
            self.state = "failed"
            raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
        self._server = self._new_server(mechanism)
        self.state = "authenticate"
        self.raw_tokens = version == 0

    def authenticate(self, response: bytes) -> bytes:
        """The server's answer to one client message; SaslAuthenticationFailedError (the
        connection must then close) or IllegalSaslStateError."""
        if self.state != "authenticate" or self._server is None:
            raise IllegalSaslStateError(f"SaslAuthenticate in state {self.state}")
        try:
            challenge = self._server.evaluate(response)
        except SaslAuthenticationFailedError:
            self.state = "failed"
            raise
        if self._server.complete:
            self.state = "complete"
            self.principal = self._server.authorization_id
            self.raw_tokens = False
        return challenge
