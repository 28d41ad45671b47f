"""What request handlers see of the broker (the fields of Kafka's ``KafkaApis``).

A handler is ``handle(apis, request, connection)``: ``apis`` is this object,
``connection`` the request context
(:class:`~broker_py.server.request_context.RequestContext`). Through ``apis`` a handler
reaches:

- partitions only through :attr:`KafkaApis.replica_manager`: appends, fetches, the
  partitions it hands out (their offsets, leadership and reads) and the log dirs
  (DescribeLogDirs, AlterReplicaLogDirs). This object holds neither the log manager nor
  the log dir mover; no handler touches a log, a segment or a log dir (the replica
  manager and its partitions do);
- cluster metadata only through :attr:`KafkaApis.metadata_cache`;
- the coordinators, the admin managers (topics, configs, replicas, log configs), the
  authorizer, the producer id manager, fetch sessions, SCRAM credentials and dynamic
  configs, and the listeners (advertised endpoints);
- in a cluster, :attr:`KafkaApis.zk_support`: the controller (its requests and
  whether this broker is it), the broker epoch, and ZooKeeper-kept consumer offsets
  (OffsetCommit / OffsetFetch v0).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from broker_py.utils.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
    from broker_py.config.kafka_config import BrokerConfig, Listener
    from broker_py.coordinator.group.group_config_manager import GroupConfigManager
    from broker_py.coordinator.group.group_coordinator import GroupCoordinator
    from broker_py.coordinator.share.share_coordinator import ShareCoordinator
    from broker_py.coordinator.transaction.producer_id_manager import (
        ProducerIdManager,
        ZkProducerIdManager,
    )
    from broker_py.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker_py.network.listener_manager import ListenerManager
    from broker_py.replication.replica_manager import ReplicaManager
    from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
    from broker_py.security.sasl.scram_credentials import ScramCredentialStore
    from broker_py.server.config_admin_manager import ConfigAdminManager
    from broker_py.server.fetch_session import FetchSessionCache
    from broker_py.server.log_config_manager import LogConfigManager
    from broker_py.server.metadata_cache import MetadataCache
    from broker_py.server.quota.client_quotas import ClientQuotas
    from broker_py.server.replica_admin_manager import ReplicaAdminManager
    from broker_py.server.share.share_partition_manager import SharePartitionManager
    from broker_py.server.share_state_persister import ShareStatePersister
    from broker_py.server.telemetry.client_telemetry import ClientTelemetry
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
    listeners: ListenerManager
    time: Time = SYSTEM_TIME
    group_coordinator: GroupCoordinator | Any = None
    transaction_coordinator: TransactionCoordinator | Any = None
    # The share coordinator (KIP-932): share-partition state in __share_group_state.
    share_coordinator: ShareCoordinator | Any = None
    # How share-partition leaders reach the share coordinator of their state.
    share_state_persister: ShareStatePersister | Any = None
    # The share-partitions this broker leads and the share sessions (ShareFetch).
    share_partition_manager: SharePartitionManager | Any = None
    # The broker's cluster part (ZkSupport) when it runs with zookeeper.connect, else None.
    zk_support: ZkSupport | Any = None
    # Client telemetry (KIP-714): CLIENT_METRICS resources, subscriptions, pushed metrics.
    client_telemetry: ClientTelemetry | Any = None
    # GROUP configs (Kafka 4): each group's overrides of the broker's group defaults.
    group_configs: GroupConfigManager | Any = None
    # Client quotas (KIP-13, KIP-124, KIP-599): stored, described, altered and enforced.
    client_quotas: ClientQuotas | Any = None
    # What counts Produce's and Fetch's per-partition errors when metrics.port is set
    # (broker_py.server.metrics.BrokerMetrics: on_produce_results, on_fetch_response).
    metrics: Any = None

    def advertised_listener(self, connection=None) -> Listener:
        return self.listeners.advertised_listener(connection)
