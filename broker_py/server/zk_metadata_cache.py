"""What a broker of a cluster knows of the cluster's metadata (Kafka's ``ZkMetadataCache``):
the live brokers, the controller and every partition's leadership, exactly as the last
UpdateMetadata from the controller said, the only source of Metadata, DescribeCluster
and FindCoordinator answers. Topic configs come from ZooKeeper (``/config/topics``),
through ``topic_configs``.

Invariants:
- Only :meth:`ZkMetadataCache.update_metadata` changes brokers and partitions, and the
  request handler refuses UpdateMetadata from an older controller epoch, so what this
  cache serves never goes back to an older controller's view.
- A partition state with leader -2 (``LEADER_DURING_DELETE``) removes the partition; a
  topic with no partition left is gone.
- ``topics`` maps a name to a :class:`TopicInfo` whose ``partitions`` is the number of
  partitions known (indices 0..n-1) and whose ``configs`` is the topic's override dict.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from broker_py.controller.controller_request_batch import UpdateMetadataPartitionState, UpdateMetadataRequestData
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.controller.topic_metadata import TopicInfo
from broker_py.server.metadata_cache import Node, PartitionState
from broker_py.zk.zk_data import LEADER_DURING_DELETE


class ZkMetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._controller_id: int | None = None
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerRegistration] = {}
        self._partitions: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self._topics: dict[str, TopicInfo] | None = None

    # ---- updates ----

    def update_metadata(self, request: UpdateMetadataRequestData) -> set[str]:
        """Applies the controller's view; returns the topics that disappeared."""
        self._controller_id = request.controller_id
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        self._brokers = {r.id: r for r in request.live_brokers}
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

    def set_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self.topic_configs[topic] = dict(configs)
        self._topics = None

    # ---- brokers ----

    @property
    def controller_id(self) -> int:
        return -1 if self._controller_id is None or self._controller_id not in self._brokers else self._controller_id

    def alive_broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def alive_broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def alive_nodes(self, listener) -> list[Node]:
        """Every live broker with an endpoint for ``listener``'s name."""
        nodes = []
        for broker_id in sorted(self._brokers):
            info = self._brokers[broker_id].info
            endpoint = next((e for e in info.endpoints if e.listener_name == listener.name), None)
            if endpoint is not None:
                nodes.append(Node(broker_id, endpoint.host or "", endpoint.port, info.rack))
        return nodes

    def endpoint(self, broker_id: int, listener_name: str):
        registration = self._brokers.get(broker_id)
        if registration is None:
            return None
        return next((e for e in registration.info.endpoints if e.listener_name == listener_name), None)

    # ---- topics ----

    @property
    def topics(self) -> dict[str, TopicInfo]:
        if self._topics is None:
            self._topics = {
                name: TopicInfo(name, self._topic_ids.get(name, uuid.UUID(int=0)), max(parts) + 1, self.topic_configs.setdefault(name, {}))
                for name, parts in sorted(self._partitions.items()) if parts
            }  # fmt: skip
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
        return PartitionState(state.leader, state.leader_epoch, list(state.replicas), list(state.isr), list(state.offline_replicas))

    def raw_partition_state(self, topic: str, index: int) -> UpdateMetadataPartitionState | None:
        return self._partitions.get(topic, {}).get(index)
