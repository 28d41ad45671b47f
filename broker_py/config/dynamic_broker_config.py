"""Dynamic broker configs: values set at runtime with AlterConfigs or
IncrementalAlterConfigs on a BROKER resource, as ``kafka-configs.sh --entity-type
brokers`` sets them. Resource name ``""`` is the cluster-wide default; the broker's
id is that broker alone (and wins over the default).

Kept in ``<first log dir>/__logstore_metadata/broker-configs.json``::

    {"version": 1, "default": {"<key>": "<value>"}, "brokers": {"<id>": {"<key>": "<value>"}}}

and layered over ``server.properties`` at startup, as Kafka reads them from its
controller before serving.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from broker_py.server import metadata_file
from broker_py.config.kafka_config import BrokerConfig
from broker_py.server.metadata_file import METADATA_DIR

DEFAULT = ""


class DynamicBrokerConfigStore:
    def __init__(self, log_dir: str, config: BrokerConfig) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, "broker-configs.json")
        self._config = config
        self._broker = str(config.broker_id)
        self._default, self._brokers = metadata_file.load(
            self._path, lambda doc: (dict(doc.get("default", {})), {k: dict(v) for k, v in doc.get("brokers", {}).items()})
        ) or ({}, {})

    def load(self) -> None:
        """Layers the stored configs over the static ones (ConfigError names a bad key)."""
        self._config.set_dynamic(self._default, self._brokers.get(self._broker, {}))

    def get(self, resource: str) -> dict[str, str]:
        """The dynamic configs of ``resource`` (``""`` or this broker's id)."""
        return dict(self._default if resource == DEFAULT else self._brokers.get(resource, {}))

    def set(self, resource: str, configs: dict[str, str], check: Callable[[], None], validate_only: bool = False) -> None:
        """Replaces the dynamic configs of ``resource``. They are layered in (a bad key
        or value raises ConfigError naming it) and ``check`` runs on the result; if
        that raises, or with ``validate_only``, the previous layers come back.
        Otherwise the configs are stored."""
        default = configs if resource == DEFAULT else self._default
        mine = configs if resource == self._broker else self._brokers.get(self._broker, {})
        old_default, old_mine = self._config.dynamic_default, self._config.dynamic_broker
        self._config.set_dynamic(default, mine)
        try:
            check()
        except BaseException:
            self._config.set_dynamic(old_default, old_mine)
            raise
        if validate_only:
            self._config.set_dynamic(old_default, old_mine)
            return
        if resource == DEFAULT:
            self._default = dict(configs)
        elif configs:
            self._brokers[resource] = dict(configs)
        else:
            self._brokers.pop(resource, None)
        metadata_file.write(self._path, {"version": 1, "default": self._default, "brokers": self._brokers})
