"""A simulated cluster for controller tests: brokers as store sessions over one
:class:`LocalControllerStore` (the in-memory ZooKeeper stand-in), a
:class:`KafkaController` per live broker, and simulated brokers that apply the
controller's requests as the real ones do (stale controller epochs and leader epochs
ignored). Everything runs on the test's thread, deterministically: events queue up and
:meth:`SimCluster.drain` processes them, delivering requests and their responses."""

from __future__ import annotations

import collections
import dataclasses

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_request_batch import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.controller.kafka_controller import ControllerConfig, KafkaController
from broker_py.controller.replica_assignment import BrokerMetadata, assign_replicas
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.server.local_controller_store import LocalControllerStore
from broker_py.utils.time import MockTime
from broker_py.zk.zk_data import random_uuid


@dataclasses.dataclass
class SimBroker:
    """What a broker believes after the controller's requests."""

    id: int
    controller_epoch: int = -1
    leaders: dict[TopicPartition, tuple[int, int]] = dataclasses.field(
        default_factory=dict
    )  # tp -> (leader, epoch)
    deleted: set[TopicPartition] = dataclasses.field(default_factory=set)
    metadata_controller: int = -1
    # replicas in a failed log dir: LeaderAndIsr answers KAFKA_STORAGE_ERROR for them
    # while they name the topic id the replica had when its dir failed (Kafka 3.9's
    # ReplicaManager: a topic deleted and created again under the same name gets a new
    # id, and its replica is created afresh in a good dir)
    offline: set[TopicPartition] = dataclasses.field(default_factory=set)
    offline_topic_ids: dict[TopicPartition, object] = dataclasses.field(default_factory=dict)
    topic_ids: dict[str, object] = dataclasses.field(default_factory=dict)
    # the offline replicas each UpdateMetadata named, by partition (the last one)
    metadata_offline: dict[TopicPartition, tuple[int, ...]] = dataclasses.field(
        default_factory=dict
    )

    def apply(self, request) -> object:
        if request.controller_epoch < self.controller_epoch:
            return 11 if isinstance(request, UpdateMetadataRequestData) else {}
        self.controller_epoch = request.controller_epoch
        if isinstance(request, LeaderAndIsrRequestData):
            out = {}
            for s in request.partitions:
                topic_id = request.topic_ids.get(s.partition.topic)
                if s.partition in self.offline:
                    if self.offline_topic_ids.get(s.partition) in (None, topic_id):
                        out[s.partition] = 56  # KAFKA_STORAGE_ERROR
                        continue
                    self.offline.discard(s.partition)  # a new topic of the same name
                    self.offline_topic_ids.pop(s.partition, None)
                if topic_id is not None:
                    self.topic_ids[s.partition.topic] = topic_id
                held = self.leaders.get(s.partition)
                if held is None or s.leader_epoch > held[1] or s.leader_epoch == held[1]:
                    self.leaders[s.partition] = (s.leader, s.leader_epoch)
                    self.deleted.discard(s.partition)
                out[s.partition] = 0
            return out
        if isinstance(request, StopReplicaRequestData):
            out = {}
            for s in request.partitions:
                if s.partition in self.offline:
                    out[s.partition] = 56  # KAFKA_STORAGE_ERROR, as the real broker
                    continue
                if s.delete:
                    self.leaders.pop(s.partition, None)
                    self.deleted.add(s.partition)
                elif s.partition in self.leaders:
                    leader, epoch = self.leaders[s.partition]
                    self.leaders[s.partition] = (-1 if leader == self.id else leader, epoch)
                out[s.partition] = 0
            return out
        self.metadata_controller = request.controller_id
        for s in request.partitions:
            self.metadata_offline[s.partition] = s.offline_replicas
        return 0


class RecordingChannel:
    def __init__(self, cluster: SimCluster, sender: int) -> None:
        self.cluster = cluster
        self.sender = sender
        self.brokers: set[int] = set()

    def add_broker(self, registration: BrokerRegistration) -> None:
        self.brokers.add(registration.id)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.discard(broker_id)

    def send(self, broker_id, request, on_response=None) -> None:
        self.cluster.outbox.append((self.sender, broker_id, request, on_response))
        self.cluster.sent.append((broker_id, request))


