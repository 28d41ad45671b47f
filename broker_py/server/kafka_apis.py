"""What request handlers see of the broker (the fields of Kafka's ``KafkaApis``).

A handler is ``handle(apis, request, connection)``: ``apis`` is this object,
``connection`` the request context (:class:`~broker_py.server.request_context.RequestContext`). Handlers
reach partitions only through :attr:`KafkaApis.replica_manager` and cluster metadata
only through :attr:`KafkaApis.metadata_cache`; they never see the broker's wiring or a
partition's log.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from broker_py.utils.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
    from broker_py.config.kafka_config import BrokerConfig, Listener
    from broker_py.coordinator.group.group_coordinator import GroupCoordinator
    from broker_py.coordinator.transaction.producer_id_manager import ProducerIdManager
    from broker_py.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker_py.log.log_dir_mover import LogDirMover
    from broker_py.log.log_manager import LogManager
    from broker_py.network.listener_manager import ListenerManager
    from broker_py.replication.replica_manager import ReplicaManager
    from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
    from broker_py.security.sasl.scram_credentials import ScramCredentialStore
    from broker_py.server.config_admin_manager import ConfigAdminManager
    from broker_py.server.fetch_session import FetchSessionCache
    from broker_py.server.log_config_manager import LogConfigManager
    from broker_py.server.metadata_cache import MetadataCache
    from broker_py.server.replica_admin_manager import ReplicaAdminManager
    from broker_py.server.topic_admin_manager import TopicAdminManager
    from broker_py.server.zk_support import ZkSupport


@dataclasses.dataclass
class KafkaApis:
    config: BrokerConfig
    broker_id: int
    cluster_id: str
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    topic_admin_manager: TopicAdminManager
    config_admin_manager: ConfigAdminManager
    replica_admin_manager: ReplicaAdminManager
    log_config_manager: LogConfigManager
    authorizer: StandardAuthorizer | None
    fetch_sessions: FetchSessionCache
    producer_ids: ProducerIdManager | ZkProducerIdManager
    scram_credentials: ScramCredentialStore
    dynamic_configs: DynamicBrokerConfigStore
    log_manager: LogManager
    log_dir_mover: LogDirMover
    listeners: ListenerManager
    time: Time = SYSTEM_TIME
    group_coordinator: GroupCoordinator | Any = None
    transaction_coordinator: TransactionCoordinator | Any = None
    # The broker's cluster part (ZkSupport) when it runs with zookeeper.connect, else None.
    zk_support: ZkSupport | Any = None

    def advertised_listener(self, connection=None) -> Listener:
        return self.listeners.advertised_listener(connection)
