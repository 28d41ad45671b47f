"""What the controller reacts to (Kafka's ``ControllerEvent`` family), processed one at a
time in arrival order by :class:`~broker_py.controller.kafka_controller.KafkaController`.

Store watches produce the change events; API requests that need the controller carry a
``reply`` callable, called exactly once with the result (from the controller's thread;
the caller hands it to its own loop).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker_py.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker_py.controller.controller_store import StoreChange


@dataclasses.dataclass(frozen=True)
class Startup:
    """This broker started (or its session was renewed): try to become the controller."""


@dataclasses.dataclass(frozen=True)
class ControllerChange:
    """``/controller`` changed: resign if it no longer names us, elect if it is empty."""


@dataclasses.dataclass(frozen=True)
class Expire:
    """The store session expired: resign at once."""


@dataclasses.dataclass(frozen=True)
class BrokerChange:
    pass


@dataclasses.dataclass(frozen=True)
class TopicChange:
    pass


@dataclasses.dataclass(frozen=True)
class PartitionModifications:
    topic: str


@dataclasses.dataclass(frozen=True)
class TopicDeletion:
    pass


@dataclasses.dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable:
    topic: str


@dataclasses.dataclass(frozen=True)
class ZkPartitionReassignment:
    """``/admin/reassign_partitions`` appeared."""


@dataclasses.dataclass(frozen=True)
class ZkPreferredReplicaElection:
    """``/admin/preferred_replica_election`` appeared."""


@dataclasses.dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection:
    """The ``leader.imbalance.check.interval.seconds`` timer fired."""


@dataclasses.dataclass(frozen=True)
class TopicDeletionStopReplicaResponse:
    broker_id: int
    errors: dict[TopicPartition, int]  # partition -> error code of its StopReplica(delete)


@dataclasses.dataclass(frozen=True)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int
    reply: Callable[[int, set[TopicPartition]], None]  # (error code, partitions still led)


@dataclasses.dataclass(frozen=True)
class AlterPartitionItem:
    partition: TopicPartition
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclasses.dataclass(frozen=True)
class AlterPartitionResult:
    error: int
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclasses.dataclass(frozen=True)
class AlterPartition:
    broker_id: int
    broker_epoch: int
    items: list[AlterPartitionItem]
    # (top-level error, per-partition results)
    reply: Callable[[int, dict[TopicPartition, AlterPartitionResult]], None]


@dataclasses.dataclass(frozen=True)
class ApiPartitionReassignment:
    # partition -> target replicas, or None to cancel its reassignment
    reassignments: dict[TopicPartition, list[int] | None]
    reply: Callable[[int, dict[TopicPartition, tuple[int, str | None]]], None]


@dataclasses.dataclass(frozen=True)
class ListPartitionReassignments:
    partitions: set[TopicPartition] | None  # None: every reassignment in progress
    reply: Callable[[int, dict[TopicPartition, tuple[list[int], list[int], list[int]]]], None]


@dataclasses.dataclass(frozen=True)
class ReplicaLeaderElection:
    """ElectLeaders (43) and the admin node: ``partitions`` None means every partition."""

    partitions: set[TopicPartition] | None
    unclean: bool
    reply: Callable[[dict[TopicPartition, tuple[int, str | None]]], None] | None = None


@dataclasses.dataclass(frozen=True)
class CreateTopics:
    """Wait until the named topics' partitions are online and every live broker has
    acknowledged UpdateMetadata carrying them (the znodes are written by the admin path)."""

    topics: set[str]
    reply: Callable[[set[str]], None]  # topics that are ready


@dataclasses.dataclass(frozen=True)
class RequestResponse:
    """A controller request's response arrived (for requests sent with a follow-up)."""

    then: Callable[[], Any]


@dataclasses.dataclass(frozen=True)
class LogDirEventNotification:
    """``/log_dir_event_notification`` changed: a broker's log dir failed (KIP-112)."""


@dataclasses.dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    """A broker answered a LeaderAndIsr: KAFKA_STORAGE_ERROR marks a replica offline."""

    broker_id: int
    broker_epoch: int  # the epoch the request was sent to
    errors: dict[TopicPartition, int]


@dataclasses.dataclass(frozen=True)
class UpdateMetadataResponseReceived:
    broker_id: int
    topics: frozenset[str]
    error: int


def from_store_change(change: StoreChange) -> object | None:
    """The controller event for a store watch's :class:`StoreChange` (None: not the
    controller's business)."""
    from broker_py.controller.controller_store import StoreChangeKind as K

    kind = change.kind
    if kind is K.SESSION_EXPIRED:
        return Expire()
    if kind is K.CONTROLLER:
        return ControllerChange()
    if kind is K.BROKERS:
        return BrokerChange()
    if kind is K.TOPICS:
        return TopicChange()
    if kind is K.PARTITION_MODIFICATIONS and change.name is not None:
        return PartitionModifications(change.name)
    if kind is K.TOPIC_DELETIONS:
        return TopicDeletion()
    if kind is K.REASSIGNMENT:
        return ZkPartitionReassignment()
    if kind is K.PREFERRED_ELECTION:
        return ZkPreferredReplicaElection()
    if kind is K.LOG_DIR_EVENT:
        return LogDirEventNotification()
    if kind is K.TOPIC_CONFIG and change.name is not None:
        return TopicUncleanLeaderElectionEnable(change.name)
    return None