class SimCluster:
    def __init__(
        self,
        n: int = 3,
        config: ControllerConfig | None = None,
        racks: dict[int, str] | None = None,
    ) -> None:
        self.time = MockTime()
        self.config = config or ControllerConfig(auto_leader_rebalance_enable=False)
        self.racks = racks or {}
        self.admin = LocalControllerStore(-1, time=self.time)
        self.sessions: dict[int, LocalControllerStore] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.brokers: dict[int, SimBroker] = {}
        self.events: collections.deque = collections.deque()
        self.outbox: collections.deque = collections.deque()
        self.sent: list = []
        # (old state or None, new state, partition) of every partition-state write a
        # controller made, in order.
        self.writes: list = []
        self.replies: list = []
        for b in range(1, n + 1):
            self.start(b)
        self.drain()

    # ---- processes ----

    def start(self, b: int) -> None:
        store = self.admin.session(b)
        store.register_broker(
            BrokerInfo(
                b,
                [EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT")],
                self.racks.get(b),
                timestamp_ms=0,
            )
        )
        update = store.controller_update_partition_states

        def recorded(epoch_zk_version, states, update=update, store=store):
            before = store.partition_states(list(states))
            result = update(epoch_zk_version, states)
            for tp, outcome in result.items():
                if isinstance(outcome, int):
                    self.writes.append((before.get(tp), states[tp], tp))
            return result

        store.controller_update_partition_states = recorded
        controller = KafkaController(b, store, RecordingChannel(self, b), self.config, self.time)
        controller.enqueue = lambda event, b=b: self.events.append((b, event))
        store.watch(lambda change, b=b: self._watched(b, change))
        self.sessions[b] = store
        self.controllers[b] = controller
        self.brokers[b] = SimBroker(b)
        self.events.append((b, ev.Startup()))

    def _watched(self, b: int, change) -> None:
        event = ev.from_store_change(change)
        if event is not None:
            self.events.append((b, event))

    def kill(self, b: int) -> None:
        """A hard kill: the process is gone and its session expires."""
        store = self.sessions.pop(b)
        self.controllers.pop(b)
        self.brokers.pop(b)
        store.unwatch()
        store.expire_session()

    def fail_log_dir(self, b: int, partitions) -> None:
        """Broker ``b``'s log dir holding ``partitions`` failed: it answers
        KAFKA_STORAGE_ERROR for them and writes a log dir event notification."""
        broker = self.brokers[b]
        broker.offline |= set(partitions)
        for tp in partitions:
            broker.offline_topic_ids[tp] = broker.topic_ids.get(tp.topic)
            # An offline replica neither leads nor follows (Kafka's handleLogDirFailure).
            broker.leaders.pop(tp, None)
        self.sessions[b].propagate_log_dir_event(b)
        self.drain()

    def live(self) -> list[int]:
        return sorted(self.controllers)

    def active(self) -> KafkaController | None:
        return next((c for c in self.controllers.values() if c.active), None)

    # ---- running ----

    def drain(self, limit: int = 10_000) -> None:
        for _ in range(limit):
            if self.events:
                b, event = self.events.popleft()
                controller = self.controllers.get(b)
                if controller is not None:
                    controller.process(event)
                continue
            if self.outbox:
                sender, dest, request, on_response = self.outbox.popleft()
                broker = self.brokers.get(dest)
                if broker is None or sender not in self.controllers:
                    continue
                response = broker.apply(request)
                if on_response is not None:
                    on_response(response)
                continue
            return
        raise AssertionError("the simulated cluster did not settle")

    def submit(self, event) -> None:
        controller = self.active()
        assert controller is not None, "no active controller"
        self.events.append((controller.broker_id, event))
        self.drain()

    # ---- admin ----

    def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict | None = None, start: int = 0
    ) -> None:
        brokers = [BrokerMetadata(b, self.racks.get(b)) for b in self.live()]
        assignment = assign_replicas(brokers, partitions, rf, fixed_start_index=start)
        self.admin.create_topic(name, TopicAssignment(random_uuid(), assignment), configs or {})
        self.drain()

    def state(self, topic: str, partition: int):
        return self.admin.partition_states([TopicPartition(topic, partition)]).get(
            TopicPartition(topic, partition)
        )

    def leader(self, topic: str, partition: int) -> int:
        s = self.state(topic, partition)
        return -1 if s is None else s.leader
