"""A broker alone (no ``zookeeper.connect``): its own controller, over the controller
store kept in a local file, driven without threads or sockets.

It is the same :class:`~broker_py.controller.kafka_controller.KafkaController` a cluster
runs, over :class:`~broker_py.server.local_controller_store.LocalControllerStore`
(``<first log dir>/__logstore_metadata/cluster-metadata.json``, Kafka's znodes as JSON),
so topics are created, grown, deleted, elected and reassigned by one body of code in both
modes. Two things make it synchronous:

- the event manager runs each event on the caller's thread, with every event it leads
  to (store watches fire inside store writes), before ``put`` returns;
- the controller's requests to this broker are applied at once, as the LeaderAndIsr,
  UpdateMetadata and StopReplica handlers would apply them.

So a store write made by the admin path (a topic created, its configs changed, its
deletion queued) has taken full effect, logs opened or deleted and metadata updated,
when the write returns.

A data dir written before this store existed has only ``topics.json``
(:mod:`broker_py.server.topic_metadata_store`); its topics are taken over once, each
partition assigned to this broker.
"""

from __future__ import annotations

import collections
import logging
import os

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_request_batch import (
    ControllerRequest,
    LeaderAndIsrRequestData,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_store import BrokerRegistration, StoreChange, StoreChangeKind
from broker_py.controller.kafka_controller import ControllerConfig, KafkaController
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.server.handlers.controller import (
    apply_leader_and_isr,
    apply_stop_replica,
    apply_update_metadata,
    log_config,
)
from broker_py.server.local_controller_store import LocalControllerStore
from broker_py.server.metadata_cache import MetadataCache
from broker_py.server.topic_metadata_store import TopicMetadataStore
from broker_py.utils.metadata_file import METADATA_DIR
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.errors import KafkaError

log = logging.getLogger(__name__)

STORE_FILE = "cluster-metadata.json"


class InlineControllerEventManager:
    """Runs the controller on the caller's thread: an event put while none is running is
    processed at once, and so is every event it leads to, before ``put`` returns; an
    event put while one runs waits for it (it is queued, in order)."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self._queue: collections.deque[object] = collections.deque()
        self._running = False
        controller.enqueue = self.put

    def put(self, event: object) -> None:
        self._queue.append(event)
        if self._running:
            return
        self._running = True
        try:
            while self._queue:
                self.controller.process(self._queue.popleft())
        finally:
            self._running = False

    def close(self) -> None:
        self._queue.clear()


class LocalControllerChannel:
    """The controller's requests, applied to this broker at once (there is no other)."""

    def __init__(self, support: LocalSupport) -> None:
        self.support = support

    def add_broker(self, registration: BrokerRegistration) -> None:
        pass

    def remove_broker(self, broker_id: int) -> None:
        pass

    def send(self, broker_id: int, request: ControllerRequest, on_response=None) -> None:
        support = self.support
        apis = support.apis
        if broker_id != support.broker_id or apis is None:
            return
        if isinstance(request, LeaderAndIsrRequestData):
            support.load_topic_configs_now({s.partition.topic for s in request.partitions})
            opened = apis.replica_manager.open_new_logs_now(
                request, log_config(apis, request), support.open_threads
            )
            error, errors = apply_leader_and_isr(apis, request, support.log_failures, opened)
            response: object = {tp: int(error or e) for tp, e in errors.items()}
        elif isinstance(request, UpdateMetadataRequestData):
            support.load_topic_configs_now({s.partition.topic for s in request.partitions})
            response = int(apply_update_metadata(apis, request))
        else:
            error, errors = apply_stop_replica(apis, request)
            response = {tp: int(error or e) for tp, e in errors.items()}
        if on_response is not None:
            on_response(response)


def take_over_topics_json(store: LocalControllerStore, log_dir: str) -> int:
    """Writes the topics of ``log_dir``'s ``topics.json`` (ids, partition counts, configs;
    every partition on ``store``'s broker) into ``store``; how many there were."""
    old = TopicMetadataStore(log_dir).topics
    for name, info in sorted(old.items()):
        assignment = TopicAssignment(
            info.topic_id, {p: [store.broker_id] for p in range(info.partitions)}
        )
        store.create_topic(name, assignment, info.configs)
    if old:
        log.info(
            "took over %d topics from %s",
            len(old),
            os.path.join(log_dir, METADATA_DIR, "topics.json"),
        )
    return len(old)


class LocalSupport:
    local = True
    to_controller = None

    def __init__(self, config, log_dir: str, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.broker_id: int = config.broker_id
        self.time = time
        # logs a LeaderAndIsr opens at once (Kafka's recovery threads for all log dirs)
        self.open_threads: int = config["num.recovery.threads.per.data.dir"] * len(config.log_dirs)
        path = os.path.join(log_dir, METADATA_DIR, STORE_FILE)
        fresh = not os.path.exists(path)
        self.store = LocalControllerStore(self.broker_id, path=path, time=time)
        if fresh:
            take_over_topics_json(self.store, log_dir)
        self.metadata_cache = MetadataCache(self.broker_id, local_listeners=True)
        self.controller = KafkaController(
            self.broker_id,
            self.store,
            LocalControllerChannel(self),
            ControllerConfig.from_broker_config(config),
            time,
            unclean_default=lambda: bool(config["unclean.leader.election.enable"]),
        )
        self.event_manager = InlineControllerEventManager(self.controller)
        self.apis = None  # KafkaApis, set once the broker is wired
        self.on_topic_config: list = []  # called with a topic whose configs changed
        # (topic, partition) -> why its log could not be opened (the last LeaderAndIsr)
        self.log_failures: dict[tuple[str, int], KafkaError] = {}
        self.broker_epoch = -1

    # ---- lifecycle ----

    def topics(self) -> dict:
        """Every topic of the store as :class:`TopicInfo` (for setting stray logs aside)."""
        from broker_py.common.topic import TopicInfo

        assignments = self.store.topic_assignments(self.store.all_topics())
        return {t: TopicInfo(t, a.topic_id, len(a.partitions), {}) for t, a in assignments.items()}

    def start(self) -> None:
        """Registers this broker and becomes its controller: every partition's log opens
        and is led. A log that cannot be opened stops startup (its error is raised)."""
        listeners = self.config["advertised.listeners"]
        endpoints = [
            EndPoint(lst.name, lst.host, lst.port, self.config.security_protocol(lst.name))
            for lst in listeners
        ]
        self.store.watch(self._on_change)
        self.broker_epoch = self.store.register_broker(
            BrokerInfo(
                self.broker_id,
                endpoints,
                self.config["broker.rack"],
                timestamp_ms=self.time.milliseconds(),
            )
        )
        self.log_failures.clear()
        self.event_manager.put(ev.Startup())
        if self.log_failures:
            raise next(iter(self.log_failures.values()))

    def stop(self) -> None:
        self.event_manager.close()
        self.store.unwatch()

    def _on_change(self, change: StoreChange) -> None:
        event = ev.from_store_change(change)
        if event is not None:
            self.event_manager.put(event)
        if change.kind is StoreChangeKind.TOPIC_CONFIG and change.name is not None:
            self.metadata_cache.set_topic_configs(
                change.name, self.store.topic_configs(change.name)
            )
            for callback in self.on_topic_config:
                callback(change.name)

    # ---- what the admin path asks of either kind of support ----

    @property
    def is_controller(self) -> bool:
        return self.controller.active

    def load_topic_configs_now(self, topics) -> None:
        for topic in topics:
            if topic not in self.metadata_cache.topic_configs:
                self.metadata_cache.set_topic_configs(topic, self.store.topic_configs(topic))

    async def load_topic_configs(self, topics) -> None:
        self.load_topic_configs_now(topics)

    async def store_call(self, fn, *args):
        return fn(*args)

    def ask_controller_now(self, make_event):
        """Runs the event; its reply's arguments (None if it did not reply at once)."""
        replies: list[tuple] = []
        self.event_manager.put(make_event(lambda *args: replies.append(args)))
        return replies[0] if replies else None

    async def ask_controller(self, make_event, timeout_ms: int):
        reply = self.ask_controller_now(make_event)
        if reply is None:
            raise TimeoutError()
        return reply

    def topic_partition_failed(self, tp: TopicPartition) -> KafkaError | None:
        return self.log_failures.get((tp.topic, tp.partition))
