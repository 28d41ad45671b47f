"""The GROUP config resources of the broker's groups (Kafka's ``GroupConfigManager``): each
group's own configs, kept in a store (a broker alone: a file beside the log; a cluster:
ZooKeeper's ``/config/groups``, every broker notified of a change), and the values in
force for a group, its own over the broker's defaults (:mod:`broker_py.config.group_config`).

Invariant: ``configs`` holds exactly what the store holds, each checked when written; a
resource another tool wrote that does not pass the check is logged and left out, so a
group then runs on the broker's defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker_py.config import group_config
from broker_py.config.config_entity_store import ConfigEntityStore
from broker_py.config.group_config import BrokerValues
from logstore.protocol.errors import KafkaException

log = logging.getLogger(__name__)


class GroupConfigManager:
    def __init__(self, store: ConfigEntityStore, broker: BrokerValues) -> None:
        self.store = store
        self.broker = broker
        self.configs: dict[str, dict[str, str]] = {}

    def start(self) -> None:
        self.store.start(self._on_change)

    def _on_change(self, name: str, configs: dict[str, str]) -> None:
        try:
            group_config.validate(name, configs, self.broker)
        except KafkaException as e:
            log.error("ignoring the configs %s of group %r: %s", configs, name, e)
            self.configs.pop(name, None)
            return
        if configs:
            self.configs[name] = dict(configs)
        else:
            self.configs.pop(name, None)

    def describe(self, name: str) -> list[tuple[str, str, bool]]:
        """(key, value in force, set on the group) for every key, as Kafka describes a group
        (its name checked, whether or not the group exists)."""
        group_config.check_name(name)
        own = self.configs.get(name, {})
        values = {**group_config.defaults(self.broker), **own}
        return [(key, values[key], key in own) for key in group_config.KEYS]

    def alter(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool
    ) -> Awaitable[None] | None:
        """Sets the group's configs to ``change(its configs)``, checked first (Kafka's
        errors); a ZooKeeper write is returned to be awaited."""
        group_config.check_name(name)

        def checked(current: dict[str, str]) -> dict[str, str]:
            configs = change(current)
            group_config.validate(name, configs, self.broker)
            return configs

        return self.store.update(name, checked, validate_only)

    def values(self, group_id: str) -> dict[str, Any]:
        """The configs in force for ``group_id``, typed (ints, the reset strategy)."""
        return group_config.effective(self.configs.get(group_id, {}), self.broker)

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return int(self.values(group_id)[group_config.CONSUMER_SESSION_TIMEOUT_MS])

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.values(group_id)[group_config.CONSUMER_HEARTBEAT_INTERVAL_MS])
