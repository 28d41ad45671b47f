"""The controller's view of the cluster (Kafka's ``ControllerContext``), rebuilt from the
store when a broker becomes controller and changed only by the controller's thread.

Invariants:
- ``assignments`` holds every partition of every topic in ``topic_ids``; its replica
  list is in preference order and, during a reassignment, is the union of the origin
  and the target replicas (``adding`` ⊆ replicas, ``removing`` ⊆ replicas).
- ``leadership[tp]`` mirrors the partition's state node, with its partition epoch.
- ``states[tp]`` is the partition state machine's state of every known partition.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.controller.leader_and_isr import LeaderIsrAndControllerEpoch


class PartitionState(enum.Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


@dataclasses.dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @staticmethod
    def of(
        replicas: Iterable[int], adding: Iterable[int] = (), removing: Iterable[int] = ()
    ) -> ReplicaAssignment:
        return ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing))

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @staticmethod
    def for_reassignment(current: ReplicaAssignment, target: Iterable[int]) -> ReplicaAssignment:
        """Kafka's ``ReplicaAssignment.reassignTo``: the target first, then the origin
        replicas not in it; adding = target − origin, removing = origin − target."""
        target = tuple(dict.fromkeys(target))
        origin = current.origin_replicas
        full = target + tuple(r for r in origin if r not in target)
        return ReplicaAssignment(
            full,
            tuple(r for r in target if r not in origin),
            tuple(r for r in origin if r not in target),
        )


class ControllerContext:
    def __init__(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live_brokers: dict[int, BrokerRegistration] = {}
        self.shutting_down: set[int] = set()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.assignments: dict[TopicPartition, ReplicaAssignment] = {}
        self.leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        # a topic's config overrides, read from the store when an election first needs them
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.config_loader: Callable[[str], dict[str, str]] = lambda topic: {}
        self.topics_to_delete: set[str] = set()
        # topic -> (partition, broker) pairs whose StopReplica(delete) is not yet confirmed
        self.deletion_pending: dict[str, set[tuple[TopicPartition, int]]] = {}
        self.topics_ineligible_for_deletion: set[str] = set()
        # topic -> live brokers that have not yet acknowledged an UpdateMetadata with it
        self.metadata_pending: dict[str, set[int]] = defaultdict(set)
        # broker -> its replicas in a failed log dir (KIP-112), from its LeaderAndIsr
        # responses (KAFKA_STORAGE_ERROR); cleared when the broker fails or restarts
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}

    # ---- brokers ----

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def live_or_shutting_down(self) -> set[int]:
        return set(self.live_brokers)

    def live_not_shutting_down(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down

    def broker_epoch(self, broker_id: int) -> int:
        registration = self.live_brokers.get(broker_id)
        return -1 if registration is None else registration.epoch

    # ---- topics and partitions ----

    def all_topics(self) -> set[str]:
        return set(self.topic_ids)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker_id in a.replicas)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.leadership.items() if s.leader == broker_id)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp)
        return () if assignment is None else assignment.replicas

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Live, and the replica's log dir has not failed (Kafka's ``isReplicaOnline``)."""
        return self.is_live(broker_id) and tp not in self.replicas_on_offline_dirs.get(
            broker_id, ()
        )

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if not self.is_replica_online(r, tp)]

    def is_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def partitions_in_states(self, *states: PartitionState) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.states.items() if s in states)

    def reassignments_in_progress(self) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if a.is_being_reassigned)

    def add_topic(
        self, topic: str, topic_id: uuid.UUID, partitions: dict[int, ReplicaAssignment]
    ) -> None:
        self.topic_ids[topic] = topic_id
        for index, assignment in partitions.items():
            self.assignments[TopicPartition(topic, index)] = assignment

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        self.topic_configs.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.deletion_pending.pop(topic, None)
        self.metadata_pending.pop(topic, None)
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
            self.states.pop(tp, None)

    def unclean_election_enabled(self, topic: str, default: bool) -> bool:
        configs = self.topic_configs.get(topic)
        if configs is None:
            configs = self.topic_configs[topic] = self.config_loader(topic)
        value = configs.get("unclean.leader.election.enable")
        return default if value is None else value.strip().lower() == "true"
