"""One broker (Kafka's ``KafkaServer``): the wiring of its parts, their start and stop.

Start order: the log dirs are locked (a dir another broker holds stops startup) and
checked (``meta.properties``), the stores are read, every partition's log is opened
and led, the group and transaction coordinators load their topics, then listeners
open. Stop runs it backwards and leaves every log closed cleanly. A broker alone is
its own controller (:mod:`broker_py.server.local_support`), over the store kept in its
first log dir; its partitions open as that controller leads them, during construction.

With ``zookeeper.connect`` the broker is one of a cluster (:mod:`broker_py.server.zk_support`):
it connects to ZooKeeper before reading its log dirs (the cluster id lives there), opens
a partition's log when the controller's LeaderAndIsr names it, registers once its
listeners are up, and on stop first asks the controller to move its leaderships away
(``controlled.shutdown.enable``).
"""

from __future__ import annotations

import logging
import uuid

from broker_py.config.config_entity_store import LocalConfigEntityStore
from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.coordinator.group.group_config_manager import GroupConfigManager
from broker_py.coordinator.transaction.producer_id_manager import ProducerIdManager
from broker_py.log.log_dir_failure_channel import LogDirFailureChannel
from broker_py.log.log_dir_mover import LogDirMover
from broker_py.log.log_manager import LogManager
from broker_py.network import fd_budget
from broker_py.network.listener_manager import ListenerManager
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.replication.replication_quota_manager import FOLLOWER, LEADER
from broker_py.replication.replication_quota_manager import from_config as quota_from_config
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.server import handlers, schema_registry_service
from broker_py.server.config_admin_manager import ConfigAdminManager
from broker_py.server.coordinator_partition_writer import CoordinatorPartitionWriter
from broker_py.server.dynamic_listener_config import DynamicListenerConfig
from broker_py.server.error_response import error_response
from broker_py.server.fetch_session import FetchSessionCache
from broker_py.server.inter_broker_clients import InterBrokerClients
from broker_py.server.kafka_apis import KafkaApis
from broker_py.server.local_state_import import import_local_state
from broker_py.server.local_support import LocalSupport
from broker_py.server.log_config_manager import LogConfigManager
from broker_py.server.log_dir_failure_handler import LogDirFailureHandler
from broker_py.server.log_tasks import LogTasks
from broker_py.server.meta_properties import check_log_dirs, resolve_broker_id, stored_broker_id
from broker_py.server.metrics import BrokerMetrics, instrumented
from broker_py.server.quota.client_quota_entity import ALL_KEYS
from broker_py.server.quota.client_quotas import ClientQuotas
from broker_py.server.quota.request_throttle import throttled
from broker_py.server.replica_admin_manager import ReplicaAdminManager
from broker_py.server.telemetry.client_telemetry import ClientTelemetry
from broker_py.server.topic_admin_manager import TopicAdminManager
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode

log = logging.getLogger(__name__)


def new_group_coordinator(apis: KafkaApis, time: Time = SYSTEM_TIME):
    """The broker's group coordinator, writing through a
    :class:`~broker_py.server.coordinator_partition_writer.CoordinatorPartitionWriter`;
    a transactional offset commit asks the transaction coordinator running then."""
    from broker_py.coordinator.group.group_coordinator import GroupCoordinator

    def verify_transaction(producer_id: int, epoch: int, topic: str, partition: int):
        transactions = apis.transaction_coordinator
        if transactions is None:
            return ErrorCode.INVALID_TXN_STATE
        return transactions.verify_partition(producer_id, epoch, topic, partition)

    coordinator = GroupCoordinator(
        apis.config,
        _partition_writer(apis),
        cluster=apis.zk_support is not None,
        verify_transaction=verify_transaction,
        time=time,
    )
    # Consumer groups (KIP-848) see the topics the metadata cache has, and run on their
    # GROUP configs' timeouts.
    coordinator.consumer_groups.set_topic_source(lambda: apis.metadata_cache.topics)

    def group_timeouts(group_id: str) -> tuple[int, int]:
        configs = apis.group_configs
        if configs is None:
            return (
                apis.config["group.consumer.session.timeout.ms"],
                apis.config["group.consumer.heartbeat.interval.ms"],
            )
        return (
            configs.consumer_session_timeout_ms(group_id),
            configs.consumer_heartbeat_interval_ms(group_id),
        )

    coordinator.consumer_groups.set_group_timeouts(group_timeouts)
    # Share groups (KIP-932) likewise, on their share.* timeouts.
    coordinator.share_groups.set_topic_source(lambda: apis.metadata_cache.topics)
    coordinator.share_groups.set_metadata_ready(lambda: apis.metadata_cache.knows_cluster)

    def share_timeouts(group_id: str) -> tuple[int, int]:
        from broker_py.config import group_config

        configs = apis.group_configs
        if configs is None:
            return (
                apis.config["group.share.session.timeout.ms"],
                apis.config["group.share.heartbeat.interval.ms"],
            )
        values = configs.values(group_id)
        return (
            int(values[group_config.SHARE_SESSION_TIMEOUT_MS]),
            int(values[group_config.SHARE_HEARTBEAT_INTERVAL_MS]),
        )

    coordinator.share_groups.set_group_timeouts(share_timeouts)
    return coordinator


