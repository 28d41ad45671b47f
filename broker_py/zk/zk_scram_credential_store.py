"""SCRAM credentials of a cluster, in ZooKeeper as Kafka's ZooKeeper mode keeps them
(``ZkAdminManager.alterUserScramCredentials``, ``UserConfigHandler``), with the interface
of :class:`~broker_py.security.sasl.scram_credentials.ScramCredentialStore`.

    /config/users/<sanitized user>   {"version":1,"config":{"SCRAM-SHA-256":"salt=..,stored_key=..,
                                      server_key=..,iterations=4096", ...}}
    /config/changes/config_change_N  {"version":2,"entity_path":"users/<sanitized user>"}

The user's node may hold other keys (Kafka's quotas: ``producer_byte_rate``, ...): they
are kept as they are. Removing a user's last credential leaves ``{"version":1,"config":{}}``
(or the other keys), as Kafka leaves it.

Invariants:
- Every broker's cache (what SCRAM authentication reads, :meth:`get`) is the users'
  znodes as last read: all of them at startup (after the change listener started), one
  user again on each notification naming it, and a user right after this broker wrote it.
- A write is a read-modify-write of the user's node conditional on its zkVersion (created
  if absent), retried from a fresh read when another broker wrote in between
  (``MAX_UPDATE_RETRIES``); then the notification is created.
- ZooKeeper reads and writes run off the event loop (kazoo's and the notification
  thread, or ``asyncio.to_thread``), each under the store's lock, and the cache changes
  only on the event loop, in the order of those ZooKeeper operations
  (:func:`~broker_py.zk.zk_change_notifications.call_on_loop` while holding the lock).
- A node that does not decode is logged and read as holding no credentials; a
  credential string that does not decode is left out (logged without its value).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable, Mapping

from broker_py.security.sasl.scram_credentials import (
    HASHES,
    ScramCredential,
    credential_from_string,
    credential_to_string,
)
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener, call_on_loop
from broker_py.zk.zk_data import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ZkDataError,
    desanitize,
    is_valid_node_name,
    sanitize,
)
from broker_py.zk.zk_errors import ZooKeeperError, zk_failure
from logstore.protocol.errors import KafkaError, UnacceptableCredentialError, UnknownServerError

log = logging.getLogger(__name__)

USERS = "users"
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_S, RETRY_JITTER_S = 0.1, 0.05


def credentials_of(config: Mapping[str, str], user: str) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's config keys (mechanism -> credential)."""
    out = {}
    for mechanism in HASHES:
        if mechanism in config:
            try:
                out[mechanism] = credential_from_string(config[mechanism])
            except ValueError as e:
                log.warning("leaving out the %s credential of user %r: %s", mechanism, user, e)
    return out


