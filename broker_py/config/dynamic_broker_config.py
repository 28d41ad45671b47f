"""Dynamic broker configs: values set at runtime with AlterConfigs or
IncrementalAlterConfigs on a BROKER resource, as ``kafka-configs.sh --entity-type
brokers`` sets them. Resource name ``""`` is the cluster-wide default; the broker's
id is that broker alone (and wins over the default).

A broker alone (:class:`DynamicBrokerConfigStore`) keeps them in
``<first log dir>/__logstore_metadata/broker-configs.json``::

    {"version": 1, "default": {"<key>": "<value>"}, "brokers": {"<id>": {"<key>": "<value>"}}}

and layers them over ``server.properties`` at startup, as Kafka reads them from its
controller before serving.

A cluster (:class:`ZkDynamicBrokerConfigStore`) keeps them in ZooKeeper as Kafka's
ZooKeeper mode does (``AdminZkClient.changeBrokerConfig``, ``BrokerConfigHandler``)::

    /config/brokers/<default>        {"version":1,"config":{"<key>":"<value>"}}  resource ""
    /config/brokers/<id>             {"version":1,"config":{...}}                 resource "<id>"
    /config/changes/config_change_N  {"version":2,"entity_path":"brokers/<default>" or "brokers/<id>"}

Any broker writes any broker's (or the default's) node; every broker applies the default
and its own id when notified (the broker that wrote applies its own change at once).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR
from broker_py.zk.kafka_zk_client import KafkaZkClient, ZooKeeperError, zk_failure
from broker_py.zk.zk_change_notifications import ConfigChangeListener, call_on_loop
from broker_py.zk.zk_data import DEFAULT_ENTITY, ConfigEntityZNode, ZkDataError
from broker_py.zk.zk_data import ConfigEntityChangeNotificationSequenceZNode as ConfigChange

log = logging.getLogger(__name__)

DEFAULT = ""
BROKERS = "brokers"  # the config entity type in ZooKeeper


class DynamicBrokerConfigStore:
    def __init__(self, log_dir: str, config: BrokerConfig) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, "broker-configs.json")
        self._config = config
        self._broker = str(config.broker_id)
        self._default, self._brokers = metadata_file.load(
            self._path,
            lambda doc: (
                dict(doc.get("default", {})),
                {k: dict(v) for k, v in doc.get("brokers", {}).items()},
            ),
        ) or ({}, {})
        metadata_file.restrict(self._path)

    def load(self) -> None:
        """Layers the stored configs over the static ones (ConfigError names a bad key)."""
        self._config.set_dynamic(self._default, self._brokers.get(self._broker, {}))

    def get(self, resource: str) -> dict[str, str]:
        """The dynamic configs of ``resource`` (``""`` or this broker's id)."""
        return dict(self._default if resource == DEFAULT else self._brokers.get(resource, {}))

    def set(
        self,
        resource: str,
        configs: dict[str, str],
        check: Callable[[], None],
        validate_only: bool = False,
    ) -> None:
        """Replaces the dynamic configs of ``resource``. They are layered in (a bad key
        or value raises ConfigError naming it) and ``check`` runs on the result; if
        that raises, or with ``validate_only``, the previous layers come back.
        Otherwise the configs are stored."""
        default = configs if resource == DEFAULT else self._default
        mine = configs if resource == self._broker else self._brokers.get(self._broker, {})
        if not _try_layers(self._config, default, mine, check, validate_only):
            return
        if resource == DEFAULT:
            self._default = dict(configs)
        elif configs:
            self._brokers[resource] = dict(configs)
        else:
            self._brokers.pop(resource, None)
        # Dynamic configs may hold passwords (listener keystores): never readable by others.
        metadata_file.write(
            self._path,
            {"version": 1, "default": self._default, "brokers": self._brokers},
            mode=metadata_file.SECRET_MODE,
        )


def validate_configs(config: BrokerConfig, resource: str, configs: dict[str, str]) -> None:
    """Checks ``configs`` as the dynamic configs of ``resource`` (``""`` or any broker id)
    layered over this broker's static configs: ConfigError names a key that cannot change
    at runtime, or a bad value. (The broker named may differ from this one: its own
    static configs are not known here, as Kafka checks on the broker receiving it.)"""
    scratch = BrokerConfig(config.originals)
    if resource == DEFAULT:
        scratch.set_dynamic(configs, {})
    else:
        scratch.set_dynamic(config.dynamic_default, configs)


class ZkDynamicBrokerConfigStore:
    """The dynamic broker configs of a cluster, in ZooKeeper (see the module's docstring),
    with :class:`DynamicBrokerConfigStore`'s interface for this broker's layers and
    :meth:`read` / :meth:`write` for any broker's node.

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
        if not _try_layers(self._config, default, mine, check, validate_only):
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


def _try_layers(config, default: dict, mine: dict, check, validate_only: bool) -> bool:
    """Layers ``default`` and ``mine`` over the static configs and runs ``check``; the
    old layers come back if it raises (and it raises on) or for ``validate_only``. True
    when the new layers stay."""
    old_default, old_mine = config.dynamic_default, config.dynamic_broker
    config.set_dynamic(default, mine)
    try:
        check()
    except BaseException:
        config.set_dynamic(old_default, old_mine)
        raise
    if validate_only:
        config.set_dynamic(old_default, old_mine)
        return False
    return True
