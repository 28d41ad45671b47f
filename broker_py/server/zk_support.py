"""A broker's part in a cluster coordinated through ZooKeeper (Kafka's ``ZkSupport`` with
the ZooKeeper half of ``KafkaServer.startup``): the ZooKeeper client, the broker's
registration, the controller it may become, its channels to the other brokers and to the
controller, and the metadata cache the controller feeds.

Threads: kazoo's callbacks only hand work on (controller events to the controller's queue,
the rest to the event loop with ``call_soon_threadsafe``); the controller runs on its
own thread; everything else runs on the event loop, blocking ZooKeeper calls through
``asyncio.to_thread``.

The cluster-wide state other than the controller's lives in ZooKeeper too, in Kafka's
layout, each store keeping a cache current through Kafka's change notifications:
dynamic broker configs (``/config/brokers``), SCRAM credentials (``/config/users``) and
ACLs (``/kafka-acl``); they are built here, read whole at construction, and their
listener threads stop before the client closes.

Session states: SUSPENDED (the connection is lost, the session may live) and LOST (the
session expired) make the controller resign at once; it never acts while suspended.
Back to CONNECTED in the same session it runs the election again; after an expiry the
broker registers again first (a new broker epoch), then runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from broker_py.controller import controller_events as ev
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_channel_manager import ControllerChannelManager
from broker_py.controller.controller_event_manager import ControllerEventManager
from broker_py.controller.controller_request_batch import (
    ControllerRequest,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_requests import response_errors, to_wire
from broker_py.controller.controller_store import BrokerRegistration, StoreChange, StoreChangeKind
from broker_py.controller.kafka_controller import ControllerConfig, KafkaController
from broker_py.coordinator.transaction.producer_id_manager import ZkProducerIdManager
from broker_py.network.network_client import InterBrokerChannelBuilder
from broker_py.replication.alter_partition_manager import AlterPartitionManager
from broker_py.replication.leader_end_point import FetchConfig
from broker_py.replication.replica_fetcher_manager import ReplicaFetcherManager
from broker_py.server.broker_to_controller_channel import BrokerToControllerChannelManager
from broker_py.server.metadata_cache import MetadataCache
from broker_py.utils.time import SYSTEM_TIME, Time
from broker_py.zk.acl_authorizer import AclAuthorizer
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener
from broker_py.zk.zk_client_quota_store import ZkClientQuotaStore
from broker_py.zk.zk_config_entity_store import CLIENT_METRICS, GROUPS, ZkConfigEntityStore
from broker_py.zk.zk_controller_store import ZkControllerStore
from broker_py.zk.zk_dynamic_broker_config_store import ZkDynamicBrokerConfigStore
from broker_py.zk.zk_scram_credential_store import ZkScramCredentialStore
from broker_py.zk.zk_session import CONNECTED, LOST, SUSPENDED
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.controller import ControlledShutdownRequest

log = logging.getLogger(__name__)


class NetworkControllerChannel:
    """The controller's :class:`ControllerChannel` over the network: calls come from the
    controller's thread and are carried to the event loop's channel manager."""

    def __init__(self, support: ZkSupport) -> None:
        self.support = support
        # The last UpdateMetadata built: the batch sends the same partition states and
        # brokers to every broker, each with its own broker epoch.
        self._metadata: tuple[object, object, int, object] | None = None

    def _call(self, fn: Callable, *args: Any) -> None:
        self.support.loop.call_soon_threadsafe(fn, *args)

    def add_broker(self, registration: BrokerRegistration) -> None:
        endpoint = registration_endpoint(registration, self.support.channel_builder.listener_name)
        if endpoint is None:
            log.error(
                "broker %d has no %s endpoint: the controller cannot reach it",
                registration.id,
                self.support.channel_builder.listener_name,
            )
            return
        self._call(
            self.support.channel_manager.add_broker,
            registration.id,
            (endpoint.host or "127.0.0.1", endpoint.port),
        )

    def remove_broker(self, broker_id: int) -> None:
        self._call(self.support.channel_manager.remove_broker, broker_id)

    def _to_wire(self, request: ControllerRequest):
        if isinstance(request, UpdateMetadataRequestData):
            cached = self._metadata
            if (
                cached is not None
                and cached[0] is request.partitions
                and cached[1] is request.live_brokers
                and cached[2] == request.controller_epoch
            ):
                return ApiKey.UPDATE_METADATA, dataclasses.replace(
                    cached[3], broker_epoch=request.broker_epoch
                )
            api_key, message = to_wire(request)
            self._metadata = (
                request.partitions,
                request.live_brokers,
                request.controller_epoch,
                message,
            )
            return api_key, message
        return to_wire(request, self.support.channel_builder.listener_name)

    def send(
        self,
        broker_id: int,
        request: ControllerRequest,
        on_response: Callable[[object], None] | None = None,
    ) -> None:
        api_key, message = self._to_wire(request)
        callback = None
        if on_response is not None:
            callback = lambda response: on_response(response_errors(api_key, response, request))  # noqa: E731
        self._call(self.support.channel_manager.send, broker_id, api_key, message, callback)


def registration_endpoint(registration: BrokerRegistration, listener_name: str) -> EndPoint | None:
    return next((e for e in registration.info.endpoints if e.listener_name == listener_name), None)


def broker_id_generator(config) -> Callable[[], int]:
    """Generates a broker id as Kafka does: ``reserved.broker.max.id`` plus a sequence
    number from ``/brokers/seqid`` (on a short session of its own, before the broker's)."""

    def generate() -> int:
        zk = KafkaZkClient(
            config["zookeeper.connect"],
            config["zookeeper.session.timeout.ms"],
            config["zookeeper.connection.timeout.ms"],
        )
        zk.start()
        try:
            broker_id = config["reserved.broker.max.id"] + zk.generate_broker_sequence_id()
        finally:
            zk.close()
        log.info("generated broker.id %d (broker.id.generation.enable)", broker_id)
        return broker_id

    return generate


class ZkSupport:
    def __init__(self, config, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.broker_id: int = config.broker_id
        self.time = time
        self.loop = asyncio.get_running_loop()
        self.zk = KafkaZkClient(
            config["zookeeper.connect"],
            config["zookeeper.session.timeout.ms"],
            config["zookeeper.connection.timeout.ms"],
        )
        self.store = ZkControllerStore(self.zk, self.broker_id, time=time)
        self.channel_builder = InterBrokerChannelBuilder(config)
        self.metadata_cache = MetadataCache(self.broker_id)
        self.broker_epoch = -1
        self.controller = KafkaController(
            self.broker_id,
            self.store,
            NetworkControllerChannel(self),
            ControllerConfig.from_broker_config(config),
            time,
            unclean_default=lambda: bool(config["unclean.leader.election.enable"]),
        )
        self.event_manager = ControllerEventManager(self.controller, time)
        self.channel_manager = ControllerChannelManager(
            self.broker_id,
            self.channel_builder.client,
            request_timeout_ms=config["controller.socket.timeout.ms"],
        )
        self.to_controller = BrokerToControllerChannelManager(
            self.broker_id,
            self._controller_endpoint,
            self.channel_builder.client,
            request_timeout_ms=config["request.timeout.ms"],
        )
        self._zk_state = CONNECTED
        self._tasks: set[asyncio.Task] = set()
        self.on_topic_config: list[
            Callable[[str], None]
        ] = []  # called after a topic's configs changed
        self._registration: BrokerInfo | None = None
        self.apis = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        self.replica_fetcher_manager: ReplicaFetcherManager | None = None
        # /config/changes for the user and broker config stores (the controller store
        # listens for topics itself); closed, with the rest of _closing, before the client.
        self._config_changes = ConfigChangeListener(self.zk, time=time)
        self._closing: list[Callable[[], None]] = [self._config_changes.close]

    # ---- startup (blocking parts run at construction, the rest in start) ----

    def connect(self, proposed_cluster_id: str) -> str:
        """Connects to ZooKeeper (blocking); returns the cluster id ``/cluster/id`` holds,
        writing ``proposed_cluster_id`` if none does."""
        self.zk.start()
        self.zk.add_state_listener(self._on_zk_state)
        return self.zk.create_or_get_cluster_id(proposed_cluster_id)

    def registration(self, advertised, protocol_of: Callable[[str], str]) -> BrokerInfo:
        endpoints = [
            EndPoint(listener.name, listener.host, listener.port, protocol_of(listener.name))
            for listener in advertised
        ]
        return BrokerInfo(
            self.broker_id,
            endpoints,
            self.config["broker.rack"],
            timestamp_ms=self.time.milliseconds(),
        )

    async def start(self, registration: BrokerInfo) -> None:
        """Registers the broker and starts the controller machinery (after the listeners
        are up, as the registration names their addresses)."""
        self._registration = registration
        await self.channel_manager.start()
        self.store.watch(self._on_store_change)
        # A crashed run of this broker may still hold the registration until its session
        # expires: wait that long (and a little) before calling the id taken.
        wait_ms = self.config["zookeeper.session.timeout.ms"] + 2000
        self.broker_epoch = await asyncio.to_thread(
            self.store.register_broker, registration, wait_ms
        )
        log.info(
            "registered broker %d in ZooKeeper (broker epoch %d)", self.broker_id, self.broker_epoch
        )
        self.event_manager.start()
        self.event_manager.put(ev.Startup())
        self._spawn(self._isr_shrink_loop())

    def attach(self, apis) -> None:
        """Wires the leader partitions' ISR proposals to the controller."""
        self.apis = apis
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id,
            lambda: self.broker_epoch,
            lambda topic: (
                i.topic_id
                if (i := self.metadata_cache.get(topic))
                else apis.replica_manager.topic_ids.get(topic)
            ),
            self.to_controller.send,
            self.config["request.timeout.ms"],
        )
        apis.replica_manager.alter_isr = self.alter_partition_manager.submit
        config = self.config
        self.replica_fetcher_manager = ReplicaFetcherManager(
            self.broker_id,
            apis.replica_manager,
            config["num.replica.fetchers"],
            lambda host, port, client_id: self.channel_builder.client(host, port, client_id),
            self._fetch_endpoint,
            FetchConfig(
                config["replica.fetch.wait.max.ms"],
                config["replica.fetch.min.bytes"],
                config["replica.fetch.response.max.bytes"],
                config["replica.fetch.max.bytes"],
                config["request.timeout.ms"],
            ),
            config["replica.fetch.backoff.ms"],
        )
        apis.replica_manager.replica_fetcher_manager = self.replica_fetcher_manager
        apis.replica_manager.partition_exists = lambda topic, index: (
            self.metadata_cache.partition_state(topic, index) is not None
        )
        apis.replica_manager.isr_eligible = lambda broker_id: (
            self.metadata_cache.alive_broker(broker_id) is not None
        )

    # ---- cluster-wide state other than the controller's (blocking: at construction) ----

    def dynamic_config_store(
        self, apply: Callable[[str, dict[str, str]], None]
    ) -> ZkDynamicBrokerConfigStore:
        """Dynamic broker configs in ``/config/brokers``; ``apply(resource, configs)`` runs
        on the event loop when the default's or this broker's change."""
        store = ZkDynamicBrokerConfigStore(self.zk, self.loop, self.config, apply)
        store.start(self._config_changes)
        return store

    def client_metrics_store(self) -> ZkConfigEntityStore:
        """CLIENT_METRICS resources in ``/config/client-metrics`` (started by its owner)."""
        store = ZkConfigEntityStore(self.zk, self.loop, CLIENT_METRICS, "client metrics resource")
        store.listen(self._config_changes)
        return store

    def group_config_store(self) -> ZkConfigEntityStore:
        """GROUP configs in ``/config/groups`` (started by its owner)."""
        store = ZkConfigEntityStore(self.zk, self.loop, GROUPS, "group config")
        store.listen(self._config_changes)
        return store

    def client_quota_store(self, keep: Callable[[str], bool]) -> ZkClientQuotaStore:
        """Client quotas in ``/config/users`` and ``/config/clients`` (started by its
        owner); ``keep`` picks the quota keys among a node's keys."""
        store = ZkClientQuotaStore(self.zk, self.loop, keep)
        store.listen(self._config_changes)
        return store

    def scram_credential_store(self) -> ZkScramCredentialStore:
        """SCRAM credentials in ``/config/users``."""
        store = ZkScramCredentialStore(self.zk, self.loop)
        store.start(self._config_changes)
        return store

    def acl_authorizer(self, super_users, allow_everyone_if_no_acl_found: bool) -> AclAuthorizer:
        """The ACL authorizer over ``/kafka-acl`` and ``/kafka-acl-extended``."""
        authorizer = AclAuthorizer(self.zk, self.loop, super_users, allow_everyone_if_no_acl_found)
        self._closing.append(authorizer.close)
        authorizer.start()
        return authorizer

    def producer_id_manager(self) -> ZkProducerIdManager:
        def claim() -> tuple[int, int]:
            block = self.zk.claim_producer_id_block(self.broker_id)
            log.info("claimed producer ids %d..%d", block.first_producer_id, block.last_producer_id)
            return block.first_producer_id, block.size

        return ZkProducerIdManager(claim)

    def inter_broker_endpoint(self, broker_id: int):
        """(host, port) of a live broker's inter-broker listener, from the metadata cache."""
        return self._fetch_endpoint(broker_id, None)

    def _fetch_endpoint(self, broker_id: int, registration: BrokerRegistration | None):
        """(host, port) of a leader's inter-broker listener: from the LeaderAndIsr that
        named it, else from the metadata cache."""
        listener = self.channel_builder.listener_name
        endpoint = (
            registration_endpoint(registration, listener) if registration is not None else None
        )
        if endpoint is None:
            endpoint = self.metadata_cache.endpoint(broker_id, listener)
        return None if endpoint is None else (endpoint.host or "127.0.0.1", endpoint.port)

    async def _isr_shrink_loop(self) -> None:
        """Every ``replica.lag.time.max.ms`` / 2: leaders propose dropping lagging followers."""
        max_lag_ms = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(max(max_lag_ms / 2, 1) / 1000)
            if self.apis is not None:
                try:
                    self.apis.replica_manager.maybe_shrink_isr(max_lag_ms)
                except Exception:
                    log.exception("ISR shrink check")

    # ---- callbacks from kazoo's threads ----

    def _on_zk_state(self, state: str) -> None:
        previous, self._zk_state = self._zk_state, state
        if state in (SUSPENDED, LOST):
            self.event_manager.put(ev.Expire())
        elif state == CONNECTED and previous == SUSPENDED:
            self.event_manager.put(ev.Startup())

    def _on_store_change(self, change: StoreChange) -> None:
        if change.kind is StoreChangeKind.SESSION_EXPIRED:
            self.loop.call_soon_threadsafe(self._spawn, self._register_again())
            return
        event = ev.from_store_change(change)
        if event is not None:
            self.event_manager.put(event)
        if change.kind is StoreChangeKind.TOPIC_CONFIG and change.name is not None:
            self.loop.call_soon_threadsafe(self._spawn, self.reload_topic_config(change.name))

    def _spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _register_again(self) -> None:
        """After a session expiry: register with the new session (a new broker epoch),
        then run the election."""
        assert self._registration is not None
        for attempt in range(60):
            try:
                self.broker_epoch = await asyncio.to_thread(
                    self.store.register_broker, self._registration
                )
                break
            except Exception as e:  # ZooKeeper not reachable yet, or our old node lingering
                log.warning(
                    "registering broker %d again failed (attempt %d): %s",
                    self.broker_id,
                    attempt + 1,
                    e,
                )
                await asyncio.sleep(1)
        log.info(
            "registered broker %d again after a session expiry (broker epoch %d)",
            self.broker_id,
            self.broker_epoch,
        )
        self.event_manager.put(ev.Startup())

    # ---- topic configs (every broker reads them from ZooKeeper) ----

    async def load_topic_configs(self, topics) -> None:
        missing = [t for t in topics if t not in self.metadata_cache.topic_configs]
        for topic in missing:
            configs = await asyncio.to_thread(self.store.topic_configs, topic)
            self.metadata_cache.set_topic_configs(topic, configs)

    async def reload_topic_config(self, topic: str) -> None:
        try:
            configs = await asyncio.to_thread(self.store.topic_configs, topic)
        except Exception as e:
            log.warning("reading the configs of %s failed: %s", topic, e)
            return
        self.metadata_cache.set_topic_configs(topic, configs)
        for callback in self.on_topic_config:
            callback(topic)

    # ---- the controller, seen from this broker ----

    def _controller_endpoint(self):
        controller_id = self.metadata_cache.controller_id
        if controller_id < 0:
            controller_id = (
                self.controller.active_controller_id
                if self.controller.active_controller_id is not None
                else -1
            )
        if controller_id < 0:
            return None
        endpoint = self.metadata_cache.endpoint(controller_id, self.channel_builder.listener_name)
        if endpoint is None and controller_id == self.broker_id and self._registration is not None:
            endpoint = next(
                (
                    e
                    for e in self._registration.endpoints
                    if e.listener_name == self.channel_builder.listener_name
                ),
                None,
            )
        return None if endpoint is None else (endpoint.host or "127.0.0.1", endpoint.port)

    local = False

    @property
    def is_controller(self) -> bool:
        return self.controller.active

    async def store_call(self, fn, *args):
        """A blocking store call, off the event loop."""
        return await asyncio.to_thread(fn, *args)

    async def ask_controller(
        self, make_event: Callable[[Callable[..., None]], object], timeout_ms: int
    ):
        """Puts the event ``make_event(reply)`` in the controller's queue and waits for its
        reply (the reply's arguments, a tuple), at most ``timeout_ms``."""
        future = self.loop.create_future()

        def reply(*args) -> None:
            self.loop.call_soon_threadsafe(lambda: future.done() or future.set_result(args))

        self.event_manager.put(make_event(reply))
        return await asyncio.wait_for(future, timeout_ms / 1000)

    async def controlled_shutdown(self) -> bool:
        """Asks the controller to move this broker's leaderships away (Kafka's
        ``KafkaServer.controlledShutdown``): ``controlled.shutdown.max.retries`` attempts
        (Kafka counts attempts by that name), ``controlled.shutdown.retry.backoff.ms``
        apart. An attempt is one ControlledShutdown to the controller this broker knows,
        bounded by ``request.timeout.ms``; it fails when no controller is known, the
        connection fails, or the answer is an error (NOT_CONTROLLER once the controller's
        ZooKeeper session is gone) or names partitions still led. So the whole takes at
        most retries x request timeout + (retries - 1) x backoff. Every attempt and the
        giving-up are logged. True once no leadership remains here."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_ms = self.config["controlled.shutdown.retry.backoff.ms"]
        log.info(
            "starting controlled shutdown (at most %d attempts, %d ms apart)", retries, backoff_ms
        )
        for attempt in range(1, retries + 1):
            try:
                response = await self.to_controller.send_once(
                    ApiKey.CONTROLLED_SHUTDOWN,
                    ControlledShutdownRequest(
                        broker_id=self.broker_id, broker_epoch=self.broker_epoch
                    ),
                )
            except Exception as e:
                log.warning("controlled shutdown attempt %d of %d failed: %s", attempt, retries, e)
            else:
                if response.error_code == ErrorCode.NONE and not response.remaining_partitions:
                    log.info(
                        "controlled shutdown of broker %d done (attempt %d of %d)",
                        self.broker_id,
                        attempt,
                        retries,
                    )
                    return True
                error = response.error_code
                log.warning(
                    "controlled shutdown attempt %d of %d failed: %s",
                    attempt,
                    retries,
                    _error_name(error)
                    if error != ErrorCode.NONE
                    else f"{len(response.remaining_partitions)} partitions still led here",
                )
            if attempt < retries:
                log.info(
                    "retrying controlled shutdown in %d ms (%d retries remaining)",
                    backoff_ms,
                    retries - attempt,
                )
                await asyncio.sleep(backoff_ms / 1000)
        log.warning(
            "controlled shutdown failed after %d attempts; shutting down uncleanly", retries
        )
        return False

    # ---- shutdown ----

    async def stop(self) -> None:
        if self.replica_fetcher_manager is not None:
            await self.replica_fetcher_manager.shutdown()
        self.event_manager.close()
        await self.to_controller.close()
        await self.channel_manager.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.to_thread(self.store.unwatch)
        for close in self._closing:
            close()
        await asyncio.to_thread(self.zk.close)


def _error_name(code: int) -> str:
    """``code``'s name (NOT_CONTROLLER), or the number when it has none."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
