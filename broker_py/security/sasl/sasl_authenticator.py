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

Re-authentication (KIP-368), when ``connections.max.reauth.ms`` is positive for the
mechanism: a session then lasts that long, or until the credential expires if sooner
(an OAUTHBEARER token's ``exp``); SaslAuthenticate v1+ tells the client the lifetime,
and a request other than SaslHandshake or SaslAuthenticate after it ends closes the
connection. Before then the client authenticates again on the same connection
(SaslHandshake v1 with the same mechanism, then SaslAuthenticate), and must prove
the same principal. With the key at 0 a session never ends and a second SaslHandshake
gets ILLEGAL_SASL_STATE, as in Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from logstore.protocol.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str | None
    # When the credential proved stops being valid (ms since the epoch), if it has an end.
    credential_expiration_ms: float | None

    def evaluate(self, response: bytes) -> bytes: ...


class SaslServerAuthenticator:
    def __init__(
        self,
        mechanisms: list[str],
        new_server: Callable[[str], SaslServer],
        max_reauth_ms: Callable[[str], int] = lambda mechanism: 0,
    ) -> None:
        self.mechanisms = mechanisms
        self._new_server = new_server
        self._max_reauth_ms = max_reauth_ms
        self._server: SaslServer | None = None
        # handshake -> authenticate -> complete (-> reauthenticate -> complete ...) | failed
        self.state = "handshake"
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.raw_tokens = False  # after a v0 handshake, until authentication ends
        self.session_lifetime_ms = 0  # 0: the session does not end
        self._session_end: float | None = None  # time.monotonic() when it ends

    @property
    def user(self) -> str | None:
        """The user name the client gave in this exchange (None before it gave one, or for
        a mechanism without one), for the broker's log of a failed authentication."""
        return getattr(self._server, "user", None)

    @property
    def authenticated(self) -> bool:
        return self.state in ("complete", "reauthenticate")

    def session_expired(self) -> bool:
        return self._session_end is not None and time.monotonic() >= self._session_end

    def handshake(self, mechanism: str, version: int = 1) -> None:
        if self.state == "complete":
            self._begin_reauthentication(mechanism, version)
            return
        if self.state != "handshake":
            raise IllegalSaslStateError(f"SaslHandshake in state {self.state}")
        if mechanism not in self.mechanisms:
            self.state = "failed"
            raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
        self._server = self._new_server(mechanism)
        self.mechanism = mechanism
        self.state = "authenticate"
        self.raw_tokens = version == 0

    def _begin_reauthentication(self, mechanism: str, version: int) -> None:
        assert self.mechanism is not None
        if self._max_reauth_ms(self.mechanism) <= 0:
            raise IllegalSaslStateError(
                "already authenticated (re-authentication is off: connections.max.reauth.ms is 0)"
            )
        if version < 1:
            raise IllegalSaslStateError("re-authentication needs SaslHandshake v1")
        if mechanism != self.mechanism:
            self.state = "failed"
            raise IllegalSaslStateError(
                f"re-authentication must use {self.mechanism}, not {mechanism}"
            )
        self._server = self._new_server(mechanism)
        self.state = "reauthenticate"

    def authenticate(self, response: bytes) -> bytes:
        """The server's answer to one client message; SaslAuthenticationFailedError (the
        connection must then close) or IllegalSaslStateError."""
        if self.state not in ("authenticate", "reauthenticate") or self._server is None:
            raise IllegalSaslStateError(f"SaslAuthenticate in state {self.state}")
        try:
            challenge = self._server.evaluate(response)
        except SaslAuthenticationFailedError:
            self.state = "failed"
            raise
        if self._server.complete:
            principal = self._server.authorization_id
            if self.state == "reauthenticate" and principal != self.principal:
                self.state = "failed"
                raise SaslAuthenticationFailedError(
                    "Cannot change principals during re-authentication from "
                    f"User:{self.principal}: User:{principal}"
                )
            self.state = "complete"
            self.principal = principal
            self.raw_tokens = False
            self._start_session(self._server)
        return challenge

    def _start_session(self, server: SaslServer) -> None:
        assert self.mechanism is not None
        lifetime = self._max_reauth_ms(self.mechanism)
        if lifetime <= 0:
            self.session_lifetime_ms, self._session_end = 0, None
            return
        expires = getattr(server, "credential_expiration_ms", None)
        if expires is not None:
            lifetime = max(0, min(lifetime, int(expires - time.time() * 1000)))
        self.session_lifetime_ms = lifetime
        self._session_end = time.monotonic() + lifetime / 1000
