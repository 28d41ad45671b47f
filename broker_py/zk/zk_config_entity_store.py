"""The named config resources of one type in a cluster (CLIENT_METRICS subscriptions,
entity type ``client-metrics``; GROUP configs, ``groups``), in ZooKeeper as Kafka keeps
config entities::

    /config/<entity type>/<sanitized name>  {"version":1,"config":{"<key>":"<value>",..}}
    /config/changes/config_change_N         {"version":2,
                                              "entity_path":"<entity type>/<sanitized name>"}

A resource whose last key is deleted loses its node. Any broker writes; every broker
reads all the nodes at startup and one again when a notification names it.

Invariants: the cache changes only on the event loop, in the order of the ZooKeeper
operations (reads and writes off the loop, under the store's lock); a write is a
read-modify-write conditional on the node's zkVersion, retried from a fresh read when
another broker wrote in between; a node that does not decode reads as empty (logged).
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
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ZkDataError,
    desanitize,
    is_valid_node_name,
    sanitize,
)
from broker_py.zk.zk_errors import ZooKeeperError, zk_failure
from logstore.protocol.errors import InvalidRequestError, UnknownServerError

log = logging.getLogger(__name__)

CLIENT_METRICS = "client-metrics"  # config entity types in ZooKeeper
GROUPS = "groups"
MAX_UPDATE_RETRIES = 10

Change = Callable[[dict[str, str]], dict[str, str]]
OnChange = Callable[[str, dict[str, str]], None]


class ZkConfigEntityStore:
    def __init__(
        self, zk: KafkaZkClient, loop: asyncio.AbstractEventLoop, entity_type: str, label: str
    ) -> None:
        """``label`` names a resource in logs and errors (``client metrics resource``)."""
        self._entity_type = entity_type
        self._label = label
        self._zk = zk
        self._loop = loop
        self._lock = threading.Lock()
        self._resources: dict[str, dict[str, str]] = {}
        self._on_change: OnChange | None = None
        self._changes: ConfigChangeListener | None = None

    def listen(self, changes: ConfigChangeListener) -> None:
        self._changes = changes

    def start(self, on_change: OnChange) -> None:
        """Listens to changes, reads every resource (blocking) and hands each to
        ``on_change(name, configs)``; later changes reach it on the event loop."""
        self._on_change = on_change
        if self._changes is not None:
            self._changes.register(self._entity_type, self.on_change_notified)
        with self._lock:
            names = self._zk.list_children(ConfigEntityTypeZNode.path(self._entity_type))
            for node in names:
                configs = self._read(node)[0]
                if configs:
                    self._resources[desanitize(node)] = configs
        for name, configs in list(self._resources.items()):
            on_change(name, dict(configs))
        log.info("loaded %d %ss from ZooKeeper", len(self._resources), self._label)

    def names(self) -> list[str]:
        return sorted(self._resources)

    def get(self, name: str) -> dict[str, str]:
        return dict(self._resources.get(name, {}))

    def update(self, name: str, change: Change, validate_only: bool = False) -> Awaitable[None]:
        """Replaces the resource's node with ``change(what ZooKeeper holds)`` (deleted when
        empty) and announces it; what ``change`` raises fails the update, nothing
        written. UnknownServerError when ZooKeeper fails."""
        node = sanitize(name)
        if not is_valid_node_name(node):
            raise InvalidRequestError(f"{self._label} name {name!r} is not allowed")

        def run() -> None:
            try:
                self._update(name, node, change, validate_only)
            except ZooKeeperError as e:
                raise zk_failure(e) from None

        return asyncio.to_thread(run)

    def _update(self, name: str, node: str, change: Change, validate_only: bool) -> None:
        path = ConfigEntityZNode.path(self._entity_type, node)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            with self._lock:
                current, version = self._read(node)
                configs = change(dict(current))
                if validate_only:
                    return
                if not configs:
                    done = version is None or self._zk.conditional_delete(path, version)
                else:
                    data = ConfigEntityZNode.encode(configs)
                    done = (
                        self._zk.create_if_absent(path, data)
                        if version is None
                        else self._zk.conditional_set(path, data, version)
                    )
                if done:
                    self._zk.create_sequential(
                        ConfigEntityChangeNotificationSequenceZNode.create_path(),
                        ConfigEntityChangeNotificationSequenceZNode.encode(
                            f"{self._entity_type}/{node}"
                        ),
                    )
                    call_on_loop(self._loop, self._changed, name, dict(configs))
                    log.info("wrote %s %r to ZooKeeper: %s", self._label, name, configs)
                    return
        raise UnknownServerError(
            f"could not update {self._label} {name!r} after {MAX_UPDATE_RETRIES} retries"
        )

    def _read(self, node: str) -> tuple[dict[str, str], int | None]:
        path = ConfigEntityZNode.path(self._entity_type, node)
        got = self._zk.read_versioned(path)
        if got is None:
            return {}, None
        try:
            return ConfigEntityZNode.decode(got[0], path=path), got[1]
        except ZkDataError as e:
            log.warning("reading %s as empty: %s", path, e)
            return {}, got[1]

    def on_change_notified(self, node: str) -> None:
        """On the config change thread: a notification named ``<entity type>/<node>``."""
        with self._lock:
            try:
                configs = self._read(node)[0]
            except ZooKeeperError as e:
                log.warning("could not read %s %s: %s", self._label, node, e)
                return
            call_on_loop(self._loop, self._changed, desanitize(node), configs)

    def _changed(self, name: str, configs: dict[str, str]) -> None:
        """On the event loop: ZooKeeper holds ``configs`` for ``name``."""
        if configs == self._resources.get(name, {}):
            return
        if configs:
            self._resources[name] = configs
        else:
            self._resources.pop(name, None)
        if self._on_change is not None:
            try:
                self._on_change(name, dict(configs))
            except Exception as e:  # configs another broker wrote that this one refuses
                log.error("could not apply %s %r %s: %s", self._label, name, configs, e)
