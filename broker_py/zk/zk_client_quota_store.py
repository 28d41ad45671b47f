"""Client quotas of a cluster, in ZooKeeper as Kafka's ZooKeeper mode keeps them
(``AdminZkClient.changeClientIdConfig`` / ``changeUserOrUserClientIdConfig``), with the
interface of :class:`~broker_py.config.config_entity_store.ConfigEntityStore`; a
resource's name is its entity path::

    /config/users/<user>                     {"version":1,"config":{"producer_byte_rate":
                                               "1048576", ...}}
    /config/users/<user>/clients/<client>    (same shape)
    /config/clients/<client>                 (same shape)
    /config/ips/<address>                    {"version":1,"config":
                                               {"connection_creation_rate":"10"}}
    /config/changes/config_change_N          {"version":2,"entity_path":"<entity path>"}

``<user>``, ``<client>`` and ``<address>`` are sanitized names or ``<default>``. A
user's node is shared with its SCRAM credentials
(:mod:`broker_py.zk.zk_scram_credential_store`): a write keeps every key it does not
change, and the cache holds only the keys ``keep`` accepts (the quota keys). A node whose
last quota is removed keeps its other keys, or ``{}``, as Kafka leaves it.

Invariants: as :mod:`broker_py.zk.zk_config_entity_store` (the cache changes only on the
event loop, in the order of the ZooKeeper operations, which run off the loop under the
store's lock; a write is a read-modify-write conditional on the node's zkVersion,
retried from a fresh read; a node that does not decode reads as empty).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener, call_on_loop
from broker_py.zk.zk_data import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ZkDataError,
)
from broker_py.zk.zk_errors import ZooKeeperError, zk_failure
from logstore.protocol.errors import UnknownServerError

log = logging.getLogger(__name__)

USERS = "users"
CLIENTS = "clients"
IPS = "ips"
MAX_UPDATE_RETRIES = 10
_EMPTY = ConfigEntityZNode.encode({})

Change = Callable[[dict[str, str]], dict[str, str]]
OnChange = Callable[[str, dict[str, str]], None]


class ZkClientQuotaStore:
    def __init__(
        self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop, keep: Callable[[str], bool]
    ) -> None:
        self._zk = zk
        self._loop = loop
        self._keep = keep
        self._lock = threading.Lock()
        self._entities: dict[str, dict[str, str]] = {}
        self._on_change: OnChange | None = None
        self._changes: ConfigChangeListener | None = None

    def listen(self, changes: ConfigChangeListener) -> None:
        self._changes = changes

    def start(self, on_change: OnChange) -> None:
        """Listens to changes, reads every user, client and IP entity (blocking) and hands
        each with quotas to ``on_change(entity path, configs)``; later changes reach it
        on the event loop."""
        self._on_change = on_change
        if self._changes is not None:
            for kind in (USERS, CLIENTS, IPS):
                self._changes.register(
                    kind, lambda name, kind=kind: self._notified(f"{kind}/{name}"), nested=True
                )
        with self._lock:
            for path in self._entity_paths():
                configs = self._read(path)[0]
                if configs:
                    self._entities[path] = configs
        for path, configs in list(self._entities.items()):
            on_change(path, dict(configs))
        log.info("loaded the client quotas of %d entities from ZooKeeper", len(self._entities))

    def _entity_paths(self) -> list[str]:
        paths = []
        for user in self._zk.list_children(f"/config/{USERS}"):
            paths.append(f"{USERS}/{user}")
            for client in self._zk.list_children(f"/config/{USERS}/{user}/{CLIENTS}"):
                paths.append(f"{USERS}/{user}/{CLIENTS}/{client}")
        paths.extend(f"{CLIENTS}/{c}" for c in self._zk.list_children(f"/config/{CLIENTS}"))
        paths.extend(f"{IPS}/{ip}" for ip in self._zk.list_children(f"/config/{IPS}"))
        return paths

    def names(self) -> list[str]:
        return sorted(self._entities)

    def get(self, name: str) -> dict[str, str]:
        return dict(self._entities.get(name, {}))

    def update(self, name: str, change: Change, validate_only: bool = False) -> Awaitable[None]:
        """Replaces the entity's node with ``change(what ZooKeeper holds)`` and announces
        it; what ``change`` raises fails the update, nothing written. UnknownServerError
        when ZooKeeper fails."""

        def run() -> None:
            try:
                self._update(name, change, validate_only)
            except ZooKeeperError as e:
                raise zk_failure(e) from None

        return asyncio.to_thread(run)

    def _update(self, name: str, change: Change, validate_only: bool) -> None:
        path = f"/config/{name}"
        for _ in range(MAX_UPDATE_RETRIES + 1):
            with self._lock:
                current, version = self._read(name, keep_all=True)
                configs = change(dict(current))
                if validate_only:
                    return
                data = ConfigEntityZNode.encode(configs)
                if version is None:
                    parts = name.split("/")
                    if len(parts) == 4:  # a user's client: its user's node has Kafka's shape
                        self._zk.create_if_absent(f"/config/{parts[0]}/{parts[1]}", _EMPTY)
                    done = self._zk.create_if_absent(path, data)
                else:
                    done = self._zk.conditional_set(path, data, version)
                if done:
                    self._zk.create_sequential(
                        ConfigEntityChangeNotificationSequenceZNode.create_path(),
                        ConfigEntityChangeNotificationSequenceZNode.encode(name),
                    )
                    kept = {k: v for k, v in configs.items() if self._keep(k)}
                    call_on_loop(self._loop, self._changed, name, kept)
                    log.info("wrote the client quotas of %s to ZooKeeper: %s", name, kept)
                    return
        raise UnknownServerError(
            f"could not update the client quotas of {name} after {MAX_UPDATE_RETRIES} retries"
        )

    def _read(self, name: str, keep_all: bool = False) -> tuple[dict[str, str], int | None]:
        path = f"/config/{name}"
        got = self._zk.read_versioned(path)
        if got is None:
            return {}, None
        if not got[0]:  # a parent node made without data
            return {}, got[1]
        try:
            configs = ConfigEntityZNode.decode(got[0], path=path)
        except ZkDataError as e:
            log.warning("reading %s as empty: %s", path, e)
            return {}, got[1]
        if keep_all:
            return configs, got[1]
        return {k: v for k, v in configs.items() if self._keep(k)}, got[1]

    def _notified(self, name: str) -> None:
        """On the config change thread: a notification named ``name`` (an entity path)."""
        with self._lock:
            try:
                configs = self._read(name)[0]
            except ZooKeeperError as e:
                log.warning("could not read the client quotas of %s: %s", name, e)
                return
            call_on_loop(self._loop, self._changed, name, configs)

    def _changed(self, name: str, configs: dict[str, str]) -> None:
        """On the event loop: ZooKeeper holds ``configs`` for ``name``."""
        if configs == self._entities.get(name, {}):
            return
        if configs:
            self._entities[name] = configs
        else:
            self._entities.pop(name, None)
        if self._on_change is not None:
            try:
                self._on_change(name, dict(configs))
            except Exception as e:
                log.error("could not apply the client quotas of %s %s: %s", name, configs, e)
