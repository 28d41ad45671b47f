"""The coordinators' :class:`~broker_py.coordinator.partition_writer.PartitionWriter`
over this broker's replica manager and metadata cache (Kafka's
``CoordinatorPartitionWriter``); internal topics are created by ``ensure_topic``, the
topic administration's.

Coordinator appends go through :meth:`ReplicaManager.append_records` as the
coordinator's own writes (``COORDINATOR``: no producer-state checks of a client's
batch) with acks=-1; markers through :meth:`ReplicaManager.append_markers`. This module
is the one place that reads the replica manager's per-partition results for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from broker_py.coordinator.partition_writer import (
    AppendCallback,
    KeyedRecords,
    LeadershipListener,
    TopicPartition,
    TxnMarker,
)
from broker_py.replication.replica_manager import COORDINATOR, ProduceResults
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition
    from broker_py.common.topic import TopicInfo
    from broker_py.replication.replica_manager import ReplicaManager
    from broker_py.server.metadata_cache import MetadataCache


class CoordinatorPartitionWriter:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        ensure_topic: Callable[[str, int, dict[str, str]], TopicInfo],
    ) -> None:
        """``ensure_topic(name, partitions, configs)``: the internal topic, created when
        it does not exist."""
        self._broker_id = broker_id
        self._replica_manager = replica_manager
        self._metadata_cache = metadata_cache
        self._ensure_topic = ensure_topic

    # ---- metadata ----

    def topic(self, name: str) -> TopicInfo | None:
        return self._metadata_cache.get(name)

    def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        return self._ensure_topic(name, partitions, configs)

    def partition_leader(self, tp: TopicPartition) -> int | None:
        state = self._metadata_cache.partition_state(*tp)
        if state is not None:
            return state.leader
        return self._broker_id if self._replica_manager.get_partition(*tp) is not None else None

    # ---- the partitions this broker holds ----

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self._replica_manager.get_partition(*tp)

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._replica_manager.on_leadership_change.append(listener)

    def remove_leadership_listener(self, listener: LeadershipListener) -> None:
        listeners = self._replica_manager.on_leadership_change
        if listener in listeners:
            listeners.remove(listener)

    async def read_keyed_records(
        self, tp: TopicPartition, buffer_bytes: int
    ) -> tuple[KeyedRecords, dict[int, KeyedRecords]]:
        partition = self._replica_manager.get_partition_or_error(*tp)
        return await asyncio.to_thread(partition.log.read_keyed_records, buffer_bytes)

    # ---- writes ----

    def append(
        self,
        tp: TopicPartition,
        records: bytes,
        timeout_ms: int,
        callback: AppendCallback,
        transactional: bool = False,
    ) -> None:
        def appended(results: ProduceResults) -> None:
            result = results[0][1][0]
            callback(ErrorCode(result.error_code), result.error_message)

        self._replica_manager.append_records(
            timeout_ms, -1, [(tp[0], [(tp[1], records, transactional)])], appended, COORDINATOR
        )

    async def append_markers(
        self, timeout_ms: int, markers: Iterable[TxnMarker]
    ) -> dict[TopicPartition, ErrorCode]:
        results = self._replica_manager.append_markers(timeout_ms, markers)
        if not isinstance(results, list):
            results = await results
        return {
            (topic, p.index): ErrorCode(p.error_code) for topic, parts in results for p in parts
        }

    def verify_transaction(
        self, tp: TopicPartition, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> Awaitable[ErrorCode] | ErrorCode | None:
        replica_manager = self._replica_manager
        partition = replica_manager.partitions.get(tp)
        if replica_manager.txn_verifier is None or partition is None:
            return None
        state = partition.log.producer_state
        if state.in_transaction(producer_id):
            return ErrorCode.NONE
        guard = state.verification_guard(producer_id)

        async def verified() -> ErrorCode:
            answer = await replica_manager.txn_verifier.verify(
                transactional_id, producer_id, producer_epoch, [tp]
            )
            error = answer[tp]
            if error == ErrorCode.NONE and not state.verified(producer_id, guard):
                error = ErrorCode.INVALID_TXN_STATE  # a marker ended the transaction meanwhile
            return error

        return verified()
