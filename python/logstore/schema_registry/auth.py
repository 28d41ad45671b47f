"""HTTP basic authentication against SCRAM credentials (the broker's SCRAM users).

A SCRAM credential keeps no password, only `salt`, `iterations` and `StoredKey =
H(HMAC(Hi(password, salt, iterations), "Client Key"))` (RFC 5802); a password is right when it
derives the same StoredKey under one of the user's mechanisms. A verified (user, password)
pair is remembered by its SHA-256 for `cache_s` seconds, so a client's every request does not
cost a key derivation. Pure: `credentials(user)` and `clock()` are injected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from logstore.schema_registry import errors

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    iterations: int
    stored_key: bytes


def stored_key(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    name = _HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return hashlib.new(name, client_key).digest()


def parse_basic(header: str | None) -> tuple[str, str]:
    if not header or not header.lower().startswith("basic "):
        raise errors.UnauthorizedError("Unauthorized")
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise errors.UnauthorizedError("Unauthorized") from None
    user, sep, password = raw.partition(":")
    if not sep:
        raise errors.UnauthorizedError("Unauthorized")
    return user, password


class BasicAuthenticator:
    def __init__(
        self,
        credentials: Callable[[str], Sequence[ScramCredential]],
        clock: Callable[[], float],
        cache_s: float = 60.0,
    ) -> None:
        self.credentials = credentials
        self.clock = clock
        self.cache_s = cache_s
        self._verified: dict[bytes, float] = {}

    def authenticate(self, header: str | None) -> str:
        """The user the Authorization header proves; UnauthorizedError otherwise."""
        user, password = parse_basic(header)
        token = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        now = self.clock()
        until = self._verified.get(token)
        if until is not None and until > now:
            return user
        for cred in self.credentials(user):
            if cred.mechanism not in _HASHES:
                continue
            got = stored_key(cred.mechanism, password, cred.salt, cred.iterations)
            if hmac.compare_digest(got, cred.stored_key):
                if len(self._verified) > 10_000:
                    self._verified.clear()
                self._verified[token] = now + self.cache_s
                return user
        raise errors.UnauthorizedError("Unauthorized")
