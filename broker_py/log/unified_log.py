"""The Python side of one partition's log (Kafka's ``UnifiedLog``): the storage
engine's ``logstore.Log`` (:attr:`UnifiedLog.local_log`: segments, indexes, the
leader-epoch cache) with the producer state and the transaction index kept beside it.

- Appends as leader check idempotent and transactional batches against the producer
  state first: a retried duplicate answers its original offsets and is not written
  again. The producer state records a batch only after the log took it.
- COMMIT/ABORT control batches come from :meth:`UnifiedLog.append_control_marker`; an
  ABORT adds the transaction to the :class:`TransactionIndex`, which read_committed
  fetches consult.
- The first unstable offset (earliest open transaction) bounds the last stable offset
  the partition computes from its high watermark.
- Every storage-engine error leaves this class as a Kafka error
  (:mod:`broker_py.log.storage_errors`); storage errors are logged at most once per
  interval. An I/O failure of the disk (the engine's or the producer state's and
  transaction index's own files) also reports the log's dir to the
  :class:`~broker_py.log.log_dir_failure_channel.LogDirFailureChannel`, which takes it
  offline.
"""

from __future__ import annotations

import os

import logstore
from broker_py.log.log_dir_failure_channel import (
    LogDirFailureChannel,
    is_log_dir_failure,
    log_dir_of,
)
from broker_py.log.producer_state import CompletedTxn, ProducerStateManager
from broker_py.log.storage_errors import StorageErrorLog, kafka_error
from broker_py.log.transaction_index import AbortedTxn, TransactionIndex
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    CorruptMessageError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
)

COMMIT = 1
ABORT = 0


def _coordinator_epoch(data, batch) -> int:
    """The coordinator epoch of a control batch of ``data`` (its record's value: version
    int16, coordinator_epoch int32); -1 when it cannot be read."""
    try:
        (whole,) = logstore.decode_batches(
            memoryview(data)[batch.position : batch.position + batch.size], verify_crc=False
        )
        value = whole.records[0].value
        return (
            int.from_bytes(value[2:6], "big", signed=True)
            if value is not None and len(value) >= 6
            else -1
        )
    except (logstore.LogStoreError, IndexError, ValueError):
        return -1


