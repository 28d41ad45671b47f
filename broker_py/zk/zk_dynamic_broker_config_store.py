"""The dynamic broker configs of a cluster in ZooKeeper, as Kafka's ZooKeeper mode keeps them
(``AdminZkClient.changeBrokerConfig``, ``BrokerConfigHandler``); the
:class:`~broker_py.config.dynamic_broker_config.DynamicBrokerConfigs` of a cluster::

    /config/brokers/<default>        {"version":1,"config":{"<key>":"<value>"}}  resource ""
    /config/brokers/<id>             {"version":1,"config":{...}}                 resource "<id>"
    /config/changes/config_change_N  {"version":2,
                                      "entity_path":"brokers/<default>" or "brokers/<id>"}

Any broker writes any broker's (or the default's) node; every broker applies the default
and its own id when notified (the broker that wrote applies its own change at once).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

from broker_py.config.dynamic_broker_config import DEFAULT, try_layers
from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener, call_on_loop
from broker_py.zk.zk_data import DEFAULT_ENTITY, ConfigEntityZNode, ZkDataError
from broker_py.zk.zk_data import ConfigEntityChangeNotificationSequenceZNode as ConfigChange
from broker_py.zk.zk_errors import ZooKeeperError, zk_failure

log = logging.getLogger(__name__)

BROKERS = "brokers"  # the config entity type in ZooKeeper


class ZkDynamicBrokerConfigStore:
    """The dynamic broker configs of a cluster, in ZooKeeper (see the module's docstring):
    :class:`~broker_py.config.dynamic_broker_config.DynamicBrokerConfigs` for this broker's
    layers, and :meth:`read` / :meth:`write` for any broker's node.

    ``apply(resource, configs)`` runs on the event loop when a notification (or this
    broker's own write) changed the default or this broker's configs to something other
    than what is layered; it is the admin manager's ``set_broker_configs``, which layers
    them through :meth:`set` (listeners and topic defaults follow). A change it refuses is
    logged and the previous layers stay.

    Invariants: ZooKeeper I/O runs off the event loop under the store's lock, and results
    reach the event loop in the order of those operations; a node that does not decode
    reads as empty (logged).
    """

    def __init__(
        self,
        zk: KafkaZkClient,
        loop: asyncio.AbstractEventLoop,
        config: BrokerConfig,
        apply: Callable[[str, dict[str, str]], None],
    ) -> None:
        self._zk = zk
        self._loop = loop
        self._config = config
        self._apply = apply
        self._broker = str(config.broker_id)
        self._lock = threading.Lock()
        self._default: dict[str, str] = {}
        self._mine: dict[str, str] = {}

    def start(self, changes: ConfigChangeListener) -> None:
        """Listens to broker config changes (a :class:`ConfigChangeListener`), then reads
        the default's and this broker's nodes (blocking: at construction)."""
        changes.register(BROKERS, self.on_broker_change)
        with self._lock:
            self._default = self._read_blocking(DEFAULT)
            self._mine = self._read_blocking(self._broker)

    def load(self) -> None:
        """Layers the configs read at startup over the static ones. A key ZooKeeper holds
        that this broker refuses (not dynamic, a bad value) is left out, logged, as Kafka
        leaves out invalid dynamic configs at startup."""
        while True:
            try:
                self._config.set_dynamic(self._default, self._mine)
                return
            except ConfigError as e:
                log.error("ignoring dynamic broker config %s from ZooKeeper: %s", e.key, e)
                for layer in (self._default, self._mine):
                    layer.pop(e.key, None)

    def get(self, resource: str) -> dict[str, str]:
        """The dynamic configs of ``resource`` (``""`` or this broker's id) as layered."""
        return dict(
            self._default if resource == DEFAULT else self._mine if resource == self._broker else {}
        )

    def set(
        self,
        resource: str,
        configs: dict[str, str],
        check: Callable[[], None],
        validate_only: bool = False,
    ) -> None:
        """Layers ``configs`` as :meth:`DynamicBrokerConfigStore.set` does, without
        storing them: ZooKeeper already holds them (:meth:`write`)."""
        default = configs if resource == DEFAULT else self._default
        mine = configs if resource == self._broker else self._mine
        if not try_layers(self._config, default, mine, check, validate_only):
            return
        if resource == DEFAULT:
            self._default = dict(configs)
        elif resource == self._broker:
            self._mine = dict(configs)

    # ---- any broker's node ----

    def read(self, resource: str) -> Awaitable[dict[str, str]]:
        """What ZooKeeper holds for ``resource`` (``""`` or any broker id)."""
        return asyncio.to_thread(self._read_guarded, resource)

    def write(self, resource: str, configs: dict[str, str]) -> Awaitable[None]:
        """Replaces the node of ``resource`` (``""`` or any broker id) and announces it;
        this broker applies it at once if it is the default or its own. The caller
        validated ``configs``. UnknownServerError if ZooKeeper cannot be reached."""
        return asyncio.to_thread(self._write_guarded, resource, dict(configs))

    def _read_guarded(self, resource: str) -> dict[str, str]:
        try:
            return self._read_blocking(resource)
        except ZooKeeperError as e:
            raise zk_failure(e) from None

    def _write_guarded(self, resource: str, configs: dict[str, str]) -> None:
        name = _entity_name(resource)
        try:
            with self._lock:
                self._zk.set_or_create_entity(
                    ConfigEntityZNode.path(BROKERS, name), ConfigEntityZNode.encode(configs)
                )
                self._zk.create_sequential(
                    ConfigChange.create_path(), ConfigChange.encode(f"{BROKERS}/{name}")
                )
                if resource in (DEFAULT, self._broker):
                    call_on_loop(self._loop, self._changed, resource, configs)
        except ZooKeeperError as e:
            raise zk_failure(e) from None
        log.info("wrote dynamic configs of broker resource %r to ZooKeeper: %s", resource, configs)

    def _read_blocking(self, resource: str) -> dict[str, str]:
        path = ConfigEntityZNode.path(BROKERS, _entity_name(resource))
        got = self._zk.read_versioned(path)
        if got is None:
            return {}
        try:
            return ConfigEntityZNode.decode(got[0], path=path)
        except ZkDataError as e:
            log.warning("reading %s as empty: %s", path, e)
            return {}

    # ---- changes ----

    def on_broker_change(self, name: str) -> None:
        """On the config change thread: a notification named ``brokers/<name>``."""
        resource = DEFAULT if name == DEFAULT_ENTITY else name
        if resource not in (DEFAULT, self._broker):
            return
        with self._lock:
            configs = self._read_blocking(resource)
            call_on_loop(self._loop, self._changed, resource, configs)

    def _changed(self, resource: str, configs: dict[str, str]) -> None:
        """On the event loop: ZooKeeper holds ``configs`` for ``resource``."""
        if configs == self.get(resource):
            return
        try:
            self._apply(resource, configs)
        except Exception as e:  # a value this broker refuses: keep the previous layers
            log.error(
                "could not apply dynamic configs %s of broker resource %r: %s", configs, resource, e
            )


def _entity_name(resource: str) -> str:
    if resource == DEFAULT:
        return DEFAULT_ENTITY
    if not resource.isdigit():
        raise ValueError(f"broker resource {resource!r} is not a broker id")
    return str(int(resource))
