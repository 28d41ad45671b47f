"""Dynamic broker configs: values set at runtime with AlterConfigs or
IncrementalAlterConfigs on a BROKER resource, as ``kafka-configs.sh --entity-type
brokers`` sets them. Resource name ``""`` is the cluster-wide default; the broker's
id is that broker alone (and wins over the default).

A broker alone (:class:`DynamicBrokerConfigStore`) keeps them in
``<first log dir>/__logstore_metadata/broker-configs.json``::

    {"version": 1, "default": {"<key>": "<value>"}, "brokers": {"<id>": {"<key>": "<value>"}}}

and layers them over ``server.properties`` at startup, as Kafka reads them from its
controller before serving.

A cluster keeps them in ZooKeeper as Kafka's ZooKeeper mode does
(:class:`broker_py.zk.zk_dynamic_broker_config_store.ZkDynamicBrokerConfigStore`). Both
stores are :class:`DynamicBrokerConfigs`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from broker_py.config.kafka_config import BrokerConfig
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR

DEFAULT = ""


class DynamicBrokerConfigs(Protocol):
    """This broker's dynamic config layers, wherever they are kept: ``load`` layers the
    stored ones over the static configs at startup, ``get`` returns those of ``resource``
    (``""`` or this broker's id), ``set`` layers new ones (and, for a local store, stores
    them) as :meth:`DynamicBrokerConfigStore.set` describes."""

    def load(self) -> None: ...

    def get(self, resource: str) -> dict[str, str]: ...

    def set(
        self,
        resource: str,
        configs: dict[str, str],
        check: Callable[[], None],
        validate_only: bool = False,
    ) -> None: ...


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
        if not try_layers(self._config, default, mine, check, validate_only):
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


def try_layers(config, default: dict, mine: dict, check, validate_only: bool) -> bool:
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