def new_transaction_coordinator(apis: KafkaApis, time: Time = SYSTEM_TIME):
    """The broker's transaction coordinator, writing through a
    :class:`~broker_py.server.coordinator_partition_writer.CoordinatorPartitionWriter`
    and sending markers to other brokers over inter-broker clients (none on a broker
    alone); groups are the group coordinator's running then."""
    from broker_py.coordinator.transaction.transaction_coordinator import TransactionCoordinator

    support = apis.zk_support

    def offsets_partition(group_id: str) -> int:
        groups = apis.group_coordinator
        groups.ensure_offsets_topic()
        return groups.partition_for(group_id)

    def on_offsets_marker(producer_id: int, offsets_partition: int, commit: bool) -> None:
        groups = apis.group_coordinator
        if groups is not None:
            groups.complete_txn_offsets(producer_id, offsets_partition, commit)

    return TransactionCoordinator(
        apis.config,
        _partition_writer(apis),
        broker_id=apis.broker_id,
        cluster=support is not None,
        next_producer_id=lambda: apis.producer_ids.next_id(),
        offsets_partition=offsets_partition,
        broker_clients=InterBrokerClients(
            f"broker-{apis.broker_id}-txn-markers",
            None if support is None else support.inter_broker_endpoint,
            None if support is None else support.channel_builder.client,
        ),
        on_offsets_marker=on_offsets_marker,
        time=time,
    )


def new_share_coordinator(apis: KafkaApis, time: Time = SYSTEM_TIME):
    """The broker's share coordinator, writing through a
    :class:`~broker_py.server.coordinator_partition_writer.CoordinatorPartitionWriter`;
    topic ids are checked against the metadata cache."""
    from broker_py.coordinator.share.share_coordinator import ShareCoordinator

    def topic_partitions(topic_id: uuid.UUID) -> int | None:
        topic = apis.metadata_cache.by_id(topic_id)
        return None if topic is None else topic.partitions

    return ShareCoordinator(
        apis.config,
        _partition_writer(apis),
        topic_partitions,
        cluster=apis.zk_support is not None,
        metadata_ready=lambda: apis.metadata_cache.knows_cluster,
        time=time,
    )


def new_share_partition_manager(apis: KafkaApis, time):
    """The share-partitions this broker leads (ShareFetch, ShareAcknowledge)."""
    from broker_py.server.share.share_partition_manager import SharePartitionManager

    return SharePartitionManager(
        apis.replica_manager,
        apis.metadata_cache,
        lambda: apis.share_state_persister,
        apis.group_configs.values,
        apis.config,
        time,
    )


