"""What the controller reads and writes of the cluster's metadata (the part of Kafka's
``KafkaZkClient`` the controller and the admin paths use), as one interface with two
implementations: ZooKeeper (:class:`broker_py.zk.zk_controller_store.ZkControllerStore`)
for a cluster, and local files
(:class:`broker_py.server.local_controller_store.LocalControllerStore`) for a single broker,
which is also the in-memory stand-in of unit tests.

Calls block; the controller makes them on its own thread, one event at a time.

Invariants every implementation keeps:
- Writes named ``controller_*`` take the controller's ``epoch_zk_version`` and change
  nothing, raising :class:`ControllerMovedError`, when ``/controller_epoch`` has moved
  past it (a zombie controller is fenced).
- ``controller_update_partition_states`` writes each state only if that partition's epoch (the
  state node's zkVersion) is still ``state.partition_epoch``; the result per partition is
  the new partition epoch, or :class:`PartitionEpochMismatch` naming the current one.
- Reads of partition states carry their partition epoch.
- ``watch`` callbacks only report *what* changed (a :class:`StoreChange`); they run on
  the store's own thread and must hand the change on without blocking.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo
from broker_py.controller.leader_and_isr import LeaderIsrAndControllerEpoch
from broker_py.controller.topic_assignment import TopicAssignment
from logstore.protocol.errors import KafkaException

__all__ = [
    "BrokerIdInUseError",
    "BrokerRegistration",
    "ControllerEpoch",
    "ControllerMovedError",
    "ControllerStore",
    "PartitionEpochMismatch",
    "StoreChange",
    "StoreChangeKind",
    "TopicExistsInStoreError",
]


class BrokerIdInUseError(KafkaException):
    """Another live broker holds ``/brokers/ids/N``."""


class ControllerMovedError(KafkaException):
    """A controller write found ``/controller_epoch`` changed: another controller exists."""


class TopicExistsInStoreError(KafkaException):
    """The topic (or a topic colliding with it) is already in the store."""


@dataclasses.dataclass(frozen=True)
class PartitionEpochMismatch:
    """A conditional partition-state write lost: the state moved to ``current_epoch``
    (-1: the state node is gone)."""

    current_epoch: int


@dataclasses.dataclass(frozen=True)
class ControllerEpoch:
    epoch: int
    zk_version: int


@dataclasses.dataclass(frozen=True)
class BrokerRegistration:
    info: BrokerInfo
    epoch: int  # the registration's czxid (KIP-380)

    @property
    def id(self) -> int:
        return self.info.id


class StoreChangeKind(enum.Enum):
    BROKERS = "brokers"  # /brokers/ids children (a broker came, went or re-registered)
    TOPICS = "topics"  # /brokers/topics children
    PARTITION_MODIFICATIONS = "partition_modifications"  # /brokers/topics/<name> data
    TOPIC_DELETIONS = "topic_deletions"  # /admin/delete_topics children
    REASSIGNMENT = "reassignment"  # /admin/reassign_partitions created or changed
    PREFERRED_ELECTION = "preferred_election"  # /admin/preferred_replica_election created
    CONTROLLER = "controller"  # /controller created, changed or deleted
    TOPIC_CONFIG = "topic_config"  # a /config/changes notification for topics/<name>
    LOG_DIR_EVENT = "log_dir_event"  # /log_dir_event_notification children (KIP-112)
    SESSION_EXPIRED = "session_expired"  # the session ended: ephemerals and watches are gone


@dataclasses.dataclass(frozen=True)
class StoreChange:
    kind: StoreChangeKind
    name: str | None = None  # the topic, for PARTITION_MODIFICATIONS and TOPIC_CONFIG


class ControllerStore(Protocol):
    # ---- membership and election ----
    def register_broker(self, info: BrokerInfo, wait_ms: int = 0) -> int:
        """Registers this broker; returns its broker epoch. BrokerIdInUseError if another
        live broker has the id (after waiting up to ``wait_ms`` for it to go away)."""

    def live_brokers(self) -> dict[int, BrokerRegistration]: ...

    def controller_id(self) -> int | None: ...

    def elect_controller(self, broker_id: int, timestamp_ms: int) -> ControllerEpoch:
        """Becomes the controller with a new epoch, or raises ControllerMovedError."""

    def resign_controller(self) -> None: ...

    # ---- reads ----
    def all_topics(self) -> set[str]: ...

    def topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Assignments of the named topics that exist."""

    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """States (with their partition epochs) of the named partitions that have one."""

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides ({} when none)."""

    def topics_to_delete(self) -> set[str]: ...

    def reassignment_request(self) -> dict[TopicPartition, list[int]]:
        """``/admin/reassign_partitions`` ({} when absent)."""

    def log_dir_event_notifications(self) -> dict[str, int]:
        """The pending log dir failure notifications: name -> the broker that wrote it."""

    def preferred_election_request(self) -> set[TopicPartition]:
        """``/admin/preferred_replica_election`` (empty when absent)."""

    # ---- controller writes (fenced by the controller epoch's zkVersion) ----
    def controller_create_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        """Creates the state nodes (and their parents, never the topic's node); result: the
        partition epoch (0), or a mismatch when the node already exists (-1: the topic is
        gone)."""

    def controller_update_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        """Writes each state if its partition epoch is still ``state.partition_epoch``."""

    def controller_set_topic_assignment(
        self, epoch_zk_version: int, topic: str, assignment: TopicAssignment
    ) -> None:
        """UnknownTopicOrPartitionError if the topic is gone."""

    def controller_delete_topic(self, epoch_zk_version: int, topic: str) -> None:
        """Removes the topic's assignment, partition states, config and deletion mark."""

    def controller_delete_reassignment_request(self, epoch_zk_version: int) -> None: ...

    def controller_delete_preferred_election_request(self, epoch_zk_version: int) -> None: ...

    def controller_delete_log_dir_event_notifications(
        self, epoch_zk_version: int, names: Iterable[str]
    ) -> None:
        """Deletes the named log dir event notifications (those already gone are fine)."""

    # ---- admin writes (from any broker; the controller acts on them through watch) ----
    def create_topic(
        self, topic: str, assignment: TopicAssignment, configs: Mapping[str, str]
    ) -> None:
        """Writes the config then the assignment. TopicExistsInStoreError if it exists or
        its name collides with a topic's once '.' and '_' are the same (Kafka's rule)."""

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        """Replaces a topic's assignment (new partitions, reassignment targets).
        UnknownTopicOrPartitionError if the topic does not exist."""

    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replaces the topic's config overrides and announces the change.
        UnknownTopicOrPartitionError if the topic does not exist."""

    def mark_topic_for_deletion(self, topic: str) -> None:
        """Idempotent. UnknownTopicOrPartitionError if the topic does not exist."""

    def request_reassignment(self, reassignment: Mapping[TopicPartition, list[int]]) -> None: ...

    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None: ...

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tells the controller that a log dir of ``broker_id`` failed (Kafka's
        ``propagateLogDirEvent``: a sequential ``/log_dir_event_notification`` node)."""

    # ---- changes ----
    def watch(self, on_change: Callable[[StoreChange], None]) -> None:
        """Reports every later change (and again after a reconnect, until unwatch); a later
        call replaces ``on_change``. What exists when watching starts is not reported (the
        controller reads it). SESSION_EXPIRED comes once a new session exists. The removal
        of a reassignment or preferred-election request is not reported."""

    def unwatch(self) -> None:
        """Stops reporting (and forgets the topics of ``watch_topic``)."""

    def watch_topic(self, topic: str) -> None:
        """Also report PARTITION_MODIFICATIONS of this topic, until it is deleted (nothing
        if it does not exist). RuntimeError before :meth:`watch`."""
