"""The log configs in effect and the storage engine's logs configured with them (Kafka's
``LogConfig`` defaults with the topic overrides ``TopicConfigHandler`` applies).

A topic's effective config is its overrides (``TopicInfo.configs``) over the broker's
topic defaults (``BrokerConfig.topic_defaults``). It is cached per overrides dict: a
topic whose configs change gets a new dict, so a cached entry is used only while its
dict is the topic's. Broker configs changing drops every entry and reconfigures every
partition's log.

Topic configs are checked by the engine's table of Kafka's topic configs
(``logstore.validate_topic_configs``: Kafka's names, types, validators, cross-key rules
and messages), so a config Kafka would refuse never reaches a store. A config stored
before keys were checked that Kafka refuses (a ``_`` spelling or a typo, a value out of
its key's type or range) is left out of the effective config and warned about once per
topic configs; DescribeConfigs still shows an unknown key as stored (with type UNKNOWN),
as Kafka shows a stored key it does not define.
"""

from __future__ import annotations

import logging

import logstore
from broker_py.common.topic import TopicInfo
from broker_py.config.kafka_config import BrokerConfig
from broker_py.log.log_manager import LogManager, log_config
from broker_py.replication.replica_manager import ReplicaManager
from logstore.protocol.errors import InvalidConfigError

log = logging.getLogger(__name__)

# Kafka's topic config names (the engine's table).
TOPIC_CONFIG_NAMES = frozenset(name for name, _type, _default in logstore.topic_config_keys())


def _refusal(key: str, value: str) -> str | None:
    """Kafka's message refusing a stored topic config on its own (an unknown name, or a
    value its key's type or validator refuses: stored before keys were checked), else
    None."""
    if key not in TOPIC_CONFIG_NAMES:
        return f"Unknown topic config name: {key}"
    try:
        logstore.validate_topic_configs({key: value}, {})
    except logstore.InvalidConfigError as e:
        return str(e)
    return None


class TopicConfigError(InvalidConfigError):
    """INVALID_CONFIG for a topic's configs, worded as Kafka. ``config_exception``: Kafka
    raises it as a ConfigException (a bad value), which AlterConfigs answers prefixed
    with the resource; otherwise an InvalidConfigurationException (an unknown name, a
    cross-key rule), answered as is."""

    def __init__(self, message: str, config_exception: bool) -> None:
        super().__init__(message)
        self.config_exception = config_exception


class LogConfigManager:
    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        metadata_cache,
    ) -> None:
        self.config = config
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._metadata = metadata_cache  # broker_py.server.metadata_cache.MetadataCache
        self._topic_defaults: dict[str, str] | None = None
        # topic -> (the TopicInfo.configs dict it was built from, effective config)
        self._effective: dict[str, tuple[dict[str, str], dict[str, str]]] = {}

    # ---- effective configs ----

    def effective_config(self, topic: TopicInfo) -> dict[str, str]:
        """The topic's configs over the broker's defaults (cached until they change)."""
        cached = self._effective.get(topic.name)
        if cached is None or cached[0] is not topic.configs:
            if self._topic_defaults is None:
                self._topic_defaults = self.config.topic_defaults()
            ignored = {k: r for k, v in topic.configs.items() if (r := _refusal(k, v))}
            if ignored:
                log.warning(
                    "topic %s: stored configs ignored: %s",
                    topic.name,
                    "; ".join(f"{k}={topic.configs[k]} ({r})" for k, r in sorted(ignored.items())),
                )
            overrides = {k: v for k, v in topic.configs.items() if k not in ignored}
            cached = (topic.configs, {**self._topic_defaults, **overrides})
            self._effective[topic.name] = cached
        return cached[1]

    def min_insync_replicas(self, topic: str) -> int:
        info = self._metadata.get(topic)
        return (
            int(self.effective_config(info).get("min.insync.replicas", "1"))
            if info is not None
            else 1
        )

    def down_conversion_enabled(self, topic: str) -> bool:
        """``message.downconversion.enable`` of ``topic``: whether Fetch v0-v3 may read it."""
        info = self._metadata.get(topic)
        return (
            info is None
            or self.effective_config(info).get("message.downconversion.enable", "true") == "true"
        )

    def cleanup_policy(self, topic: str) -> str:
        info = self._metadata.get(topic)
        return (
            self.effective_config(info).get("cleanup.policy", "delete") if info is not None else ""
        )

    def validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """``configs`` as a topic's overrides (Kafka's names), checked as Kafka's
        LogConfig.validate over the broker's current defaults: TopicConfigError with
        Kafka's message."""
        try:
            logstore.validate_topic_configs(configs, self.config.topic_defaults())
        except logstore.InvalidConfigError as e:
            raise TopicConfigError(str(e), bool(getattr(e, "config_exception", True))) from None
        return configs

    # ---- the engine's logs ----

    def reopen_partition(self, topic: str, index: int, log_dir: str) -> None:
        """Opens a partition's closed log again from ``log_dir`` (a move's last step)."""
        info = self._metadata.get(topic)
        assert info is not None
        local_log = self._log_manager.reopen_log(topic, index, log_dir, self.effective_config(info))
        partition = self._replica_manager.get_partition(topic, index)
        assert partition is not None
        partition.log.replace_log(local_log)

    def apply_log_configs(self, topic: TopicInfo) -> None:
        """Reconfigures the open log of each of the topic's partitions here."""
        effective = log_config(self.effective_config(topic))
        for p in range(topic.partitions):
            partition = self._replica_manager.get_partition(topic.name, p)
            if partition is not None:
                partition.log.local_log.set_config(**effective)

    def broker_defaults_changed(self) -> None:
        """The broker's topic defaults may have changed: every cached effective config is
        dropped and every topic's logs are reconfigured."""
        self._topic_defaults = None
        self._effective.clear()
        for topic in self._metadata.topics.values():
            self.apply_log_configs(topic)