def new_share_state_persister(apis: KafkaApis):
    """What this broker's share-partition leaders keep their state through: the share
    coordinator of each key, this broker's own or another's over the inter-broker
    listener."""
    from broker_py.common.internal_topics import SHARE_GROUP_STATE_TOPIC
    from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey
    from broker_py.server.share_state_persister import ShareStatePersister

    support = apis.zk_support

    def coordinator_of(key: SharePartitionKey) -> int | None:
        coordinator = apis.share_coordinator
        if coordinator is None:
            return None
        coordinator.ensure_topic()  # raises KafkaError while it is being created
        if support is None:
            return apis.broker_id
        state = apis.metadata_cache.partition_state(
            SHARE_GROUP_STATE_TOPIC, coordinator.partition_for(key)
        )
        return None if state is None else state.leader

    return ShareStatePersister(
        apis.broker_id,
        lambda: apis.share_coordinator,
        coordinator_of,
        InterBrokerClients(
            f"broker-{apis.broker_id}-share-state",
            None if support is None else support.inter_broker_endpoint,
            None if support is None else support.channel_builder.client,
        ),
        timeout_ms=apis.config["request.timeout.ms"],
    )


def _partition_writer(apis: KafkaApis) -> CoordinatorPartitionWriter:
    return CoordinatorPartitionWriter(
        apis.broker_id,
        apis.replica_manager,
        apis.metadata_cache,
        lambda name, partitions, configs: apis.topic_admin_manager.ensure_topic(
            name, partitions, configs
        ),
    )


def _broker_id_generator(config: BrokerConfig):
    from broker_py.server.zk_support import broker_id_generator

    return broker_id_generator(config)