class ZkScramCredentialStore:
    def __init__(self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop) -> None:
        self._zk = zk
        self._loop = loop
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}

    # ---- lifecycle ----

    def start(self, changes: ConfigChangeListener) -> None:
        """Listens to user changes, then reads every user (blocking: at construction)."""
        changes.register(USERS, self.on_user_change)
        with self._lock:
            self._users = {u: c for u, c in self._read_all().items() if c}
        log.info("loaded the SCRAM credentials of %d users from ZooKeeper", len(self._users))

    # ---- reads (the cache) ----

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def describe(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations, as this broker last read them."""
        return {u: {m: c.iterations for m, c in ms.items()} for u, ms in self._users.items()}

    def describe_shared(self) -> Awaitable[dict[str, dict[str, int]]]:
        """:meth:`describe` of what ZooKeeper holds now (as Kafka's ZooKeeper mode answers
        DescribeUserScramCredentials); UnknownServerError if it cannot be read."""

        def read() -> dict[str, dict[str, int]]:
            try:
                users = self._read_all()
            except ZooKeeperError as e:
                raise zk_failure(e) from None
            return {u: {m: c.iterations for m, c in ms.items()} for u, ms in users.items() if ms}

        return asyncio.to_thread(read)

    def _read_all(self) -> dict[str, dict[str, ScramCredential]]:
        names = self._zk.list_children(ConfigEntityTypeZNode.path(USERS))
        paths = [ConfigEntityZNode.path(USERS, n) for n in names]
        out = {}
        for name, path, got in zip(names, paths, self._zk.read_versioned_many(paths)):
            if got is not None:
                user = _user(name)
                if user is not None:
                    out[user] = credentials_of(_decode(got[0], path), user)
        return out

    # ---- writes ----

    def apply(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> Awaitable[dict[str, KafkaError]]:
        """Upserts and deletes (user, mechanism) credentials in ZooKeeper, one user's node
        at a time; returns the writes to await, which give the users whose change failed
        (each with its error) and leave the others done, in this broker's cache too."""
        changes: dict[str, tuple[dict[str, ScramCredential], set[str]]] = {}
        for user, mechanism in deletions:
            changes.setdefault(user, ({}, set()))[1].add(mechanism)
        for user, mechanism, credential in upserts:
            changes.setdefault(user, ({}, set()))[0][mechanism] = credential

        def write_all() -> dict[str, KafkaError]:
            failed: dict[str, KafkaError] = {}
            for user, (upsert, delete) in changes.items():
                if not is_valid_node_name(sanitize(user)):  # "." and "..", which URLEncoder keeps
                    failed[user] = UnacceptableCredentialError(
                        f"user name {user!r} cannot be a ZooKeeper node name"
                    )
                    continue
                try:
                    self._alter_user(user, upsert, delete)
                except ZooKeeperError as e:
                    failed[user] = zk_failure(e)
                except KafkaError as e:
                    failed[user] = e
                except Exception as e:
                    log.exception("altering the SCRAM credentials of %r failed", user)
                    failed[user] = UnknownServerError(
                        f"altering the SCRAM credentials failed: {e!r}"
                    )
            return failed

        return asyncio.to_thread(write_all)

    def _alter_user(self, user: str, upsert: dict[str, ScramCredential], delete: set[str]) -> None:
        name = sanitize(user)
        path = ConfigEntityZNode.path(USERS, name)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            with self._lock:
                got = self._zk.read_versioned(path)
                config = {} if got is None else _decode(got[0], path)
                for mechanism in delete:
                    config.pop(mechanism, None)
                for mechanism, credential in upsert.items():
                    config[mechanism] = credential_to_string(credential)
                data = ConfigEntityZNode.encode(config)
                if (
                    self._zk.create_if_absent(path, data)
                    if got is None
                    else self._zk.conditional_set(path, data, got[1])
                ):
                    self._zk.create_sequential(
                        ConfigEntityChangeNotificationSequenceZNode.create_path(),
                        ConfigEntityChangeNotificationSequenceZNode.encode(f"{USERS}/{name}"),
                    )
                    call_on_loop(self._loop, self._set_user, user, credentials_of(config, user))
                    return
            log.debug(
                "the SCRAM credentials of %r changed meanwhile (attempt %d): reading them again",
                user,
                attempt + 1,
            )
            time.sleep(RETRY_BACKOFF_S + random.random() * RETRY_JITTER_S)
        raise UnknownServerError(
            f"could not update the SCRAM credentials of {user!r} after {MAX_UPDATE_RETRIES} retries"
        )

    # ---- changes ----

    def on_user_change(self, name: str) -> None:
        """On the config change thread: a notification named ``users/<name>``."""
        user = _user(name)
        if user is None:
            return
        path = ConfigEntityZNode.path(USERS, name)
        with self._lock:
            got = self._zk.read_versioned(path)
            credentials = {} if got is None else credentials_of(_decode(got[0], path), user)
            call_on_loop(self._loop, self._set_user, user, credentials)

    def _set_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """On the event loop: the user's credentials are now ``credentials``."""
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)
        log.info("SCRAM credentials of user %r: %s", user, sorted(credentials) or "none")


def _user(name: str) -> str | None:
    """The user a ``/config/users`` child names (None: the quota default "<default>" or
    a name that does not desanitize)."""
    if name == "<default>":
        return None
    try:
        return desanitize(name)
    except UnicodeDecodeError:
        log.warning("ignoring /config/users/%s: not a sanitized user name", name)
        return None


def _decode(data: bytes, path: str) -> dict[str, str]:
    try:
        return ConfigEntityZNode.decode(data, path=path)
    except ZkDataError as e:
        log.warning("reading %s as empty: %s", path, e)
        return {}
