"""SCRAM credentials (RFC 5802, RFC 7677), as Kafka keeps them for SCRAM-SHA-256 and
SCRAM-SHA-512: per user and mechanism the salt, StoredKey = H(HMAC(SaltedPassword,
"Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration count.
The password itself is never kept.

On a broker alone (this module's :class:`ScramCredentialStore`), kept in
``<first log dir>/__logstore_metadata/scram-credentials.json``::

    {"version": 1, "users": {"<user>": {"SCRAM-SHA-256": {"salt": b64, "stored_key": b64,
                                                         "server_key": b64, "iterations": n}}}}

In a cluster, in ZooKeeper as Kafka keeps them
(:mod:`broker_py.zk.zk_scram_credential_store`), each credential a string of
:func:`credential_to_string`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import os

from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR

# Kafka's ScramMechanism type ids, as DescribeUserScramCredentials and
# AlterUserScramCredentials carry them.
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        h = HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", h)
        return cls(
            salt,
            hashlib.new(h, client_key).digest(),
            hmac.digest(salted_password, b"Server Key", h),
            iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = os.urandom(32) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def credential_to_string(credential: ScramCredential) -> str:
    """Kafka's ``ScramCredentialUtils.credentialToString``, the value of a mechanism's key
    in ``/config/users/<user>``: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
    (standard base64 with padding)."""
    c = credential
    return (
        f"salt={_b64(c.salt)},stored_key={_b64(c.stored_key)},"
        f"server_key={_b64(c.server_key)},iterations={c.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's ``ScramCredentialUtils.credentialFromString``: exactly the four keys, each
    ``key=value`` split at its first '='; ValueError naming what is wrong (never the value)."""
    fields: dict[str, str] = {}
    for token in text.split(","):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("SCRAM credential is not key=value,...")
        fields[key] = value
    if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError(
            f"SCRAM credential has keys {sorted(fields)}, "
            "expected salt, stored_key, server_key, iterations"
        )
    try:
        iterations = int(fields["iterations"])
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
            iterations,
        )
    except (ValueError, binascii.Error):
        raise ValueError("SCRAM credential has a value that is not base64 or an integer") from None


class ScramCredentialStore:
    def __init__(self, log_dir: str) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, "scram-credentials.json")

        def parse(doc: dict) -> dict[str, dict[str, ScramCredential]]:
            return {
                user: {
                    mechanism: ScramCredential(
                        base64.b64decode(c["salt"], validate=True),
                        base64.b64decode(c["stored_key"], validate=True),
                        base64.b64decode(c["server_key"], validate=True),
                        int(c["iterations"]),
                    )
                    for mechanism, c in mechanisms.items()
                }
                for user, mechanisms in doc.get("users", {}).items()
            }

        self._users: dict[str, dict[str, ScramCredential]] = (
            metadata_file.load(self._path, parse) or {}
        )
        metadata_file.restrict(self._path)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def describe(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations."""
        return {u: {m: c.iterations for m, c in ms.items()} for u, ms in self._users.items()}

    def describe_shared(self) -> None:
        """None: :meth:`describe` is the whole truth on a broker alone (a cluster's store
        returns the read of the shared state to await instead)."""
        return None

    def apply(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        """Upserts and deletes (user, mechanism) credentials, then stores them all, at once
        (None returned; a cluster's store returns the writes to await instead)."""
        for user, mechanism in deletions:
            mechanisms = self._users.get(user, {})
            mechanisms.pop(mechanism, None)
            if not mechanisms:
                self._users.pop(user, None)
        for user, mechanism, credential in upserts:
            self._users.setdefault(user, {})[mechanism] = credential
        metadata_file.write(
            self._path,
            {
                "version": 1,
                "users": {
                    u: {
                        m: {
                            "salt": _b64(c.salt),
                            "stored_key": _b64(c.stored_key),
                            "server_key": _b64(c.server_key),
                            "iterations": c.iterations,
                        }
                        for m, c in ms.items()
                    }
                    for u, ms in self._users.items()
                },
            },
            mode=metadata_file.SECRET_MODE,
        )
