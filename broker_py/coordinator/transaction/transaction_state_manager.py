"""The transactional ids this broker coordinates and their persistence in
``__transaction_state`` (Kafka's ``TransactionStateManager``).

- ``__transaction_state`` is created on first use, compacted, with
  ``transaction.state.log.num.partitions`` partitions; a transactional id lives in
  partition :func:`~broker_py.coordinator.transaction.transaction_log.partition_for` of its id.
- Every state change is one record appended there (:mod:`broker_py.coordinator.transaction.transaction_log`)
  before the in-memory state changes; a failed append leaves the state as it was.
- :meth:`TransactionStateManager.load` rebuilds every transactional id from the log
  at startup: the latest record per key wins and a tombstone removes the id.
"""

from __future__ import annotations

import asyncio
import logging
import time

import logstore

from logstore.protocol.errors import CoordinatorNotAvailableError, KafkaError, NotCoordinatorError
from broker_py.controller.topic_metadata import TopicInfo
from broker_py.coordinator.transaction.transaction_log import (
    InvalidTransactionRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from broker_py.coordinator.transaction.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's transaction.state.log.load.buffer.size


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionStateManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.transactions: dict[str, TransactionMetadata] = {}

    def ensure_topic(self) -> TopicInfo:
        return self.broker.ensure_topic(
            TRANSACTION_STATE_TOPIC,
            self.config["transaction.state.log.num.partitions"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
            },
        )

    def _partition(self, transactional_id: str):
        topic = self.ensure_topic()
        return self.broker.partition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, topic.partitions))

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch markers for this id carry: its state partition's leader epoch."""
        return self._partition(transactional_id).leader_epoch

    def _append(self, transactional_id: str, value: bytes | None) -> None:
        try:
            partition = self._partition(transactional_id)
            data = logstore.encode_batch([(encode_key(transactional_id), value, [], now_ms())])
            partition.log.append(data, leader_epoch=partition.leader_epoch)
        except KafkaError as e:
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE_TOPIC} for {transactional_id!r}: {e}") from None
        except logstore.LogStoreError as e:
            log.error("append to %s for %r failed: %s", TRANSACTION_STATE_TOPIC, transactional_id, e)
            raise NotCoordinatorError(f"{TRANSACTION_STATE_TOPIC} for {transactional_id!r}: {e}") from None
        partition.notify_append()

    def store(self, txn: TransactionMetadata) -> None:
        """Writes ``txn`` and makes it the id's state (raises, changing nothing, when
        the write fails)."""
        self._append(txn.transactional_id, encode_value(txn))
        self.transactions[txn.transactional_id] = txn

    def remove(self, transactional_id: str) -> None:
        self._append(transactional_id, None)
        self.transactions.pop(transactional_id, None)

    async def load(self) -> None:
        """Reads every ``__transaction_state`` partition from log start to log end."""
        topic = self.broker.metadata.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return
        for p in range(topic.partitions):
            partition = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, p))
            if partition is None:
                log.warning("%s-%d is not open; its transactional ids are not loaded", TRANSACTION_STATE_TOPIC, p)
                continue
            for key, value in await asyncio.to_thread(_read_partition, partition.log):
                try:
                    transactional_id = decode_key(key)
                    if value is None:
                        self.transactions.pop(transactional_id, None)
                    else:
                        self.transactions[transactional_id] = decode_value(transactional_id, value)
                except InvalidTransactionRecordError as e:
                    log.error("skipping unreadable %s record: %s", TRANSACTION_STATE_TOPIC, e)
        log.info("loaded %d transactional ids from %s", len(self.transactions), TRANSACTION_STATE_TOPIC)


def _read_partition(plog: logstore.Log) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        batches = logstore.decode_batches(plog.read(offset, LOAD_BUFFER_BYTES, max_offset=end))
        if not batches:
            break
        for batch in batches:
            if batch.is_control:
                continue
            out.extend((r.key, r.value) for r in batch.records if r.offset >= offset and r.key is not None)
        offset = max(offset, batches[-1].last_offset + 1)
    return out
