"""The transactional ids this broker coordinates and their persistence in
``__transaction_state`` (Kafka's ``TransactionStateManager``).

- ``__transaction_state`` is created on first use, compacted, with
  ``transaction.state.log.num.partitions`` partitions; a transactional id lives in
  partition :func:`~broker_py.coordinator.transaction.transaction_log.partition_for` of its id.
- Every state change is one record appended there
  (:mod:`broker_py.coordinator.transaction.transaction_log`) before the in-memory state
  changes; a failed append leaves the state as it was.
- The ids of a partition are this broker's while it leads that partition (Kafka's
  ``onElection`` / ``onResignation``): on election they are rebuilt from its log (the
  latest record per key wins, a tombstone removes the id), requests for them getting
  COORDINATOR_LOAD_IN_PROGRESS meanwhile; on resignation they are dropped, and
  requests get NOT_COORDINATOR. At start the partitions led then are loaded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import logstore
from broker_py.common.internal_topics import TRANSACTION_STATE_TOPIC
from broker_py.common.topic import TopicInfo
from broker_py.coordinator.transaction.transaction_log import (
    InvalidTransactionRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from broker_py.coordinator.transaction.transaction_metadata import TransactionMetadata
from broker_py.utils.completion import Completion
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, error_class

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.partition_writer import PartitionWriter

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's transaction.state.log.load.buffer.size
APPEND_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, which its coordinator appends wait

# Errors of an append to __transaction_state -> the error the client gets, as Kafka maps them.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class TransactionStateManager:
    def __init__(
        self,
        config: BrokerConfig,
        writer: PartitionWriter,
        *,
        cluster: bool,
        time: Time = SYSTEM_TIME,
    ) -> None:
        """``cluster``: this broker is one of a cluster (a transactional id whose
        partition does not exist yet is nobody's)."""
        self.config = config
        self._writer = writer
        self.time = time
        self.transactions: dict[str, TransactionMetadata] = {}
        # transactional ids with a state write in flight (their requests get
        # CONCURRENT_TRANSACTIONS)
        self.pending: set[str] = set()
        # __transaction_state partitions whose ids are this broker's, and those loading.
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.cluster = cluster

    def now_ms(self) -> int:
        return self.time.milliseconds()

    def ensure_topic(self) -> TopicInfo:
        return self._writer.ensure_topic(
            TRANSACTION_STATE_TOPIC,
            self.config["transaction.state.log.num.partitions"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
            },
        )

    def _partition_index(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.ensure_topic().partitions)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch markers for this id carry: its state partition's leader epoch."""
        partition = self._writer.partition(
            (TRANSACTION_STATE_TOPIC, self._partition_index(transactional_id))
        )
        return partition.leader_epoch if partition is not None else -1

    async def _append(self, transactional_id: str, value: bytes | None) -> None:
        """Appends one record for the id with acks=-1; raises the mapped KafkaError when
        the append fails, changing nothing."""
        try:
            index = self._partition_index(transactional_id)
        except KafkaError as e:
            raise error_class(ErrorCode.COORDINATOR_NOT_AVAILABLE)(
                f"{TRANSACTION_STATE_TOPIC} for {transactional_id!r}: {e}"
            ) from None
        data = logstore.encode_batch([(encode_key(transactional_id), value, [], self.now_ms())])
        self.pending.add(transactional_id)
        try:
            done = Completion()
            self._writer.append(
                (TRANSACTION_STATE_TOPIC, index),
                data,
                APPEND_TIMEOUT_MS,
                lambda error, message: done((error, message)),
            )
            outcome = done.result()
            code, message = outcome if isinstance(outcome, tuple) else await outcome
        finally:
            self.pending.discard(transactional_id)
        if code != ErrorCode.NONE:
            mapped = _APPEND_ERRORS.get(ErrorCode(code), ErrorCode(code))
            log.error(
                "append to %s for %r failed (%s): %s",
                TRANSACTION_STATE_TOPIC,
                transactional_id,
                ErrorCode(code).name,
                message,
            )
            raise error_class(mapped)(
                f"{TRANSACTION_STATE_TOPIC} for {transactional_id!r}: {message}"
            )

    async def store(self, txn: TransactionMetadata) -> None:
        """Writes ``txn`` and makes it the id's state (raises, changing nothing, when
        the write fails)."""
        await self._append(txn.transactional_id, encode_value(txn))
        self.transactions[txn.transactional_id] = txn

    async def remove(self, transactional_id: str) -> None:
        await self._append(transactional_id, None)
        self.transactions.pop(transactional_id, None)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        """COORDINATOR_LOAD_IN_PROGRESS while the id's partition loads, NOT_COORDINATOR
        when another broker leads it; None when the id is this broker's (or, on a broker
        alone, before the topic exists)."""
        topic = self._writer.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return ErrorCode.NOT_COORDINATOR if self.cluster else None
        p = partition_for(transactional_id, topic.partitions)
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None if p in self.owned else ErrorCode.NOT_COORDINATOR

    def led_partitions(self) -> list[int]:
        topic = self._writer.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return []
        writer = self._writer
        return [
            p
            for p in range(topic.partitions)
            if (part := writer.partition((TRANSACTION_STATE_TOPIC, p))) is not None
            and part.is_leader
        ]

    def partition_of(self, transactional_id: str) -> int:
        topic = self._writer.topic(TRANSACTION_STATE_TOPIC)
        partitions = (
            topic.partitions
            if topic is not None
            else self.config["transaction.state.log.num.partitions"]
        )
        return partition_for(transactional_id, partitions)

    async def load(self) -> None:
        """Loads every partition this broker leads now."""
        for p in self.led_partitions():
            await self.load_partition(p)
        log.info(
            "loaded %d transactional ids from %d partitions of %s",
            len(self.transactions),
            len(self.owned),
            TRANSACTION_STATE_TOPIC,
        )

    def drop_partition(self, p: int) -> int:
        """This broker no longer leads partition ``p``: its ids go; how many."""
        self.owned.discard(p)
        self.loading.discard(p)
        gone = [t for t in self.transactions if self.partition_of(t) == p]
        for t in gone:
            del self.transactions[t]
        return len(gone)

    async def load_partition(self, p: int) -> list[TransactionMetadata]:
        """Rebuilds the ids of partition ``p`` from its log; returns them (empty when the
        partition is gone or was resigned meanwhile)."""
        self.loading.add(p)
        partition = self._writer.partition((TRANSACTION_STATE_TOPIC, p))
        if partition is None:
            log.warning(
                "%s-%d is not open; its transactional ids are not loaded",
                TRANSACTION_STATE_TOPIC,
                p,
            )
            self.loading.discard(p)
            return []
        loaded: dict[str, TransactionMetadata] = {}
        if partition.log_end_offset > partition.log_start_offset:
            records, _ = await self._writer.read_keyed_records(
                (TRANSACTION_STATE_TOPIC, p), LOAD_BUFFER_BYTES
            )
            if p not in self.loading:
                return []
            for key, value in records:
                try:
                    transactional_id = decode_key(key)
                    if value is None:
                        loaded.pop(transactional_id, None)
                    else:
                        loaded[transactional_id] = decode_value(transactional_id, value)
                except InvalidTransactionRecordError as e:
                    log.error("skipping unreadable %s record: %s", TRANSACTION_STATE_TOPIC, e)
        self.transactions.update(loaded)
        self.loading.discard(p)
        self.owned.add(p)
        if loaded:
            log.info(
                "loaded %d transactional ids from %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, p
            )
        return list(loaded.values())
