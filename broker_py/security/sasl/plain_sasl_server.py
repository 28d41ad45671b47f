"""The PLAIN SASL mechanism (RFC 4616) against the users of a PlainLoginModule's JAAS
options (``user_<name>="<password>"``), as Kafka's PlainSaslServer.

The client's one message: ``[authzid] NUL authcid NUL passwd``, UTF-8. An authzid, if
given, must equal the user name.
"""

from __future__ import annotations

import hmac

from logstore.protocol.errors import SaslAuthenticationFailedError


class PlainSaslServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.credential_expiration_ms: float | None = None  # a password does not expire
        self.authorization_id: str | None = None
        self.user: str | None = None  # the user name the client gave, for the broker's log

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailedError("PLAIN authentication already complete")
        try:
            authzid, user, password = response.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise SaslAuthenticationFailedError(
                "Invalid SASL/PLAIN response: expected 3 tokens"
            ) from None
        self.user = user or None
        if not user:
            raise SaslAuthenticationFailedError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailedError("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailedError(
                "Authentication failed: Invalid username or password"
            )
        self.complete = True
        self.authorization_id = user
        return b""
