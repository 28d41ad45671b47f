"""One partition this broker leads: its log, its high watermark and its waiters.

A single broker is the only replica of its partitions, so the high watermark is the
log end offset; replication will move it to the smallest log end offset of the ISR.
Fetches that long-poll wait on :meth:`Partition.wait_for_append`, which wakes on the
next append to this partition.

Transactions: the last stable offset (LSO) is the first offset of the earliest
ongoing transaction, or the high watermark when none is ongoing. COMMIT/ABORT markers
come from the transaction coordinator through :meth:`Partition.append_marker`; an
ABORT adds the transaction to the partition's :class:`TransactionIndex`, which
read_committed fetches consult.
"""

from __future__ import annotations

import asyncio
import logging
import time

import logstore

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import CorruptMessageError, KafkaStorageError
from broker_py.log.producer_state import CompletedTxn, ProducerStateManager
from broker_py.log.transaction_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

COMMIT = 1
ABORT = 0
# A failing disk fails every retry of every producer: one log line per partition per
# this many seconds says so without flooding the log.
STORAGE_ERROR_LOG_INTERVAL_S = 10.0


class Partition:
    def __init__(self, topic: str, index: int, log: logstore.Log, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.producer_state = ProducerStateManager(log)
        self.txn_index = TransactionIndex(log.path, log.log_start_offset, log.log_end_offset)
        self._index_replayed_aborts()
        # Set by the next append; made only when a long poll asks for it.
        self._appended: asyncio.Event | None = None
        self._storage_error_logged_at = -STORAGE_ERROR_LOG_INTERVAL_S
        self._storage_errors_since_logged = 0

    def replace_log(self, log: logstore.Log) -> None:
        """The same partition's log, reopened (after a move to another log dir)."""
        self.log = log
        self.producer_state.moved_to(log)
        self.txn_index.moved_to(log.path)

    def _segment_of(self, offset: int) -> int:
        base = 0
        for segment in self.log.segments():
            if segment.base_offset > offset:
                break
            base = segment.base_offset
        return base

    def _index_replayed_aborts(self) -> None:
        """Adds the ABORT markers the producer state replayed that the index lacks
        (their entries were lost with a crash)."""
        for txn in self.producer_state.replayed_aborts:
            if not self.txn_index.contains(txn.producer_id, txn.last_offset):
                self.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_offset + 1),
                    self._segment_of(txn.last_offset),
                )
        self.producer_state.replayed_aborts.clear()

    def storage_error(self, e: logstore.LogStoreError) -> KafkaStorageError:
        """The error for an append the log could not take (a full or failing disk),
        logged at most once per STORAGE_ERROR_LOG_INTERVAL_S for this partition."""
        self._storage_errors_since_logged += 1
        now = time.monotonic()
        if now - self._storage_error_logged_at >= STORAGE_ERROR_LOG_INTERVAL_S:
            log.error(
                "appending to %s-%d failed %d time(s) in the last %.0f s (KAFKA_STORAGE_ERROR): %s",
                self.topic, self.index, self._storage_errors_since_logged, STORAGE_ERROR_LOG_INTERVAL_S, e,
            )  # fmt: skip
            self._storage_error_logged_at = now
            self._storage_errors_since_logged = 0
        return KafkaStorageError(f"{self.topic}-{self.index}: {e}")

    def after_truncation(self) -> None:
        """The log was truncated or its start moved: rebuild the producer state."""
        self.txn_index.truncate_to(self.log.log_end_offset)
        self.producer_state.truncated()
        self._index_replayed_aborts()
        self.txn_index.delete_before(self.log.log_start_offset)

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first_unstable = self.producer_state.first_unstable_offset()
        return hw if first_unstable is None else min(first_unstable, hw)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> CompletedTxn | None:
        """Appends a COMMIT or ABORT control batch ending the producer's transaction
        (None: it had no data here).

        Raises InvalidProducerEpochError / TransactionCoordinatorFencedError when the
        marker is fenced, KafkaStorageError when the log cannot take it."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = logstore.encode_control_batch(
            COMMIT if commit else ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
        )
        try:
            offset, _ = self.log.append(batch, leader_epoch=self.leader_epoch)
        except logstore.CorruptRecordError as e:
            raise CorruptMessageError(str(e)) from None
        except logstore.LogStoreError as e:
            raise self.storage_error(e) from None
        txn = self.producer_state.record_marker(producer_id, producer_epoch, coordinator_epoch, commit, offset)
        if txn is not None and txn.aborted:
            self.txn_index.append(
                AbortedTxn(producer_id, txn.first_offset, offset, self.last_stable_offset),
                self._segment_of(offset),
            )
        self.notify_append()
        return txn

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.txn_index.collect(fetch_offset, upper_bound_offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode:
        """The error for a request made under ``current_leader_epoch`` (-1: not checked):
        an older epoch is fenced, a newer one is not known here yet."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def notify_append(self) -> None:
        event = self._appended
        if event is not None:
            self._appended = None
            event.set()

    def append_event(self) -> asyncio.Event:
        """An event set by the next append (take it before checking for data)."""
        if self._appended is None:
            self._appended = asyncio.Event()
        return self._appended
