"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

For each producer id the broker remembers its epoch and the metadata of its last
five batches (first/last sequence, first/last offset). A produced batch is then:

- a duplicate, if its epoch is current and its sequence range equals a remembered
  batch: it is acknowledged with the original offsets and not written again;
- fenced, if its epoch is older than the producer's current epoch;
- out of order, if its epoch is current and its first sequence is not the last
  sequence + 1 (sequences wrap from 2^31-1 to 0). A new epoch must start at 0;
  an unknown producer may start anywhere (its state may have been removed).

A transactional producer also has at most one ongoing transaction per partition: its
first transactional batch here opens it (``current_txn_first_offset``), and the
COMMIT or ABORT marker the coordinator appends ends it. The first offset of the
earliest ongoing transaction is the partition's first unstable offset; read_committed
consumers read no further. While a transaction is ongoing the producer writes only
transactional batches, and a marker from an older producer epoch or coordinator
epoch is fenced.

The state survives restarts and truncations in Kafka's snapshot files
``<offset, 20 digits>.snapshot`` in the partition directory: the state as of that
offset (every batch below it), written when a segment rolls and on clean shutdown.
On start, and when the log's tail is cut, the newest snapshot at or below the log end
is loaded and only the batches after its offset are replayed; snapshots past the log
end describe batches that are gone and are deleted. When the log start moves up,
producers whose last batch is below it are forgotten (unless a transaction of theirs
is open) and nothing is replayed.

Snapshot format (version 1, big-endian)::

    version int16 = 1
    crc     uint32  CRC-32C of every byte after this field
    count   int32
    entries x count:
      producer_id int64, producer_epoch int16, last_sequence int32, last_offset int64,
      offset_delta int32, timestamp int64, coordinator_epoch int32,
      current_txn_first_offset int64
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
import struct

import logstore
from logstore.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)

log = logging.getLogger(__name__)

BATCHES_TO_REMEMBER = 5
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_EPOCH = -1
INT32_MAX = (1 << 31) - 1

_SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_REPLAY_CHUNK = 8 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: data from ``first_offset``, marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_EPOCH
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    batches: collections.deque[BatchMetadata] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=BATCHES_TO_REMEMBER)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, plog: logstore.Log, names: list[str] | None = None) -> None:
        """``names``: the log directory's file names, when the caller has listed it."""
        self._log = plog
        self._dir = plog.path
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its ongoing transaction
        self._ongoing: dict[int, int] = {}
        # ABORT markers met while replaying the log on load (the txn index may lack them)
        self.replayed_aborts: list[CompletedTxn] = []
        # producer id -> guard of the transaction verification started for its next
        # transaction here (KIP-890); gone once the transaction starts or a marker ends
        # whatever the producer had, so a verification outlived by a marker fails
        self._verifying: dict[int, object] = {}
        self._load(names)

    def moved_to(self, plog: logstore.Log) -> None:
        """The partition's log reopened elsewhere, with this state's snapshots copied along."""
        self._log = plog
        self._dir = plog.path

    # ---- checking and recording appends ----

    def check(self, batch: logstore.RecordBatch) -> BatchMetadata | None:
        """Validates an idempotent batch before it is written.

        Returns the remembered metadata when the batch is a duplicate (answer with its
        offsets, write nothing), None when it should be appended. Raises
        InvalidProducerEpochError or OutOfOrderSequenceNumberError.
        """
        if batch.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return None
        if (
            entry.current_txn_first_offset >= 0
            and not batch.is_transactional
            and batch.producer_epoch == entry.epoch
        ):
            raise InvalidTxnStateError(
                f"producer {batch.producer_id} wrote a non-transactional batch "
                "during its ongoing transaction"
            )
        if batch.base_sequence == NO_SEQUENCE:
            return None
        if batch.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} epoch {batch.producer_epoch} "
                f"is older than {entry.epoch}"
            )
        if batch.producer_epoch == entry.epoch:
            for meta in entry.batches:
                if meta.first_seq == batch.base_sequence and meta.last_seq == batch.last_sequence:
                    return meta
            if entry.batches and not _in_sequence(entry.last_seq, batch.base_sequence):
                raise OutOfOrderSequenceNumberError(
                    f"producer {batch.producer_id}: sequence {batch.base_sequence} "
                    f"does not follow {entry.last_seq}"
                )
        elif batch.base_sequence != 0 and entry.epoch != NO_EPOCH:
            raise OutOfOrderSequenceNumberError(
                f"producer {batch.producer_id}: new epoch {batch.producer_epoch} "
                f"starts at sequence {batch.base_sequence}, not 0"
            )
        return None

    def record(self, batch: logstore.RecordBatch, first_offset: int, last_offset: int) -> None:
        """Remembers a batch just written at [first_offset, last_offset]."""
        if batch.producer_id == NO_PRODUCER_ID:
            return
        if batch.is_control:
            self.record_marker(
                batch.producer_id, batch.producer_epoch, -1, batch.control_type == 1, first_offset
            )
            return
        entry = self.producers.setdefault(batch.producer_id, ProducerEntry())
        if batch.producer_epoch != entry.epoch:
            entry.epoch = batch.producer_epoch
            entry.batches.clear()
        if batch.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    batch.base_sequence,
                    batch.last_sequence,
                    first_offset,
                    last_offset,
                    batch.max_timestamp,
                )
            )
        if batch.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._ongoing[batch.producer_id] = first_offset
            self._verifying.pop(batch.producer_id, None)

    # ---- transaction verification (KIP-890) ----

    def in_transaction(self, producer_id: int) -> bool:
        return producer_id in self._ongoing

    def verification_guard(self, producer_id: int) -> object:
        """The guard of the verification of the producer's next transaction here: a
        new one, or the one already in flight (pipelined requests share it)."""
        guard = self._verifying.get(producer_id)
        if guard is None:
            guard = self._verifying[producer_id] = object()
        return guard

    def verified(self, producer_id: int, guard: object) -> bool:
        """Whether a transactional batch verified under ``guard`` may be appended: its
        transaction already started here, or no marker came since the verification."""
        return producer_id in self._ongoing or self._verifying.get(producer_id) is guard

    # ---- transactions ----

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Raises if a COMMIT/ABORT marker of this producer epoch and coordinator epoch
        is fenced (Kafka's ``appendEndTxnMarker`` checks)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker of producer {producer_id} has epoch {producer_epoch}, "
                f"older than {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} has coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}"
            )

    def record_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        offset: int,
    ) -> CompletedTxn | None:
        """Ends the producer's ongoing transaction with the marker written at ``offset``;
        the transaction, or None when the producer had none open here (the marker
        then changes nothing a consumer sees)."""
        self._verifying.pop(producer_id, None)
        entry = self.producers.setdefault(producer_id, ProducerEntry())
        if producer_epoch != entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        del self._ongoing[producer_id]
        return CompletedTxn(producer_id, first, offset, not commit)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction, if any."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each ongoing transaction."""
        return dict(self._ongoing)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forgets producers whose last batch is ``producer.id.expiration.ms`` old (by
        its max timestamp, as Kafka's removeExpiredProducers); returns how many. A
        forgotten producer that writes again starts a new entry at any sequence."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset < 0
            and now_ms - (entry.batches[-1].timestamp if entry.batches else -1) >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
            self._verifying.pop(pid, None)
        return len(expired)

    def last_epoch(self, producer_id: int) -> int:
        entry = self.producers.get(producer_id)
        return NO_EPOCH if entry is None else entry.epoch

    # ---- snapshots ----

    def _snapshots(self, names: list[str] | None = None) -> list[tuple[int, str]]:
        out = []
        for name in os.listdir(self._dir) if names is None else names:
            m = _SNAPSHOT_NAME.match(name)
            if m:
                out.append((int(m[1]), os.path.join(self._dir, name)))
        return sorted(out)

    def write_snapshot(self, sync: bool = True) -> str:
        """Writes the state as of the log end offset (fsynced with ``sync``; a roll's
        snapshot, and the shutdown's, which the log manager's syncfs of the log dir makes
        durable before the clean-shutdown marker, are not: one that a crash tears fails
        its CRC and an older one serves).
        Snapshots below the newest one at or below the log start are removed."""
        offset = self._log.log_end_offset
        body = bytearray(_COUNT.pack(len(self.producers)))
        for pid, entry in sorted(self.producers.items()):
            last = entry.batches[-1] if entry.batches else None
            body += _ENTRY.pack(
                pid,
                entry.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                last.timestamp if last else -1,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
        data = _HEAD.pack(_SNAPSHOT_VERSION, logstore.crc32c(bytes(body))) + body
        path = os.path.join(self._dir, f"{offset:020d}.snapshot")
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self._delete_snapshots_below(self._log.log_start_offset)
        return path

    def _delete_snapshots_below(self, log_start: int) -> None:
        """Keeps the newest snapshot at or below ``log_start`` and every later one."""
        older = [path for offset, path in self._snapshots() if offset <= log_start]
        for path in older[:-1]:
            os.unlink(path)

    def _read_snapshot(self, path: str) -> dict[int, ProducerEntry]:
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < _HEAD.size + _COUNT.size:
            raise ValueError("snapshot too short")
        version, crc = _HEAD.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"snapshot version {version}")
        body = data[_HEAD.size :]
        if logstore.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        (count,) = _COUNT.unpack_from(body, 0)
        if count < 0 or _COUNT.size + count * _ENTRY.size != len(body):
            raise ValueError("snapshot entry count disagrees with its size")
        producers: dict[int, ProducerEntry] = {}
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first = (
                _ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size)
            )
            entry = ProducerEntry(
                epoch=epoch, coordinator_epoch=coordinator_epoch, current_txn_first_offset=txn_first
            )
            if last_seq != NO_SEQUENCE:
                first_seq = (
                    last_seq - delta if last_seq >= delta else INT32_MAX - (delta - last_seq) + 1
                )
                entry.batches.append(
                    BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts)
                )
            producers[pid] = entry
        return producers

    def _load(self, names: list[str] | None = None) -> None:
        """The state as of the log end: the newest readable snapshot at or below it, then
        the batches after the snapshot replayed."""
        start = self._log.log_start_offset
        end = self._log.log_end_offset
        self.producers = {}
        self._ongoing = {}
        for offset, path in reversed(self._snapshots(names)):
            if offset > end:
                os.unlink(path)  # the log was truncated below this snapshot
                continue
            try:
                self.producers = self._read_snapshot(path)
                self._ongoing = {
                    pid: e.current_txn_first_offset
                    for pid, e in self.producers.items()
                    if e.current_txn_first_offset >= 0
                }
                start = max(start, offset)
                break
            except (OSError, ValueError) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
        self._replay(start, end)

    def _replay(self, start: int, end: int) -> None:
        offset = start
        while offset < end:
            data = self._log.read(offset, _REPLAY_CHUNK)
            if not data:
                break
            for batch in logstore.decode_batches(data, records=False):
                if batch.last_offset >= offset and batch.producer_id != NO_PRODUCER_ID:
                    if batch.is_control:
                        txn = self.record_marker(
                            batch.producer_id,
                            batch.producer_epoch,
                            -1,
                            batch.control_type == 1,
                            batch.base_offset,
                        )
                        if txn is not None and txn.aborted:
                            self.replayed_aborts.append(txn)
                    else:
                        self.record(batch, batch.base_offset, batch.last_offset)
                offset = batch.last_offset + 1

    def truncated(self) -> None:
        """Rebuilds the state after the log's tail was cut: from the newest snapshot at
        or below the new log end (those past it are deleted), replaying what follows."""
        self._verifying.clear()
        self.replayed_aborts.clear()
        self._load()

    def reset(self) -> None:
        """The log was emptied (and starts anew): no producer, no snapshot."""
        self.producers.clear()
        self._ongoing.clear()
        self._verifying.clear()
        self.replayed_aborts.clear()
        for _, path in self._snapshots():
            os.unlink(path)

    def log_start_moved(self, log_start: int) -> None:
        """Forgets the producers whose last batch is below the new log start, except
        those with a transaction still open (Kafka's onLogStartOffsetIncremented)."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0
            and (e.batches[-1].last_offset if e.batches else -1) < log_start
        ]
        for pid in gone:
            del self.producers[pid]
        self._delete_snapshots_below(log_start)
