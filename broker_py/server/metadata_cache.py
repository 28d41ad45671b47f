"""What this broker knows of the cluster's metadata (Kafka's ``MetadataCache``): the live
brokers, the controller and every partition's leadership, exactly as the last
UpdateMetadata from the controller said; the only source of Metadata, DescribeCluster
and FindCoordinator answers. A broker alone is its own controller, and its requests to
itself arrive without a socket (:mod:`broker_py.server.local_support`). Topic configs come
from the controller's store (``/config/topics`` in a cluster), through ``topic_configs``.

Invariants:
- Only :meth:`MetadataCache.update_metadata` changes brokers and partitions, and the
  request handler refuses UpdateMetadata from an older controller epoch, so what this
  cache serves never goes back to an older controller's view.
- A partition state with leader -2 (``LEADER_DURING_DELETE``) removes the partition; a
  topic with no partition left is gone.
- ``topics`` maps a name to a :class:`TopicInfo` whose ``partitions`` is the number of
  partitions known (indices 0..n-1) and whose ``configs`` is the topic's override dict.
- A broker alone (``local_listeners``) shows itself at the listener each request came on
  (its bound port, when ``listeners`` says port 0).
- ``knows_cluster`` once an UpdateMetadata listed this broker alive: until then (a
  cluster broker just started) the cache knows no broker, and a Metadata answer with no
  brokers makes some clients (librdkafka) drop every broker they knew, their
  coordinators included; :meth:`wait_for_cluster` holds such answers back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterable

from broker_py.common.topic import TopicInfo
from broker_py.controller.controller_request_batch import (
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.controller.leader_and_isr import LEADER_DURING_DELETE


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
    def __init__(self, broker_id: int, local_listeners: bool = False) -> None:
        self.broker_id = broker_id
        self.local_listeners = local_listeners
        self._controller_id: int | None = None
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerRegistration] = {}
        self._partitions: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self._topics: dict[str, TopicInfo] | None = None
        self._knows_cluster = asyncio.Event()

    # ---- updates ----

    def update_metadata(self, request: UpdateMetadataRequestData) -> set[str]:
        """Applies the controller's view; returns the topics that disappeared."""
        self._controller_id = request.controller_id
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        self._brokers = {r.id: r for r in request.live_brokers}
        if self.broker_id in self._brokers:
            self._knows_cluster.set()
        touched: set[str] = set()
        for state in request.partitions:
            topic, index = state.partition
            touched.add(topic)
            if state.leader == LEADER_DURING_DELETE:
                self._partitions.get(topic, {}).pop(index, None)
                continue
            self._partitions.setdefault(topic, {})[index] = state
            topic_id = request.topic_ids.get(topic)
            if topic_id is not None:
                self._topic_ids[topic] = topic_id
        gone = {t for t in touched if not self._partitions.get(t)}
        for topic in gone:
            self._partitions.pop(topic, None)
            self._topic_ids.pop(topic, None)
        self._topics = None
        return gone

    @property
    def knows_cluster(self) -> bool:
        return self._knows_cluster.is_set()

    async def wait_for_cluster(self, timeout_s: float) -> bool:
        """Waits until an UpdateMetadata listed this broker alive, at most ``timeout_s``."""
        if self._knows_cluster.is_set():
            return True
        try:
            await asyncio.wait_for(self._knows_cluster.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def set_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self.topic_configs[topic] = dict(configs)
        self._topics = None

    # ---- brokers ----

    @property
    def controller_id(self) -> int:
        return (
            -1
            if self._controller_id is None or self._controller_id not in self._brokers
            else self._controller_id
        )

    def alive_broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def alive_broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def alive_nodes(self, listener) -> list[Node]:
        """Every live broker with an endpoint for ``listener``'s name."""
        nodes = []
        for broker_id in sorted(self._brokers):
            if broker_id == self.broker_id and self.local_listeners:
                nodes.append(
                    Node(
                        broker_id, listener.host, listener.port, self._brokers[broker_id].info.rack
                    )
                )
                continue
            info = self._brokers[broker_id].info
            endpoint = next((e for e in info.endpoints if e.listener_name == listener.name), None)
            if endpoint is not None:
                nodes.append(Node(broker_id, endpoint.host or "", endpoint.port, info.rack))
        return nodes

    def endpoint(self, broker_id: int, listener_name: str):
        registration = self._brokers.get(broker_id)
        if registration is None:
            return None
        return next(
            (e for e in registration.info.endpoints if e.listener_name == listener_name), None
        )

    # ---- topics ----

    @property
    def topics(self) -> dict[str, TopicInfo]:
        if self._topics is None:
            self._topics = {
                name: TopicInfo(
                    name,
                    self._topic_ids.get(name, uuid.UUID(int=0)),
                    max(parts) + 1,
                    self.topic_configs.setdefault(name, {}),
                )
                for name, parts in sorted(self._partitions.items())
                if parts
            }
        return self._topics

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for name, known in self._topic_ids.items():
            if known == topic_id:
                return self.topics.get(name)
        return None

    def contains(self, name: str) -> bool:
        return name in self._partitions

    def select(self, names: Iterable[str] | None = None) -> list[TopicInfo]:
        topics = self.topics
        if names is None:
            return list(topics.values())
        return [t for n in names if (t := topics.get(n)) is not None]

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        """Leader, epoch, replicas, ISR and offline replicas; None when the partition has
        no leader the cluster can reach (the answer is then LEADER_NOT_AVAILABLE)."""
        state = self._partitions.get(topic, {}).get(index)
        if state is None or state.leader < 0 or state.leader not in self._brokers:
            return None
        return PartitionState(
            state.leader,
            state.leader_epoch,
            list(state.replicas),
            list(state.isr),
            list(state.offline_replicas),
        )

    def raw_partition_state(self, topic: str, index: int) -> UpdateMetadataPartitionState | None:
        return self._partitions.get(topic, {}).get(index)