class KafkaServer:
    def __init__(self, config: BrokerConfig, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.time = time
        # The file descriptor limit is raised and shared between storage and connections
        # before any log opens (broker_py/network/fd_budget.py).
        fd_budget.apply()
        # First: the log manager locks every log dir (LogDirInUseError if another broker
        # holds one) before this broker reads or writes anything in them.
        # Where I/O failures of a log dir are reported (KIP-112): it goes offline.
        self.log_dir_failure_channel = LogDirFailureChannel()
        self.log_manager = LogManager(
            config.log_dirs,
            self.log_dir_failure_channel,
            clock_ms=lambda: int(time.monotonic() * 1000),
        )
        try:
            self._load(config)
        except BaseException:
            self.log_manager.shutdown()
            raise

    def _load(self, config: BrokerConfig) -> None:
        """Reads the broker's state from its (locked) log dirs and wires its parts."""
        first_dir = config.log_dirs[0]
        self.zk_support = None
        self.broker_id = resolve_broker_id(
            config.broker_id,
            config.broker_id_given,
            stored_broker_id(config.log_dirs),
            _broker_id_generator(config)
            if config["zookeeper.connect"] and config["broker.id.generation.enable"]
            else None,
        )
        config.set_broker_id(self.broker_id)
        if config["zookeeper.connect"]:
            from broker_py.server.zk_support import ZkSupport

            self.zk_support = support = ZkSupport(config, self.time)
            cluster_id = check_log_dirs(config.log_dirs, self.broker_id, support.connect)
        else:
            cluster_id = check_log_dirs(config.log_dirs, self.broker_id)
            support = LocalSupport(config, first_dir, self.time)
        self.support = support
        # A broker alone keeps dynamic configs, SCRAM credentials and ACLs in its first log
        # dir; a cluster's brokers share them in ZooKeeper.
        if self.zk_support is None:
            dynamic_configs = DynamicBrokerConfigStore(first_dir, config)
            scram_credentials = ScramCredentialStore(first_dir)
        else:
            dynamic_configs = self.zk_support.dynamic_config_store(
                lambda r, c: self.apis.config_admin_manager.set_broker_configs(r, c)
            )
            scram_credentials = self.zk_support.scram_credential_store()
        dynamic_configs.load()
        # None without authorizer.class.name: every request is allowed, as in Kafka.
        authorizer = None
        if config["authorizer.class.name"]:
            if self.zk_support is None:
                authorizer = StandardAuthorizer(
                    first_dir, config["super.users"], config["allow.everyone.if.no.acl.found"]
                )
            else:
                authorizer = self.zk_support.acl_authorizer(
                    config["super.users"], config["allow.everyone.if.no.acl.found"]
                )
        replica_manager = ReplicaManager(
            self.broker_id,
            lambda topic: self.apis.log_config_manager.min_insync_replicas(topic),
            self.time,
            log_manager=self.log_manager,
        )
        # Replication throttles (KIP-73) from the broker's rates and the topics' configs.
        configs, clock_ms = support.metadata_cache.topic_configs, replica_manager.monotonic_ms
        replica_manager.leader_quota = quota_from_config(LEADER, config, clock_ms, configs)
        replica_manager.follower_quota = quota_from_config(FOLLOWER, config, clock_ms, configs)
        # Prometheus metrics (broker_py/server/metrics): None unless metrics.port is set.
        self.metrics = BrokerMetrics.from_config(config)
        # The schema registry (schema_registry_service.py): None unless configured.
        self.schema_registry = schema_registry_service.build(
            config, scram_credentials, self.metrics.registry if self.metrics else None
        )
        listeners = ListenerManager(
            config,
            scram_credentials,
            lambda: instrumented(self.metrics, throttled(self.apis, handlers.registry(self.apis))),
            lambda event: handlers.on_unsupported(self.apis, event),
            error_response,
        )
        log_configs = LogConfigManager(
            config, self.log_manager, replica_manager, support.metadata_cache
        )

        def get_log(topic: str, index: int):
            partition = replica_manager.get_partition(topic, index)
            return None if partition is None else partition.log

        replica_manager.log_dir_mover = self.log_dir_mover = LogDirMover(
            self.log_manager, get_log, log_configs.reopen_partition
        )
        self.apis = KafkaApis(
            config=config,
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            replica_manager=replica_manager,
            metadata_cache=support.metadata_cache,
            topic_admin_manager=TopicAdminManager(config, self.log_manager, log_configs, support),
            config_admin_manager=ConfigAdminManager(
                config, dynamic_configs, log_configs, DynamicListenerConfig(listeners), support
            ),
            replica_admin_manager=ReplicaAdminManager(support),
            log_config_manager=log_configs,
            authorizer=authorizer,
            fetch_sessions=FetchSessionCache(
                config["max.incremental.fetch.session.cache.slots"], clock=self.time.monotonic
            ),
            producer_ids=ProducerIdManager(first_dir)
            if self.zk_support is None
            else self.zk_support.producer_id_manager(),
            scram_credentials=scram_credentials,
            dynamic_configs=dynamic_configs,
            listeners=listeners,
            time=self.time,
            zk_support=self.zk_support,
        )
        # Client telemetry (KIP-714): CLIENT_METRICS resources kept beside the dynamic configs.
        self.apis.client_telemetry = ClientTelemetry(
            LocalConfigEntityStore(first_dir, "client-metrics.json")
            if self.zk_support is None
            else self.zk_support.client_metrics_store(),
            config["telemetry.max.bytes"],
            self.time.milliseconds,
        )
        self.apis.client_telemetry.start()
        # Client quotas: a broker alone's client-quotas.json, or ZooKeeper's /config/users
        # and /config/clients.
        self.apis.client_quotas = ClientQuotas(
            LocalConfigEntityStore(first_dir, "client-quotas.json")
            if self.zk_support is None
            else self.zk_support.client_quota_store(ALL_KEYS.__contains__),
            config,
        )
        self.apis.client_quotas.start()
        listeners.quotas.ip_connection_rate = self.apis.client_quotas.connection_rate
        # GROUP configs (Kafka 4): each group's overrides of the broker's group defaults.
        self.apis.group_configs = GroupConfigManager(
            LocalConfigEntityStore(first_dir, "group-configs.json")
            if self.zk_support is None
            else self.zk_support.group_config_store(),
            self.config,
        )
        self.apis.group_configs.start()
        support.on_topic_config.append(self._topic_config_changed)
        self.log_dir_failure_handler = LogDirFailureHandler(
            self.log_dir_failure_channel,
            replica_manager,
            self.log_manager,
            support,
            end_session=None if self.zk_support is None else self.zk_support.zk.close,
            metadata_dir=first_dir if self.zk_support is None else None,
        )
        if self.zk_support is not None:
            self.zk_support.attach(self.apis)
        self.log_tasks = LogTasks(config, self.apis, self.time)
        if self.zk_support is None:
            # A broker alone is its own controller: its partitions' logs open now (stray
            # logs, those the store does not account for, set aside first).
            support.apis = self.apis
            self.log_manager.set_aside_stray_logs(support.topics())
            support.start()

    @property
    def cluster_id(self) -> str:
        return self.apis.cluster_id

    @property
    def servers(self):
        return self.apis.listeners.servers

    @property
    def bound_port(self) -> int:
        return self.apis.listeners.bound_port

    def _topic_config_changed(self, topic: str) -> None:
        info = self.apis.metadata_cache.get(topic)
        if info is not None:
            self.apis.log_config_manager.apply_log_configs(info)

    def startup_logs(self) -> None:
        """Every partition's log is open once the broker is constructed (a broker alone) or
        opens as the controller assigns its partition (a cluster): nothing left to do."""

    async def start_coordinators(self) -> None:
        apis = self.apis
        apis.group_coordinator = new_group_coordinator(apis, self.time)
        apis.topic_admin_manager.on_topic_deleted.append(apis.group_coordinator.on_topic_deleted)
        await apis.group_coordinator.start()
        apis.transaction_coordinator = new_transaction_coordinator(apis)
        await apis.transaction_coordinator.start()
        apis.replica_manager.verify_transaction = apis.transaction_coordinator.verify_partition
        apis.share_coordinator = new_share_coordinator(apis, self.time)
        await apis.share_coordinator.start()
        apis.share_state_persister = new_share_state_persister(apis)
        from broker_py.server.share_group_state_store import ShareGroupStateStore

        state_store = ShareGroupStateStore(lambda: apis.share_state_persister)
        apis.group_coordinator.share_groups.set_state_store(lambda: state_store)
        apis.share_partition_manager = new_share_partition_manager(apis, self.time)
        support = self.zk_support
        if support is not None and self.config["transaction.partition.verification.enable"]:
            from broker_py.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager

            apis.replica_manager.txn_verifier = AddPartitionsToTxnManager(
                apis,
                support.inter_broker_endpoint,
                support.channel_builder.client,
                self.config["request.timeout.ms"],
            )

    async def start(self) -> None:
        self.log_dir_failure_handler.start()
        self.startup_logs()
        if self.zk_support is not None:
            # State this broker kept while it ran alone joins the cluster's, once.
            await import_local_state(self.config.log_dirs[0], self.apis)
            await self.apis.producer_ids.start()
        await self.start_coordinators()
        await self.apis.listeners.start(processing=self.zk_support is None)
        if self.zk_support is not None:
            listeners = self.apis.listeners
            advertised = [listeners.advertised_listener(_OnListener(s)) for s in listeners.servers]
            try:
                await self.zk_support.start(
                    self.zk_support.registration(advertised, self.config.security_protocol)
                )
            finally:
                listeners.enable_request_processing()
        self.log_tasks.start()
        if self.metrics is not None:
            await self.metrics.start(self)
        if self.schema_registry is not None:
            await self.schema_registry.start()

    async def stop(self) -> None:
        apis = self.apis
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.zk_support is not None and self.config["controlled.shutdown.enable"]:
            await self.zk_support.controlled_shutdown()
        await self.log_dir_failure_handler.stop()
        await self.log_dir_mover.stop()
        await self.log_tasks.stop()
        await apis.listeners.stop()
        if self.zk_support is not None:
            await self.zk_support.stop()
        else:
            self.support.stop()
        apis.replica_manager.shutdown()
        if apis.replica_manager.txn_verifier is not None:
            await apis.replica_manager.txn_verifier.close()
        if apis.share_partition_manager is not None:
            apis.share_partition_manager.close()
        if apis.share_state_persister is not None:
            await apis.share_state_persister.close()
        if apis.share_coordinator is not None:
            await apis.share_coordinator.stop()
        if apis.transaction_coordinator is not None:
            await apis.transaction_coordinator.stop()
        if apis.group_coordinator is not None:
            await apis.group_coordinator.stop()
        # Not fsynced one by one: the log manager's shutdown syncs each log dir before it
        # writes any clean-shutdown marker.
        for partition in apis.replica_manager.online_partitions():
            try:
                partition.log.producer_state.write_snapshot(sync=False)
            except OSError:
                log.exception("producer snapshot of %s", partition.name)
        self.log_manager.shutdown()
        log.info("broker %d stopped: every log closed", self.broker_id)


class _OnListener:
    """Stands for a connection accepted by ``server`` (what ``advertised_listener`` reads)."""

    def __init__(self, server) -> None:
        self.server = server
