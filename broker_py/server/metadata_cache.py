"""What this broker knows of the cluster's metadata, the only source of Metadata,
DescribeCluster and FindCoordinator answers (Kafka's ``MetadataCache``).

A broker alone is its own controller: topics (names, ids, partition counts, config
overrides) come from its local store (:mod:`broker_py.controller.topic_metadata`),
and each partition's leader, leader epoch, replicas and ISR from the partition this
broker holds. The only live broker is this one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

from broker_py.controller.topic_metadata import TopicInfo, TopicMetadataStore
from broker_py.replication.replica_manager import ReplicaManager


@dataclasses.dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Node:
    """A live broker as Metadata and DescribeCluster show it, for one listener."""

    id: int
    host: str
    port: int
    rack: str | None = None


class MetadataCache:
    def __init__(self, broker_id: int, store: TopicMetadataStore, replica_manager: ReplicaManager) -> None:
        self.broker_id = broker_id
        self._store = store
        self._replica_manager = replica_manager

    @property
    def controller_id(self) -> int:
        return self.broker_id

    def alive_broker_ids(self) -> list[int]:
        return [self.broker_id]

    def alive_nodes(self, listener) -> list[Node]:
        """Every live broker at ``listener`` (the advertised listener the request came on)."""
        return [Node(self.broker_id, listener.host, listener.port, None)]

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self._store.topics

    def get(self, name: str) -> TopicInfo | None:
        return self._store.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._store.by_id(topic_id)

    def contains(self, name: str) -> bool:
        return self._store.get(name) is not None

    def select(self, names: Iterable[str] | None = None) -> list[TopicInfo]:
        """The named topics that exist (every topic for None), in the order asked."""
        if names is None:
            return list(self._store.topics.values())
        return [t for n in names if (t := self._store.get(n)) is not None]

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        """Leader, epoch, replicas and ISR of a partition (None: not held here)."""
        partition = self._replica_manager.get_partition(topic, index)
        if partition is None:
            return None
        return PartitionState(partition.leader_id, partition.leader_epoch, list(partition.assigned_replicas), sorted(partition.isr))
