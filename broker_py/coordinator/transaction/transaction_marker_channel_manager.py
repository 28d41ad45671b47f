"""Delivery of a transaction's COMMIT/ABORT markers to the leaders of its partitions
(Kafka's ``TransactionMarkerChannelManager``).

A partition this broker leads gets its marker through the coordinator's
:class:`~broker_py.coordinator.partition_writer.PartitionWriter`; the others get
WriteTxnMarkers, one request per leader broker, over an inter-broker connection kept
per broker (:class:`BrokerClients`, injected: the server layer's). Every marker is
appended with acks=all, so once delivered it survives the loss of its leader.

Until every marker is delivered the attempt repeats every ``retry_backoff_ms`` with the
leaders metadata names then. A partition that no longer exists (its topic deleted)
needs no marker; a coordinator that stopped owning the transactional id stops
(NotCoordinatorError): the new coordinator completes the transaction from its log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.partition_writer import PartitionWriter
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, NotCoordinatorError
from logstore.protocol.messages.transactions import WriteTxnMarkersRequest

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class BrokerClient(Protocol):
    """A connection to another broker (the network layer's ``NetworkClient``)."""

    async def send(self, api_key: ApiKey, request: Any, timeout_ms: int | None = None) -> Any: ...


class BrokerClients(Protocol):
    """One :class:`BrokerClient` per peer broker."""

    def get(self, broker_id: int) -> BrokerClient | None:
        """The client of ``broker_id``; None when it has no known endpoint (or this
        broker has no inter-broker connections: a broker alone)."""
        ...

    async def close(self) -> None: ...


class TransactionMarkerChannelManager:
    def __init__(
        self,
        broker_id: int,
        writer: PartitionWriter,
        clients: BrokerClients,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        on_offsets_marker: Callable[[int, int, bool], None] | None = None,
    ) -> None:
        """``on_offsets_marker(producer id, __consumer_offsets partition, commit)`` is
        called for each marker this broker wrote to an offsets partition (the group
        coordinator completes the producer's transactional offsets there)."""
        self.broker_id = broker_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._writer = writer
        self._clients = clients
        self._on_offsets_marker = on_offsets_marker

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: set[TopicPartition],
        still_owner: Callable[[], bool],
    ) -> None:
        """Delivers the markers; returns once each partition has its marker (or is gone)."""
        remaining = set(partitions)
        while True:
            if not still_owner():
                raise NotCoordinatorError(
                    f"markers of producer {producer_id}: no longer its coordinator"
                )
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self._leader(*tp)
                if leader is None:
                    log.info(
                        "no %s marker for %s-%d: the partition is gone",
                        "COMMIT" if commit else "ABORT",
                        *tp,
                    )
                    remaining.discard(tp)
                else:
                    by_leader.setdefault(leader, []).append(tp)
            if not remaining:
                return
            outcomes = await asyncio.gather(
                *(
                    self._deliver(
                        leader, tps, producer_id, producer_epoch, commit, coordinator_epoch
                    )
                    for leader, tps in by_leader.items()
                )
            )
            for delivered in outcomes:
                remaining -= delivered
            if not remaining:
                return
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    def _leader(self, topic: str, index: int) -> int | None:
        """The partition's leader (-1 while it has none); None when it does not exist."""
        return self._writer.partition_leader((topic, index))

    async def _deliver(
        self,
        leader: int,
        tps: list[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> set[TopicPartition]:
        """The partitions whose marker ``leader`` took."""
        if leader < 0:
            return set()
        if leader == self.broker_id:
            errors = await self._append_locally(
                tps, producer_id, producer_epoch, commit, coordinator_epoch
            )
        else:
            errors = await self._send(
                leader, tps, producer_id, producer_epoch, commit, coordinator_epoch
            )
        delivered = set()
        for tp in tps:
            error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if error == ErrorCode.NONE:
                delivered.add(tp)
            elif error in (
                ErrorCode.INVALID_PRODUCER_EPOCH,
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            ):
                # A newer epoch of the producer or of the coordinator already ended it.
                log.warning(
                    "%s marker for %s-%d refused (%s): dropped",
                    "COMMIT" if commit else "ABORT",
                    *tp,
                    error.name,
                )
                delivered.add(tp)
            else:
                log.info(
                    "%s marker for %s-%d not written yet: %s",
                    "COMMIT" if commit else "ABORT",
                    *tp,
                    error.name,
                )
        return delivered

    async def _append_locally(
        self, tps, producer_id, producer_epoch, commit, coordinator_epoch
    ) -> dict[TopicPartition, ErrorCode]:
        markers = [(t, i, producer_id, producer_epoch, commit, coordinator_epoch) for t, i in tps]
        errors = await self._writer.append_markers(self.request_timeout_ms, markers)
        on_offsets_marker = self._on_offsets_marker
        for (topic, index), error in errors.items():
            if error == ErrorCode.NONE and topic == OFFSETS_TOPIC and on_offsets_marker is not None:
                on_offsets_marker(producer_id, index, commit)
        return errors

    async def _send(
        self, leader, tps, producer_id, producer_epoch, commit, coordinator_epoch
    ) -> dict[TopicPartition, ErrorCode]:
        client = self._clients.get(leader)
        if client is None:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=commit,
                    topics=[
                        WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        try:
            response = await client.send(
                ApiKey.WRITE_TXN_MARKERS, request, self.request_timeout_ms + 5_000
            )
        except (KafkaError, OSError, TimeoutError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return {}
        out = {}
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    code = p.error_code
                    out[(t.name, p.partition_index)] = (
                        ErrorCode(code)
                        if code in ErrorCode._value2member_map_
                        else ErrorCode.UNKNOWN_SERVER_ERROR
                    )
        return out

    async def close(self) -> None:
        await self._clients.close()
