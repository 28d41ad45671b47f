"""The client side of SASL, as a broker authenticates to another broker (Kafka's
SaslClientAuthenticator with the mechanism of ``sasl.mechanism.inter.broker.protocol``).

A :class:`SaslClient` turns the server's challenges into the client's messages; the
network client carries them in SaslAuthenticate requests (SaslHandshake v1)::

    token = client.evaluate(b"")                 # the initial response
    while not client.complete:
        challenge = <SaslAuthenticate(token)>.auth_bytes
        token = client.evaluate(challenge)       # None once complete

Mechanisms:

- ``PLAIN`` (RFC 4616): one message ``NUL user NUL password`` (no authzid), answered
  with an empty challenge.
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802, RFC 7677): ``n,,n=<user>,r=<nonce>``,
  then ``c=biws,r=<nonce>,p=<proof>`` for the server's ``r=<nonce>,s=<salt>,i=<n>``
  (the server's nonce must extend ours, at least 4096 iterations as Kafka's client
  requires); the server's final ``v=<signature>`` is checked, ``e=<error>`` fails.

Credentials come from the listener's JAAS config as Kafka's broker reads its own:
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``,
with ``username="..."`` and ``password="..."`` options (:func:`inter_broker_credentials`).
Every failure of the exchange is a SaslAuthenticationFailedError.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Protocol

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.security.sasl import jaas
from broker_py.security.sasl.scram_credentials import HASHES, MIN_ITERATIONS, ScramCredential
from logstore.protocol.errors import SaslAuthenticationFailedError

CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClient(Protocol):
    mechanism: str
    complete: bool

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next message for ``challenge`` (``b""`` first); None once complete."""
        ...


class PlainSaslClient:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._sent = False
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            self._sent = True
            return b"\0" + self._username.encode() + b"\0" + self._password.encode()
        if challenge:
            raise SaslAuthenticationFailedError("unexpected SASL/PLAIN challenge from the server")
        self.complete = True
        return None


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramSaslClient:
    """One SCRAM exchange; states: first -> final -> verify -> complete."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._state = "first"
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._state == "first":
            self._client_first_bare = f"n={_escape(self._username)},r={self._nonce}"
            self._state = "final"
            return ("n,," + self._client_first_bare).encode()
        try:
            message = challenge.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("invalid SCRAM server message: not UTF-8") from None
        if self._state == "final":
            return self._client_final(message)
        if self._state == "verify":
            self._verify(message)
            return None
        raise SaslAuthenticationFailedError(
            f"unexpected SCRAM server message in state {self._state}"
        )

    def _client_final(self, server_first: str) -> bytes:
        attrs = dict(part.partition("=")[::2] for part in server_first.split(","))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise SaslAuthenticationFailedError(
                "invalid SCRAM server first message: the nonce does not extend ours"
            )
        try:
            salt_bytes = base64.b64decode(salt or "", validate=True)
            count = int(iterations)
        except (binascii.Error, ValueError):
            raise SaslAuthenticationFailedError(
                "invalid SCRAM server first message: bad salt or iteration count"
            ) from None
        if count < MIN_ITERATIONS:
            raise SaslAuthenticationFailedError(
                f"SCRAM iteration count {count} is below the minimum {MIN_ITERATIONS}"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt_bytes, count)
        credential = ScramCredential.from_salted_password(self.mechanism, salt_bytes, salted, count)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        self._state = "verify"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        self._state = "failed"
        if server_final.startswith("e="):
            raise SaslAuthenticationFailedError(f"SCRAM authentication failed: {server_final[2:]}")
        if not server_final.startswith("v="):
            raise SaslAuthenticationFailedError("invalid SCRAM server final message")
        try:
            signature = base64.b64decode(server_final[2:], validate=True)
        except binascii.Error:
            raise SaslAuthenticationFailedError(
                "invalid SCRAM server final message: signature is not base64"
            ) from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationFailedError(
                "SCRAM server signature does not match: the server does not know our credential"
            )
        self._state = "complete"
        self.complete = True


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A client for one exchange of ``mechanism`` (ValueError for one not supported)."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    if mechanism in HASHES:
        return ScramSaslClient(mechanism, username, password)
    raise ValueError(
        f"SASL mechanism {mechanism} has no client here; use one of {', '.join(CLIENT_MECHANISMS)}"
    )


def inter_broker_credentials(
    config: BrokerConfig, listener_name: str, mechanism: str
) -> tuple[str, str]:
    """(username, password) a broker authenticates with to ``listener_name`` of other
    brokers, from that listener's JAAS config for ``mechanism``; ConfigError naming the
    key when the mechanism has no client or the config lacks them."""
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            mechanism,
            f"inter-broker SASL supports {', '.join(CLIENT_MECHANISMS)}",
        )
    key, raw = config.jaas_config(listener_name, mechanism)
    if not raw:
        raise ConfigError(
            key, "", f"inter-broker {mechanism} needs a JAAS config with username and password"
        )
    module = jaas.parse(key, raw)
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ConfigError(
            key,
            "(hidden)",
            f'inter-broker {mechanism} needs username="..." and password="..." options',
        )
    return username, password