class UnifiedLog:
    def __init__(
        self,
        topic: str,
        index: int,
        local_log: logstore.Log,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.local_log = local_log
        # One listing of the partition directory serves both.
        names = os.listdir(local_log.path)
        self.producer_state = ProducerStateManager(local_log, names)
        self.txn_index = TransactionIndex(
            local_log.path, local_log.log_start_offset, local_log.log_end_offset, names
        )
        # Segments the log had after the last append: one more means it rolled, and the
        # producer state is snapshotted (a later truncation replays from there).
        self._segments = local_log.num_segments
        self._storage_errors = StorageErrorLog(f"{topic}-{index}")
        self.failure_channel = failure_channel
        self._index_replayed_aborts()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    def replace_log(self, local_log: logstore.Log) -> None:
        """The same partition's log, reopened (after a move to another log dir)."""
        self.local_log = local_log
        self.producer_state.moved_to(local_log)
        self.txn_index.moved_to(local_log.path)
        self._segments = local_log.num_segments

    @property
    def log_dir(self) -> str:
        return log_dir_of(self.local_log.path)

    def error(self, e: logstore.LogStoreError, action: str = "appending to") -> KafkaError:
        """The Kafka error for a storage-engine error of this log (storage errors logged;
        a failure of the disk reported to the failure channel)."""
        self._report_failure(e, action)
        return self._storage_errors.record(kafka_error(e, self.name), action)

    def os_error(self, e: OSError, action: str) -> KafkaError:
        """KAFKA_STORAGE_ERROR for an OSError of this log's own files (producer state
        snapshots, the transaction index), reported like the engine's I/O errors."""
        self._report_failure(e, action)
        return self._storage_errors.record(
            KafkaStorageError(f"{action} {self.name}: {e.strerror or e}"), action
        )

    def _report_failure(self, e: BaseException, action: str) -> None:
        # A closed log's files may be renamed away (deleted, or moved to another dir):
        # failing to find them says nothing about the disk.
        if self.local_log.closed:
            return
        if self.failure_channel is not None and is_log_dir_failure(e):
            self.failure_channel.maybe_add_offline_log_dir(
                self.log_dir, f"{action} {self.name} failed: {e}"
            )

    # ---- offsets ----

    @property
    def log_start_offset(self) -> int:
        return self.local_log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def size_bytes(self) -> int:
        return self.local_log.size_bytes

    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    def _segment_of(self, offset: int) -> int:
        base = 0
        for segment in self.local_log.segments():
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
                    AbortedTxn(
                        txn.producer_id, txn.first_offset, txn.last_offset, txn.last_offset + 1
                    ),
                    self._segment_of(txn.last_offset),
                )
        self.producer_state.replayed_aborts.clear()

    def _index_abort(self, producer_id: int, first_offset: int, marker_offset: int) -> None:
        """Indexes the ABORT marker at ``marker_offset`` ending a transaction that began at
        ``first_offset``; its entry records, as Kafka's, the first offset still unstable
        once the transaction is over (the marker's offset + 1 when none is)."""
        first_unstable = self.producer_state.first_unstable_offset()
        entry = AbortedTxn(
            producer_id,
            first_offset,
            marker_offset,
            marker_offset + 1 if first_unstable is None else first_unstable,
        )
        try:
            self.txn_index.append(entry, self._segment_of(marker_offset))
        except OSError as e:
            raise self.os_error(e, "indexing an aborted transaction of") from None

    def _after_truncation(self) -> None:
        """The log's tail was cut: rebuild the producer state (from its newest snapshot
        at or below the new end) and cut the transaction index."""
        self.txn_index.truncate_to(self.local_log.log_end_offset)
        self.producer_state.truncated()
        self._index_replayed_aborts()
        self._segments = self.local_log.num_segments

    def _after_append(self) -> None:
        segments = self.local_log.num_segments
        if segments > self._segments:
            self._segments = segments
            try:
                self.producer_state.write_snapshot(sync=False)
            except OSError as e:
                raise self.os_error(e, "snapshotting the producer state of") from None
        self._segments = segments

    def _after_log_start_moved(self) -> None:
        start = self.local_log.log_start_offset
        self.producer_state.log_start_moved(start)
        self.txn_index.delete_before(start)
        self._segments = self.local_log.num_segments

    # ---- appends ----

    def append_as_leader(
        self, records, leader_epoch: int, idempotent: bool | None = None, verify_transaction=None
    ) -> tuple[int, int, int, int]:
        """Appends producer batches: (base offset, last offset, log append time or -1,
        log start offset).

        ``idempotent``: whether a batch carries a producer id, when the caller knows.
        ``verify_transaction(producer_id, producer_epoch) -> ErrorCode`` checks that a
        transactional batch belongs to an ongoing transaction including this partition."""
        if not records:
            raise CorruptMessageError("produce request without records")
        state = self.producer_state
        if idempotent is None:
            idempotent = logstore.has_producer_id(records)
        if idempotent:
            try:
                batches = logstore.decode_batches(
                    records, records=False, verify_crc=False, allow_partial=False
                )
            except logstore.LogStoreError as e:
                raise self.error(e) from None
            for b in batches:
                if b.is_control:
                    raise InvalidRecordError("clients may not write control batches")
                if b.is_transactional:
                    error = (
                        ErrorCode.INVALID_TXN_STATE
                        if verify_transaction is None
                        else verify_transaction(b.producer_id, b.producer_epoch)
                    )
                    if error == ErrorCode.INVALID_PRODUCER_EPOCH:
                        raise InvalidProducerEpochError(
                            f"producer {b.producer_id} epoch {b.producer_epoch} is fenced"
                        )
                    if error != ErrorCode.NONE:
                        raise InvalidTxnStateError(
                            f"producer {b.producer_id} epoch {b.producer_epoch} "
                            f"has no ongoing transaction that includes {self.name}"
                        )
                duplicate = state.check(b)
                if duplicate is not None:
                    return (
                        duplicate.first_offset,
                        duplicate.last_offset,
                        -1,
                        self.local_log.log_start_offset,
                    )
        try:
            info = self.local_log.append_info(records, leader_epoch=leader_epoch)
        except logstore.LogStoreError as e:
            raise self.error(e) from None
        if idempotent:
            offset = info.base_offset
            for b in batches:
                last = offset + b.last_offset_delta
                state.record(b, offset, last)
                offset = last + 1
        self._after_append()
        return info.base_offset, info.last_offset, info.log_append_time, info.log_start_offset

    def append_records(self, data: bytes, leader_epoch: int) -> tuple[int, int]:
        """Appends batches the broker wrote itself (coordinator records, markers):
        (first, last offset). Batches with a producer id (a transactional offset
        commit) enter the producer state as they are, without sequence checks."""
        first, last = self._append_records(data, leader_epoch)
        self._after_append()
        return first, last

    def _append_records(self, data: bytes, leader_epoch: int) -> tuple[int, int]:
        try:
            first, last = self.local_log.append(data, leader_epoch=leader_epoch)
            if logstore.has_producer_id(data):
                for batch in logstore.decode_batches(data, records=False):
                    if not batch.is_control:
                        self.producer_state.record(batch, first, last)
        except logstore.LogStoreError as e:
            raise self.error(e) from None
        return first, last

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        leader_epoch: int,
    ) -> tuple[int, CompletedTxn | None]:
        """Appends a COMMIT or ABORT control batch ending the producer's transaction:
        (its offset, the transaction or None when it had no data here). An abort's
        index entry records, as Kafka's, the first offset still unstable once the
        transaction is over (the marker's offset + 1 when none is).

        Raises InvalidProducerEpochError / TransactionCoordinatorFencedError when the
        marker is fenced, KafkaStorageError when the log cannot take it."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = logstore.encode_control_batch(
            COMMIT if commit else ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
        )
        offset, _ = self._append_records(batch, leader_epoch)
        txn = self.producer_state.record_marker(
            producer_id, producer_epoch, coordinator_epoch, commit, offset
        )
        self._after_append()
        if txn is not None and txn.aborted:
            self._index_abort(producer_id, txn.first_offset, offset)
        return offset, txn

    def append_as_follower(self, records) -> tuple[int, int]:
        """Appends the leader's batches as they are, offsets and leader epochs kept (the
        leader-epoch cache follows them): (first offset, last offset). The producer state,
        the transaction index and so the last stable offset follow them as on the
        leader, so a follower that becomes leader fences and dedupes the same producers."""
        try:
            info = self.local_log.append_as_follower(records)
        except logstore.LogStoreError as e:
            raise self.error(e, "replicating to") from None
        if logstore.has_producer_id(records):
            state = self.producer_state
            for batch in logstore.decode_batches(records, records=False, verify_crc=False):
                if batch.producer_id < 0:
                    continue
                if not batch.is_control:
                    state.record(batch, batch.base_offset, batch.last_offset)
                    continue
                offset = batch.base_offset
                txn = state.record_marker(
                    batch.producer_id,
                    batch.producer_epoch,
                    _coordinator_epoch(records, batch),
                    batch.control_type == COMMIT,
                    offset,
                )
                if txn is not None and txn.aborted:
                    self._index_abort(batch.producer_id, txn.first_offset, offset)
        self._after_append()
        return info.base_offset, info.last_offset

    def truncate_to(self, offset: int) -> None:
        """Removes every batch at or past ``offset`` (a follower cutting a diverging
        suffix); the producer state and transaction index are rebuilt for the new end. At
        or past the log end nothing is cut, but leader epochs starting there are dropped."""
        cuts = offset < self.local_log.log_end_offset
        try:
            self.local_log.truncate_to(offset)
        except logstore.LogStoreError as e:
            raise self.error(e, "truncating") from None
        if cuts:
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empties the log and starts it at ``offset`` (a follower far behind the
        leader's log start)."""
        try:
            self.local_log.truncate_fully_and_start_at(offset)
        except logstore.LogStoreError as e:
            raise self.error(e, "truncating") from None
        self.txn_index.truncate_to(offset)
        self.txn_index.delete_before(offset)
        self.producer_state.reset()
        self._segments = self.local_log.num_segments

    # ---- reads ----

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool):
        """A ``logstore.FileSlice`` of whole batches from ``fetch_offset`` below
        ``max_offset`` (None: nothing there); OffsetOutOfRangeError outside the log."""
        try:
            return self.local_log.read_slice(
                fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
            )
        except logstore.LogStoreError as e:
            raise self.error(e, "reading") from None

    def read_keyed_records(
        self, buffer_bytes: int
    ) -> tuple[list[tuple[bytes, bytes | None]], dict[int, list[tuple[bytes, bytes | None]]]]:
        """For a coordinator loading its compacted topic (run off the event loop):
        (key, value) of every committed record with a key, in offset order (a
        transaction's records at its COMMIT marker), and those of each producer's
        transaction that has no marker yet. Reads ``buffer_bytes`` at a time from the
        log start to the log end as it is when the read starts."""
        out: list[tuple[bytes, bytes | None]] = []
        pending_txn: dict[int, list[tuple[bytes, bytes | None]]] = {}
        plog = self.local_log
        try:
            offset, end = plog.log_start_offset, plog.log_end_offset
            while offset < end:
                batches = logstore.decode_batches(plog.read(offset, buffer_bytes, max_offset=end))
                if not batches:
                    break
                for batch in batches:
                    if batch.is_control:
                        txn = pending_txn.pop(batch.producer_id, [])
                        if batch.control_type == COMMIT:
                            out.extend(txn)
                        continue
                    target = (
                        pending_txn.setdefault(batch.producer_id, [])
                        if batch.is_transactional
                        else out
                    )
                    for record in batch.records:
                        if record.offset >= offset and record.key is not None:
                            target.append((record.key, record.value))
                offset = max(offset, batches[-1].last_offset + 1)
        except logstore.LogStoreError as e:
            raise self.error(e, "loading") from None
        return out, pending_txn

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.txn_index.collect(fetch_offset, upper_bound_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp``."""
        try:
            return self.local_log.offset_for_timestamp(timestamp)
        except logstore.LogStoreError as e:
            raise self.error(e, "reading") from None

    def largest_timestamp(self) -> int:
        return max(
            (s.largest_timestamp for s in self.local_log.segments() if s.size > 0), default=-1
        )

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Records in the leader-epoch cache that ``epoch`` starts at ``start_offset``."""
        try:
            self.local_log.assign_epoch_start_offset(epoch, start_offset)
        except logstore.LogStoreError as e:
            raise self.error(e, "writing the leader-epoch checkpoint of") from None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.local_log.end_offset_for_epoch(epoch)

    @property
    def latest_epoch(self) -> int | None:
        return self.local_log.latest_epoch

    # ---- log start ----

    def delete_records(self, offset: int) -> int:
        """Moves the log start offset up to ``offset``; returns the new log start."""
        try:
            low = self.local_log.delete_records(offset)
        except logstore.LogStoreError as e:
            raise self.error(e, "deleting records of") from None
        self._after_log_start_moved()
        return low

    def enforce_retention(self, max_offset: int) -> int:
        """Deletes segments past retention below ``max_offset``; their count."""
        try:
            return self.local_log.enforce_retention(max_offset=max_offset)
        except logstore.LogStoreError as e:
            raise self.error(e, "retention of") from None

    def delete_aborted_before_log_start(self) -> None:
        """After retention, on the event loop (retention itself runs in a worker
        thread): drops transaction index entries and producers below the log start."""
        self._after_log_start_moved()
