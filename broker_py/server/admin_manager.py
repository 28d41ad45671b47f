"""Topic and config administration (Kafka's ``ZkAdminManager``, over the single-node
metadata store): create, delete and grow topics, change topic and broker configs.

Invariants:
- Metadata files are written before memory changes, so a change the disk refuses
  (KafkaStorageError naming the file) leaves the broker as it was.
- A topic, or new partitions, whose logs cannot all be created are removed again: a
  failed creation leaves nothing half made.
- A partition is served only once its log is open and this broker leads it (epoch 0,
  ISR and replicas this broker alone).
- A topic's effective config is its overrides over the broker's defaults, cached per
  overrides dict and dropped whenever broker configs change.
"""

from __future__ import annotations

import logging
import socket
import uuid

import logstore

from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.controller.topic_metadata import TopicInfo, TopicMetadataStore, validate_topic_name
from broker_py.log.log_manager import LogManager, log_config
from broker_py.log.storage_errors import kafka_error
from broker_py.log.unified_log import UnifiedLog
from broker_py.network.socket_server import SocketServer
from broker_py.replication.replica_manager import ReplicaManager
from logstore.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

INITIAL_LEADER_EPOCH = 0


class AdminManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: TopicMetadataStore,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        dynamic_configs: DynamicBrokerConfigStore,
        listeners,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._store = store
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._dynamic_configs = dynamic_configs
        self._listeners = listeners  # broker_py.network.listener_manager.ListenerManager
        self.on_topic_deleted = []  # callables(topic name), e.g. the group coordinator's
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
            cached = (topic.configs, {**self._topic_defaults, **topic.configs})
            self._effective[topic.name] = cached
        return cached[1]

    def min_insync_replicas(self, topic: str) -> int:
        info = self._store.get(topic)
        return int(self.effective_config(info).get("min.insync.replicas", "1")) if info is not None else 1

    def cleanup_policy(self, topic: str) -> str:
        info = self._store.get(topic)
        return self.effective_config(info).get("cleanup.policy", "delete") if info is not None else ""

    def validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        try:
            logstore.validate_log_config(**{**self.config.topic_defaults(), **configs})
        except logstore.LogStoreError as e:
            raise kafka_error(e, "topic configs") from None
        return configs

    # ---- partitions ----

    def open_partition(self, topic: TopicInfo, index: int) -> None:
        """Opens (recovering) or creates the partition's log and leads it."""
        local_log = self._log_manager.open_log(topic, index, self.effective_config(topic))
        self._replica_manager.make_leader(
            topic.name, index, UnifiedLog(topic.name, index, local_log), INITIAL_LEADER_EPOCH, [self.broker_id], [self.broker_id]
        )

    def open_all_partitions(self) -> None:
        """Startup: stray logs set aside, then every partition of every topic opened."""
        self._log_manager.set_aside_stray_logs(self._store.topics)
        for topic in list(self._store.topics.values()):
            for p in range(topic.partitions):
                self.open_partition(topic, p)

    def reopen_partition(self, topic: str, index: int, log_dir: str) -> None:
        """Opens a partition's closed log again from ``log_dir`` (a move's last step)."""
        info = self._store.get(topic)
        assert info is not None
        local_log = self._log_manager.reopen_log(topic, index, log_dir, self.effective_config(info))
        partition = self._replica_manager.get_partition(topic, index)
        assert partition is not None
        partition.log.replace_log(local_log)

    def _open_new_partitions(self, topic: TopicInfo, first: int) -> None:
        """Creates the logs of partitions ``first`` .. ``topic.partitions - 1``, whose
        count is already persisted. If one cannot be created (KafkaStorageError), those
        created are removed and the persisted count goes back to ``first`` (with
        ``first`` 0, the topic goes), so a failed creation leaves nothing half made."""
        try:
            for p in range(first, topic.partitions):
                self.open_partition(topic, p)
        except KafkaStorageError:
            for p in range(first, topic.partitions):
                if self._replica_manager.stop_replica(topic.name, p) is not None:
                    self._log_manager.delete_log(topic.name, p)
            try:
                if first == 0:
                    self._store.delete(topic.name)
                else:
                    self._store.set_partitions(topic.name, first)
            except KafkaStorageError as e:
                log.error("%s keeps %d partitions in the topic metadata, to be created at the next start: %s",
                          topic.name, topic.partitions, e)  # fmt: skip
            raise

    # ---- topics ----

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if self._store.get(name) is not None:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions <= 0:
            raise InvalidPartitionsError(f"number of partitions must be larger than 0, not {num_partitions}")
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor <= 0:
            raise InvalidReplicationFactorError("replication factor must be larger than 0")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the 1 available broker"
            )
        configs = self.validate_topic_configs(dict(configs or {}))
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), num_partitions, configs)
        topic = self._store.create(name, num_partitions, configs)
        self._open_new_partitions(topic, 0)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def auto_create_topic(self, name: str) -> TopicInfo:
        return self.create_topic(name)

    def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        """The topic, created with the given layout if missing (internal topics)."""
        topic = self._store.get(name)
        if topic is None:
            topic = self._store.create(name, partitions, configs)
            self._open_new_partitions(topic, 0)
        return topic

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self._store.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self._store.delete(name)  # first: a delete the disk refuses leaves the topic whole
        for p in range(topic.partitions):
            self._replica_manager.stop_replica(name, p)  # answers what waits on it
            self._log_manager.delete_log(name, p)
        for callback in self.on_topic_deleted:
            callback(name)
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self._store.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if count < topic.partitions:
            raise InvalidPartitionsError(f"topic {name} has {topic.partitions} partitions; the count can only grow")
        if count == topic.partitions:
            raise InvalidPartitionsError(f"topic {name} already has {count} partitions")
        if validate_only:
            return
        old = topic.partitions
        self._store.set_partitions(name, count)
        self._open_new_partitions(topic, old)

    # ---- configs ----

    def apply_log_configs(self, topic: TopicInfo) -> None:
        effective = log_config(self.effective_config(topic))
        for p in range(topic.partitions):
            partition = self._replica_manager.get_partition(topic.name, p)
            if partition is not None:
                partition.log.local_log.set_config(**effective)

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        topic = self._store.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self.validate_topic_configs(configs)
        if validate_only:
            return
        self._store.set_configs(name, configs)
        self.apply_log_configs(topic)

    def set_broker_configs(self, resource: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replaces the dynamic configs of BROKER resource ``resource`` (``""``: the
        cluster default, or this broker's id). Topic defaults among them apply at once
        to every partition whose topic does not set its own; listeners added or removed
        start or stop listening (a new address is bound before the change is accepted)."""
        if resource not in ("", str(self.broker_id)):
            raise InvalidRequestError(f"broker {resource!r} is not this broker ({self.broker_id}) or the default ('')")

        bound: list[tuple[SocketServer, socket.socket]] = []
        removed: list[SocketServer] = []

        def check() -> None:
            nonlocal removed
            self.validate_topic_configs({})  # the new topic defaults, as a topic sees them
            added, removed, newly_bound = self._listeners.prepare_changes()
            bound.extend(newly_bound)

        try:
            try:
                self._dynamic_configs.set(resource, configs, check, validate_only=validate_only)
            except BaseException:
                for _, sock in bound:
                    sock.close()
                raise
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None
        if validate_only:
            for _, sock in bound:
                sock.close()
            return
        self._listeners.apply_changes(removed, bound)
        self._topic_defaults = None
        self._effective.clear()
        for topic in self._store.topics.values():
            self.apply_log_configs(topic)
        log.info("dynamic configs of broker resource %r are now %s", resource, configs)

