"""Bootstrap and metadata discovery: the bootstrap list, the brokers, partition leaders
with their leader epochs and topic ids of the last Metadata responses (and of KIP-951
leader hints), and one connection per broker id.

Invariant: while Metadata keeps listing a topic under the same topic id, the cached
leader epoch of each of its partitions never goes back.  A Metadata response from a
broker that has not yet heard of an election (it names an older epoch than the one
cached) leaves that partition's leader and epoch as they are, as Kafka's client does
since KIP-320; a leader hint is taken only when its epoch is newer.  Epochs are -1
when the broker does not report them (Metadata below v7).
"""

from __future__ import annotations

import uuid

from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.metadata import MetadataRequest, MetadataResponse
from logstore.spark.kafka_client.connection import _BrokerConnection
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    UnknownTopicOrPartition,
    _response_error,
)

_NULL_UUID = uuid.UUID(int=0)


def _parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``"host:port,host2:port2"`` (IPv6 as ``[::1]:9092``) as (host, port) pairs."""
    addresses = []
    for item in bootstrap_servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        addresses.append((host, int(port)))
    if not addresses:
        raise ValueError("bootstrap_servers names no server")
    return addresses


class _ClusterMetadata:
    """The cluster view of a :class:`~logstore.spark.kafka_client.KafkaClient`.

    Its state is set up by ``KafkaClient.__init__``; these methods find a
    broker that answers Metadata (the last one used, then the brokers of the
    last response, then the bootstrap list), keep the caches, and hand out
    the connection to a partition's leader.
    """

    _bootstrap: list[tuple[str, int]]
    _client_id: str
    _timeout_s: float
    _metadata_connection: _BrokerConnection | None
    _connections: dict[int, _BrokerConnection]  # broker id -> connection
    _brokers: dict[int, tuple[str, int]]  # broker id -> (host, port)
    _leaders: dict[tuple[str, int], int]  # (topic, partition) -> leader broker id
    _leader_epochs: dict[tuple[str, int], int]  # (topic, partition) -> leader epoch (-1: unknown)
    _topic_ids: dict[str, uuid.UUID]

    def _leader_epoch(self, topic: str, partition: int) -> int:
        """The cached leader epoch of the partition, -1 when unknown: the
        ``current_leader_epoch`` of requests to its leader (KIP-320)."""
        return self._leader_epochs.get((topic, partition), -1)

    def _take_leader_hint(
        self,
        topic: str,
        partition: int,
        hint: tuple[int, int] | None,
        endpoints: dict[int, tuple[str, int]],
    ) -> bool:
        """Take a KIP-951 hint (leader id, leader epoch) for the partition.

        Taken only when it names a leader whose address is known (from
        ``endpoints`` or the cached brokers) under an epoch newer than the
        cached one; returns whether it was taken, i.e. whether the next try
        can go to the new leader without asking for metadata first.
        """
        if hint is None:
            return False
        leader_id, epoch = hint
        key = (topic, partition)
        if leader_id < 0 or epoch < 0 or epoch <= self._leader_epochs.get(key, -1):
            return False
        address = endpoints.get(leader_id) or self._brokers.get(leader_id)
        if address is None:
            return False
        if self._brokers.get(leader_id) != address:
            self._brokers[leader_id] = address
            stale = self._connections.pop(leader_id, None)
            if stale is not None and stale is not self._metadata_connection:
                stale.close()
        self._leaders[key] = leader_id
        self._leader_epochs[key] = epoch
        return True

    def _leader(self, topic: str, partition: int, *, refresh: bool) -> int | None:
        """The leader's broker id, from the cache unless ``refresh`` or not cached.

        ``None`` when the partition has no leader right now (or its topic a
        retriable error).  Raises :class:`UnknownTopicOrPartition` when the
        metadata does not list the topic or the partition.
        """
        key = (topic, partition)
        if refresh or key not in self._leaders:
            response = self._refresh_metadata([topic])
            listed = [t for t in response.topics if t.name == topic]
            if not listed or listed[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicOrPartition(
                    f"Metadata: the cluster has no topic {topic}", topic=topic, partition=partition
                )
            t = listed[0]
            if t.error_code != 0:
                error = _response_error(t.error_code, "Metadata", topic)
                if not error.retriable:
                    raise error
                return None
            if not any(p.partition_index == partition for p in t.partitions):
                raise UnknownTopicOrPartition(
                    f"Metadata: topic {topic} has no partition {partition}",
                    topic=topic,
                    partition=partition,
                )
        return self._leaders.get(key)

    def _broker_connection(self, broker_id: int) -> _BrokerConnection:
        connection = self._connections.get(broker_id)
        if connection is not None and not connection.closed:
            return connection
        address = self._brokers.get(broker_id)
        if address is None:
            raise BrokerUnavailable(f"broker {broker_id} is not in the cluster metadata")
        meta = self._metadata_connection
        if meta is not None and not meta.closed and (meta.host, meta.port) == address:
            connection = meta
        else:
            connection = _BrokerConnection(*address, self._client_id, self._timeout_s)
        self._connections[broker_id] = connection
        return connection

    def _refresh_metadata(self, topics: list[str] | None) -> MetadataResponse:
        """Send Metadata for ``topics`` (``None``: all) to any reachable broker; update the caches.

        An answer that lists no broker is not taken (see below); when no broker
        gives another, :class:`BrokerUnavailable` is raised.
        """
        body = MetadataRequest(
            topics=None
            if topics is None
            else [
                MetadataRequest.MetadataRequestTopic(topic_id=_NULL_UUID, name=name)
                for name in topics
            ],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        failures: list[str] = []
        for connection in self._metadata_candidates(failures):
            try:
                response = connection.request(ApiKey.METADATA, body)
            except BrokerUnavailable as exc:
                failures.append(str(exc))
                continue
            assert isinstance(response, MetadataResponse)
            if not response.brokers:
                # A broker that has just started and not yet had the controller's
                # UpdateMetadata knows no broker and no topic (every topic
                # UNKNOWN_TOPIC_OR_PARTITION): ask another, as Kafka's client does.
                failures.append(
                    f"{connection.address} answered Metadata without brokers (just started?)"
                )
                continue
            self._metadata_connection = connection
            self._update_caches(response)
            return response
        raise BrokerUnavailable("no broker answered Metadata: " + "; ".join(failures))

    def _metadata_candidates(self, failures: list[str]):  # type: ignore[no-untyped-def]
        """Open connections to try for Metadata, in order; connect failures go to ``failures``."""
        tried: set[tuple[str, int]] = set()
        meta = self._metadata_connection
        if meta is not None and not meta.closed:
            tried.add((meta.host, meta.port))
            yield meta
        for address in [*self._brokers.values(), *self._bootstrap]:
            if address in tried:
                continue
            tried.add(address)
            reusable = [
                c
                for c in self._connections.values()
                if not c.closed and (c.host, c.port) == address
            ]
            if reusable:
                yield reusable[0]
                continue
            try:
                connection = _BrokerConnection(*address, self._client_id, self._timeout_s)
            except BrokerUnavailable as exc:
                failures.append(str(exc))
                continue
            if (
                self._metadata_connection is not None
                and self._metadata_connection not in self._connections.values()
            ):
                self._metadata_connection.close()
            self._metadata_connection = connection
            yield connection

    def _update_caches(self, response: MetadataResponse) -> None:
        """Take brokers, leaders, leader epochs and topic ids from ``response``.

        Connections to brokers that left the cluster or moved to another
        address are closed.  Leaders of the topics the response lists are
        replaced, except where the cache holds a newer leader epoch than the
        response (see the module docstring) and the topic id is unchanged (a
        topic deleted and created again starts its epochs anew); other topics
        keep theirs.
        """
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for broker_id, connection in list(self._connections.items()):
            if self._brokers.get(broker_id) != (connection.host, connection.port):
                del self._connections[broker_id]
                if connection is not self._metadata_connection:
                    connection.close()
        listed = {t.name for t in response.topics if t.name is not None}
        old_leaders, old_epochs = self._leaders, self._leader_epochs
        self._leaders = {k: v for k, v in old_leaders.items() if k[0] not in listed}
        self._leader_epochs = {k: v for k, v in old_epochs.items() if k[0] not in listed}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code != 0:
                self._topic_ids.pop(t.name, None)
                continue
            previous_id = self._topic_ids.get(t.name, _NULL_UUID)
            recreated = _NULL_UUID not in (previous_id, t.topic_id) and previous_id != t.topic_id
            self._topic_ids[t.name] = t.topic_id
            for p in t.partitions:
                key = (t.name, p.partition_index)
                epoch = p.leader_epoch if p.leader_epoch is not None else -1
                if not recreated and key in old_leaders and epoch < old_epochs.get(key, -1):
                    self._leaders[key], self._leader_epochs[key] = (
                        old_leaders[key],
                        old_epochs[key],
                    )  # newer known
                elif p.error_code in (0, ErrorCode.REPLICA_NOT_AVAILABLE) and p.leader_id >= 0:
                    self._leaders[key], self._leader_epochs[key] = p.leader_id, epoch
