"""The SCRAM-SHA-256 / SCRAM-SHA-512 SASL mechanisms (RFC 5802, RFC 7677) against
stored credentials, as Kafka's ScramSaslServer.

- client-first: ``gs2-header client-first-bare``; gs2-header ``n,`` or ``y,`` (no channel
  binding) with an optional ``a=<authzid>``; client-first-bare ``n=<user>,r=<nonce>``
  and optional extensions (``tokenauth`` is refused: no delegation tokens here).
- server-first: ``r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>``.
- client-final: ``c=<base64 gs2-header>,r=<nonce>,p=<base64 ClientProof>``.
- server-final: ``v=<base64 ServerSignature>``.

ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage), with AuthMessage =
client-first-bare "," server-first "," client-final-without-proof; the proof holds when
H(ClientKey) == StoredKey. User names escape ``,`` and ``=`` as ``=2C`` and ``=3D``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from broker_py.security.sasl.scram_credentials import HASHES, ScramCredentialStore
from logstore.protocol.errors import SaslAuthenticationFailedError


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise SaslAuthenticationFailedError(f"Invalid SCRAM message attribute {part!r}")
        out[name] = value
    return out


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslAuthenticationFailedError("Invalid SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    def __init__(self, mechanism: str, credentials: ScramCredentialStore) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credentials = credentials
        self._state = "client-first"
        self.complete = False
        self.credential_expiration_ms: float | None = None  # a password does not expire
        self.authorization_id: str | None = None
        self.user: str | None = None  # the user name the client gave, for the broker's log

    def evaluate(self, response: bytes) -> bytes:
        try:
            message = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "client-first":
            return self._client_first(message)
        if self._state == "client-final":
            return self._client_final(message)
        raise SaslAuthenticationFailedError(f"Unexpected SCRAM message in state {self._state}")

    def _fail(self, reason: str) -> SaslAuthenticationFailedError:
        self._state = "failed"
        return SaslAuthenticationFailedError(reason)

    def _client_first(self, message: str) -> bytes:
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise self._fail(
                "Invalid SCRAM client first message (channel binding is not supported)"
            )
        authzid = parts[1][2:] if parts[1].startswith("a=") else None
        if parts[1] and authzid is None:
            raise self._fail("Invalid SCRAM client first message: bad authorization id")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        fields = parts[2].split(",")
        if (
            len(fields) < 2
            or not fields[0].startswith("n=")
            or not fields[1].startswith("r=")
            or len(fields[1]) < 3
        ):
            raise self._fail("Invalid SCRAM client first message: no user name or nonce")
        extensions = dict(f.partition("=")[::2] for f in fields[2:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise self._fail("Authentication failed: delegation tokens are not supported")
        attrs = {"n": fields[0][2:], "r": fields[1][2:]}
        user = _unescape(attrs["n"])
        self.user = user
        if authzid is not None and _unescape(authzid) != user:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        credential = self._credentials.get(user, self.mechanism)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        self._user, self._credential = user, credential
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        without_proof, sep, proof = message.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        if not sep or attrs.get("r") != self._nonce:
            raise self._fail("Invalid SCRAM client final message: wrong nonce or no proof")
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise self._fail("Invalid SCRAM client final message: channel binding does not match")
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except binascii.Error:
            raise self._fail("Invalid SCRAM client final message: proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(client_proof) != len(signature):
            raise self._fail(
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self.mechanism}"
            )
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise self._fail(
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self.mechanism}"
            )
        self._state = "complete"
        self.complete = True
        self.authorization_id = self._user
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return b"v=" + base64.b64encode(server_signature)
