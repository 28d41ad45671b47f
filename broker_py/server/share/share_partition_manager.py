"""The share-partitions this broker leads (KIP-932; Kafka's ``SharePartitionManager``): the
I/O around :class:`~broker_py.server.share.share_partition.SharePartition`.

- A share-partition (group, topic id, partition) is built on its first fetch or
  acknowledgement while this broker leads the partition: ReadShareGroupState through the
  share-state persister at the partition's leader epoch; a state never initialized
  (INVALID_REQUEST from the read) is initialized first, its start offset from the group's
  ``share.auto.offset.reset`` (the log start offset, or the high watermark). It is dropped
  and built again when the partition's leader epoch moves, and answers
  NOT_LEADER_OR_FOLLOWER while this broker does not lead the partition.
- Its config: ``group.share.partition.max.record.locks``,
  ``group.share.delivery.count.limit`` (broker) and the group's
  ``share.record.lock.duration.ms`` and ``share.auto.offset.reset``, read again at each use.
- Writes (acknowledgements, releases, expired locks, records found missing) go to the
  persister one at a time per share-partition, in the order they are made (a FIFO lock
  taken before the first await). A write answered FENCED_STATE_EPOCH or
  FENCED_LEADER_EPOCH drops the share-partition: the state was initialized again
  (AlterShareGroupOffsets) or another leader owns it, and the next use reads it afresh.
- Lock expiry: one event-loop timer per share-partition at its earliest lock deadline;
  the expired records' state is written, and fetches waiting on the share-partition wake.
- Share sessions (:mod:`.share_session_cache`) end with the connection that opened them, as
  Kafka 4.1's: the member's acquired records in their partitions are released.
- Fetch: read each partition's log from the share-partition's next fetch offset through the
  replica manager (a consumer's read of the leader, up to the high watermark, or up to the
  last stable offset when the group's ``share.isolation.level`` is read_committed: then
  the read's aborted transactions are archived, never delivered), acquire what it returned
  for the member up to ``max_records``, and answer the batches holding acquired offsets.
  A share-partition still loading its state is not waited for (Kafka's share-partition
  initializing): the fetch answers with the partitions held, and waits for a load only
  when nothing could be acquired. With nothing acquired and no partition in error it
  waits, up to ``max_wait_ms``, for new records in the log, for records to become
  available again, or for a share-partition to load; and while the reads hold fewer than
  ``min_bytes`` it acquires nothing and waits the same way (Kafka's DelayedShareFetch),
  taking what is there at ``max_wait_ms``. ``max_bytes`` 0 reads nothing (Kafka
  refuses to divide a MaxBytes of 0 among the partitions): such a fetch waits out
  ``max_wait_ms`` and answers no records. Records the log no longer holds (its start
  offset moved past them) are done.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker_py.config.group_config import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION_MS,
)
from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey
from broker_py.replication.fetch_data import FetchParams
from broker_py.server.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PersistedState,
    SharePartition,
    SharePartitionConfig,
    ShareStateError,
    StateWrite,
    Transition,
)
from broker_py.server.share.share_session_cache import SessionKey, ShareSessionCache
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.types import DeferredRecords

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition
    from broker_py.replication.replica_manager import ReplicaManager
    from broker_py.server.metadata_cache import MetadataCache
    from broker_py.server.share_state_persister import ShareStatePersister
    from broker_py.utils.time import Time, Timer

log = logging.getLogger(__name__)

# (topic id, partition index)
TopicIdPartition = tuple[uuid.UUID, int]
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (bytes after this field)
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_PRODUCER_ID = struct.Struct(">q")  # at byte 43
_RECORDS_AT = 61  # the first record of a v2 batch (after the record count)
_TRANSACTIONAL, _CONTROL, _CODEC = 0x10, 0x20, 0x07
_CONTROL_ABORT = 0  # a control record key's type (version int16, type int16): 0 ABORT, 1 COMMIT
_FENCED = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH})


@dataclass(slots=True)
class _Info:
    """One partition as the replica manager's read takes it (FetchInfo)."""

    topic: str | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    fetcher_log_start_offset: int = -1


@dataclass(slots=True)
class _Held:
    share_partition: SharePartition
    topic: str
    partition: Partition
    writes: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: Timer | None = None
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


@dataclass(slots=True)
class PartitionFetch:
    """One partition's answer to a fetch: an error, or records and the acquired ranges."""

    error: ErrorCode = ErrorCode.NONE
    records: bytes | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error_message: str | None = None


def batch_offsets(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, start byte, end byte) of each whole v2 batch in ``data``."""
    out = []
    at = 0
    while at + 27 <= len(data):
        base, length = _BATCH_HEADER.unpack_from(data, at)
        end = at + 12 + length
        if length < 15 or end > len(data):
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, at + 23)
        out.append((base, base + delta, at, end))
        at = end
    return out


def _varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    """A zigzag varint at ``at`` (ValueError past ``end``): (value, the next byte)."""
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at


def _is_abort_marker(data: bytes, at: int, end: int) -> bool:
    """Whether the control batch at ``at`` holds an ABORT marker: its first record's key
    (uncompressed; length, attributes, timestamp and offset deltas, key length, key)."""
    try:
        _, pos = _varint(data, at + _RECORDS_AT, end)
        pos += 1  # record attributes
        _, pos = _varint(data, pos, end)
        _, pos = _varint(data, pos, end)
        key_length, pos = _varint(data, pos, end)
    except ValueError:
        return False
    if key_length < 4 or pos + 4 > end:
        return False
    return int.from_bytes(data[pos + 2 : pos + 4], "big", signed=True) == _CONTROL_ABORT


def fetched_batches(data: bytes) -> list[tuple[FetchedBatch, int, int]]:
    """Each whole v2 batch in ``data`` with its start and end bytes: its offsets, producer
    id, and its transactional and ABORT-marker flags."""
    out = []
    for base, last, start, end in batch_offsets(data):
        if end - start < _RECORDS_AT:
            out.append((FetchedBatch(base, last), start, end))
            continue
        (attributes,) = _ATTRIBUTES.unpack_from(data, start + 21)
        (producer_id,) = _PRODUCER_ID.unpack_from(data, start + 43)
        control = bool(attributes & _CONTROL) and not attributes & _CODEC
        batch = FetchedBatch(
            base,
            last,
            producer_id,
            bool(attributes & _TRANSACTIONAL),
            control and _is_abort_marker(data, start, end),
        )
        out.append((batch, start, end))
    return out


def split_acquired(
    acquired: list[AcquiredRecords], batches: list[FetchedBatch], batch_size: int
) -> list[AcquiredRecords]:
    """ShareFetch's BatchSize as Kafka's ``SharePartition`` applies it: a run of acquired
    offsets is cut after the log batch that brings it to ``batch_size`` records (never
    inside a log batch); ``batch_size`` <= 0 cuts nothing. ``batches`` in offset order."""
    if batch_size <= 0:
        return acquired
    out = []
    at = 0
    for run in acquired:
        first = run.first_offset
        while at < len(batches) and batches[at].last_offset < first:
            at += 1
        while at < len(batches) and batches[at].last_offset < run.last_offset:
            end = batches[at].last_offset
            if end - first + 1 >= batch_size:
                out.append(AcquiredRecords(first, end, run.delivery_count))
                first = end + 1
            at += 1
        out.append(AcquiredRecords(first, run.last_offset, run.delivery_count))
    return out


def _appender(
    items: list[TopicIdPartition], tp: TopicIdPartition
) -> Callable[[asyncio.Future[Any]], None]:
    return lambda _: items.append(tp)


def _covering(
    data: bytes, batches: list[tuple[FetchedBatch, int, int]], acquired: list[AcquiredRecords]
) -> bytes:
    """The batches of ``data`` holding an acquired offset (in offset order, as read)."""
    out = []
    at = 0
    for batch, start, end in batches:
        while at < len(acquired) and acquired[at].last_offset < batch.base_offset:
            at += 1
        if at < len(acquired) and acquired[at].first_offset <= batch.last_offset:
            out.append(data[start:end])
    return b"".join(out)


class SharePartitionManager:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        persister: Callable[[], ShareStatePersister | None],
        group_values: Callable[[str], dict[str, Any]],
        broker_config: Any,
        time: Time,
    ) -> None:
        """``persister()``: the share-state persister (None before it runs);
        ``group_values(group_id)``: the group's configs in force; ``broker_config``: the
        broker's keys (``config[key]``)."""
        self._replicas = replica_manager
        self._metadata = metadata_cache
        self._persister = persister
        self._group_values = group_values
        self._broker_config = broker_config
        self._time = time
        self._held: dict[SharePartitionKey, _Held] = {}
        self.sessions = ShareSessionCache(
            broker_config["group.share.max.share.sessions"],
            broker_config["group.share.max.session.timeout.ms"],
        )
        # The connection (its id) each share session was opened on, and the sessions of each
        # watched connection: a session ends with its connection (Kafka 4.1).
        self._session_connection: dict[SessionKey, int] = {}
        self._connection_sessions: dict[int, set[SessionKey]] = {}
        self._loading: dict[SharePartitionKey, asyncio.Task[tuple[ErrorCode, _Held | None]]] = {}

    # ---- share sessions and their connections ----

    def session_opened(self, key: SessionKey, connection: Any) -> None:
        """``key``'s session was opened on ``connection``: closing it closes the session and
        releases the member's records (a connection without ``on_close`` is not watched)."""
        self.session_ended(key)
        callbacks = getattr(connection, "on_close", None)
        if callbacks is None:
            return
        connection_id = id(connection)
        keys = self._connection_sessions.get(connection_id)
        if keys is None:
            keys = self._connection_sessions[connection_id] = set()
            callbacks.append(lambda: self._connection_closed(connection_id))
        keys.add(key)
        self._session_connection[key] = connection_id

    def session_ended(self, key: SessionKey) -> None:
        connection_id = self._session_connection.pop(key, None)
        if connection_id is not None:
            self._connection_sessions.get(connection_id, set()).discard(key)

    def _connection_closed(self, connection_id: int) -> None:
        for key in self._connection_sessions.pop(connection_id, set()):
            if self._session_connection.pop(key, None) == connection_id:
                partitions = self.sessions.close(key)
                asyncio.ensure_future(self.release(key[0], key[1], partitions))

    # ---- share-partitions ----

    def _config(self, group_id: str) -> SharePartitionConfig:
        values = self._group_values(group_id)
        return SharePartitionConfig(
            max_record_locks=self._broker_config["group.share.partition.max.record.locks"],
            delivery_count_limit=self._broker_config["group.share.delivery.count.limit"],
            record_lock_duration_ms=values[SHARE_RECORD_LOCK_DURATION_MS],
            auto_offset_reset=values[SHARE_AUTO_OFFSET_RESET],
        )

    def _leader(self, topic_id: uuid.UUID, index: int) -> tuple[ErrorCode, str, Any]:
        topic = self._metadata.by_id(topic_id)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, "", None
        partition = self._replicas.get_partition(topic.name, index)
        if partition is None:
            if index < 0 or index >= topic.partitions:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic.name, None
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, topic.name, None
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, topic.name, None
        return ErrorCode.NONE, topic.name, partition

    async def share_partition(
        self, group_id: str, topic_id: uuid.UUID, index: int
    ) -> tuple[ErrorCode, _Held | None]:
        """The share-partition, built when needed; or the error answering it."""
        error, held, loading = self._lookup(group_id, topic_id, index)
        if loading is None:
            return error, held
        # A cancelled request (its connection closed) leaves the load running for the others.
        return await asyncio.shield(loading)

    def _lookup(
        self, group_id: str, topic_id: uuid.UUID, index: int
    ) -> tuple[ErrorCode, _Held | None, asyncio.Future[tuple[ErrorCode, _Held | None]] | None]:
        """The share-partition held now, or the error answering it, or (when it must be
        built) the task building it, started here if none is running."""
        error, topic, partition = self._leader(topic_id, index)
        key = SharePartitionKey(group_id, topic_id, index)
        if error != ErrorCode.NONE:
            self._drop(key)
            return error, None, None
        held = self._held.get(key)
        if held is not None:
            if (
                held.partition is partition
                and held.share_partition.leader_epoch == partition.leader_epoch
            ):
                config = self._config(group_id)
                if config != held.share_partition.config:
                    held.share_partition.config = config
                return ErrorCode.NONE, held, None
            self._drop(key)
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load_logged(key, topic, partition))
            self._loading[key] = loading
            loading.add_done_callback(lambda task: self._loaded(key, task))
        return ErrorCode.NONE, None, loading

    def _loaded(self, key: SharePartitionKey, task: asyncio.Future[Any]) -> None:
        if self._loading.get(key) is task:
            del self._loading[key]

    async def _load_logged(
        self, key: SharePartitionKey, topic: str, partition: Partition
    ) -> tuple[ErrorCode, _Held | None]:
        try:
            return await self._load(key, topic, partition)
        except Exception:
            log.exception("loading share-partition %s", key)
            return ErrorCode.UNKNOWN_SERVER_ERROR, None

    async def _load(
        self, key: SharePartitionKey, topic: str, partition: Partition
    ) -> tuple[ErrorCode, _Held | None]:
        persister = self._persister()
        if persister is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        config = self._config(key.group_id)
        leader_epoch = partition.leader_epoch
        outcome = await persister.read(key, leader_epoch)
        if outcome.error == ErrorCode.INVALID_REQUEST:  # never initialized
            start = (
                partition.log_start_offset
                if config.auto_offset_reset == "earliest"
                else partition.high_watermark
            )
            initialized = await persister.initialize(key, 0, start)
            if initialized.error != ErrorCode.NONE:
                return initialized.error, None
            outcome = await persister.read(key, leader_epoch)
        if outcome.error != ErrorCode.NONE:
            return outcome.error, None
        if partition.leader_epoch != leader_epoch or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        try:
            share_partition = SharePartition.from_persisted(
                key.group_id,
                key.topic_id,
                key.partition,
                leader_epoch=leader_epoch,
                config=config,
                clock=self._time.milliseconds,
                persisted=PersistedState(
                    outcome.state_epoch, outcome.start_offset, outcome.state_batches
                ),
                log_start_offset=partition.log_start_offset,
                latest_offset=partition.high_watermark,
            )
        except ShareStateError:
            log.exception("share-partition %s cannot load its state", key)
            return ErrorCode.UNKNOWN_SERVER_ERROR, None
        held = _Held(share_partition, topic, partition)
        self._held[key] = held
        return ErrorCode.NONE, held

    def _drop(self, key: SharePartitionKey) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            if held.timer is not None:
                held.timer.cancel()
            self._wake(held)

    def held(self) -> Iterable[tuple[SharePartitionKey, SharePartition]]:
        return ((k, h.share_partition) for k, h in self._held.items())

    # ---- writes, timers, waiters ----

    async def _write(self, key: SharePartitionKey, held: _Held, write: StateWrite) -> ErrorCode:
        async with held.writes:
            persister = self._persister()
            if persister is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            outcome = await persister.write(
                key, write.state_epoch, write.leader_epoch, write.start_offset, write.state_batches
            )
        if outcome.error in _FENCED and self._held.get(key) is held:
            # The state moved on (re-initialized, or another leader): built again when next used.
            self._drop(key)
        return outcome.error

    async def _write_transition(
        self, key: SharePartitionKey, held: _Held, transition: Transition
    ) -> ErrorCode:
        error = await self._write(key, held, transition.write)
        held.share_partition.complete(transition, error == ErrorCode.NONE)
        self._after_change(key, held)
        return error

    def _after_change(self, key: SharePartitionKey, held: _Held) -> None:
        """Write what changed outside transitions, wake waiting fetches, set the timer."""
        sp = held.share_partition
        pending = sp.expire_locks()
        if pending is not None:
            asyncio.ensure_future(self._write_dirty(key, held, pending))
        self._wake(held)
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        deadline = sp.next_lock_deadline()
        if deadline is not None and self._held.get(key) is held:
            delay = max(0, deadline - self._time.milliseconds()) / 1000
            held.timer = self._time.call_later(delay + 0.001, self._on_timer, key, held)

    async def _write_dirty(self, key: SharePartitionKey, held: _Held, write: StateWrite) -> None:
        error = await self._write(key, held, write)
        if error != ErrorCode.NONE:
            log.warning("share-partition %s: state write failed: %s", key, error.name)

    def _on_timer(self, key: SharePartitionKey, held: _Held) -> None:
        held.timer = None
        if self._held.get(key) is not held:
            return
        partition = held.partition
        if (
            not partition.is_leader
            or partition.leader_epoch != held.share_partition.leader_epoch
            or self._replicas.get_partition(held.topic, key.partition) is not partition
        ):
            self._drop(key)  # its next leader builds it from the share coordinator
            return
        self._after_change(key, held)

    def _wake(self, held: _Held) -> None:
        waiters, held.waiters = held.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- fetch ----

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        partitions: list[TopicIdPartition],
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        min_bytes: int = 1,
        batch_size: int = 0,
    ) -> dict[TopicIdPartition, PartitionFetch]:
        """Acquire for ``member_id`` from ``partitions`` (see the module)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        # Partitions whose load this fetch waited for, in the order the loads ended: each
        # is tried on its own, first to last, as Kafka tries a waiting share fetch again
        # when one share-partition finishes initializing; the first to acquire answers.
        loaded: list[TopicIdPartition] = []
        waited: set[asyncio.Future[Any]] = set()
        while True:
            read_committed = self._group_values(group_id)[SHARE_ISOLATION_LEVEL] == "read_committed"
            out: dict[TopicIdPartition, PartitionFetch] = {}
            ready: list[tuple[TopicIdPartition, SharePartitionKey, _Held]] = []
            fresh: dict[TopicIdPartition, tuple[TopicIdPartition, SharePartitionKey, _Held]] = {}
            loading: list[asyncio.Future[Any]] = []
            for tp in partitions:
                error, held, load = self._lookup(group_id, tp[0], tp[1])
                if load is not None:
                    loading.append(load)
                    if load not in waited:
                        waited.add(load)
                        load.add_done_callback(_appender(loaded, tp))
                elif held is None:
                    out[tp] = PartitionFetch(error)
                elif tp in loaded:
                    fresh[tp] = (tp, SharePartitionKey(group_id, tp[0], tp[1]), held)
                else:
                    ready.append((tp, SharePartitionKey(group_id, tp[0], tp[1]), held))
            acquired_any = False
            if max_bytes > 0:
                # At the deadline whatever is there answers (Kafka's delayed fetch expiring).
                least = min_bytes if loop.time() < deadline else 1
                limits = (max_bytes, max_records, least, batch_size)
                acquired_any = self._acquire(member_id, ready, limits, read_committed, out)
                for tp in [tp for tp in loaded if tp in fresh]:
                    if acquired_any or out:
                        break
                    acquired_any = self._acquire(
                        member_id, [fresh[tp]], limits, read_committed, out
                    )
            loaded.clear()
            remaining = deadline - loop.time()
            if acquired_any or remaining <= 0 or out or not (ready or fresh or loading):
                for tp in partitions:
                    out.setdefault(tp, PartitionFetch())
                return out
            await self._wait(
                [*ready, *fresh.values()], loading, remaining, max_bytes, min_bytes, read_committed
            )

    def _acquire(
        self,
        member_id: str,
        ready: list[tuple[TopicIdPartition, SharePartitionKey, _Held]],
        limits: tuple[int, int, int, int],
        read_committed: bool,
        out: dict[TopicIdPartition, PartitionFetch],
    ) -> bool:
        """Read and acquire from ``ready`` into ``out`` within ``limits`` (max bytes, max
        records, min bytes, batch size); nothing when the reads hold fewer than min bytes
        and no error. Whether anything was acquired."""
        max_bytes, max_records, min_bytes, batch_size = limits
        infos: list[_Info] = []
        reading = []
        for tp, key, held in ready:
            sp = held.share_partition
            sp.update_log_start_offset(held.partition.log_start_offset)
            if sp.can_acquire():
                infos.append(_Info(held.topic, tp[1], sp.next_fetch_offset(), max_bytes))
                reading.append((tp, key, held))
        if not infos:
            return False
        params = FetchParams(-1, 0, 1, max_bytes, read_committed=read_committed)
        reads = self._replicas.read_from_local_log(params, list(infos)).reads
        datas: list[bytes] = []
        for (tp, _, _), read in zip(reading, reads, strict=True):
            records = read.records
            if read.error_code != 0:
                out[tp] = PartitionFetch(ErrorCode(read.error_code))  # type: ignore[call-arg]
                datas.append(b"")
            elif isinstance(records, DeferredRecords):
                datas.append(bytes(records.source.read()))  # type: ignore[attr-defined]
            else:
                datas.append(bytes(records))  # type: ignore[arg-type]
        if not out and sum(len(d) for d in datas) < min_bytes:
            return False  # Kafka's DelayedShareFetch waits while MinBytes is not there
        acquired_any = False
        budget = max_records
        for (tp, key, held), info, read, data in zip(reading, infos, reads, datas, strict=True):
            if read.error_code != 0:
                continue
            batches = fetched_batches(data)
            if not batches or budget <= 0:
                continue
            sp = held.share_partition
            acquired = sp.acquire(
                member_id,
                info.fetch_offset,
                [b[0] for b in batches],
                budget,
                (read.aborted or []) if read_committed else None,
            )
            self._after_change(key, held)
            if not acquired:
                continue
            acquired_any = True
            budget -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            acquired = split_acquired(acquired, [b[0] for b in batches], batch_size)
            out[tp] = PartitionFetch(records=_covering(data, batches, acquired), acquired=acquired)
        return acquired_any

    async def _wait(
        self,
        ready: list[tuple[TopicIdPartition, SharePartitionKey, _Held]],
        loading: list[asyncio.Future[Any]],
        remaining_s: float,
        max_bytes: int,
        min_bytes: int,
        read_committed: bool,
    ) -> None:
        """Until records may be there to acquire: appended past a share-partition's end
        offset (its last stable offset moving, for read_committed), available again, or a
        share-partition loaded; at most ``remaining_s``."""
        loop = asyncio.get_running_loop()
        mine: list[tuple[_Held, asyncio.Future[None]]] = []
        for _, _, held in ready:
            waiter: asyncio.Future[None] = loop.create_future()
            held.waiters.append(waiter)
            mine.append((held, waiter))
        waiters: list[asyncio.Future[Any]] = [w for _, w in mine] + loading
        infos = [
            _Info(held.topic, tp[1], held.share_partition.end_offset, max_bytes)
            for tp, _, held in ready
            if held.share_partition.can_acquire()
        ]
        if infos and max_bytes > 0:
            params = FetchParams(
                -1,
                int(remaining_s * 1000),
                max(1, min_bytes),
                max_bytes,
                read_committed=read_committed,
            )
            appended = self._replicas.fetch_messages(params, list(infos))
            if isinstance(appended, asyncio.Future):
                waiters.append(appended)
            else:  # records there but none acquired: look again shortly
                remaining_s = min(remaining_s, 0.05)
        try:
            await asyncio.wait(waiters, timeout=remaining_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for held, waiter in mine:
                if not waiter.done():
                    waiter.cancel()
                    if waiter in held.waiters:
                        held.waiters.remove(waiter)

    # ---- acknowledge and release ----

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicIdPartition,
        batches: list[AcknowledgementBatch],
    ) -> ErrorCode:
        error, held = await self.share_partition(group_id, tp[0], tp[1])
        if held is None:
            return error
        key = SharePartitionKey(group_id, tp[0], tp[1])
        result = held.share_partition.acknowledge(member_id, batches)
        if result.error_code != ErrorCode.NONE or result.transition is None:
            self._after_change(key, held)
            return ErrorCode(result.error_code)  # type: ignore[call-arg]
        return await self._completed(key, held, result.transition)

    async def _completed(
        self, key: SharePartitionKey, held: _Held, transition: Transition
    ) -> ErrorCode:
        """A transition written and completed; a cancelled caller (its connection closed)
        leaves it to finish, so no record stays in a transition for ever."""
        return await asyncio.shield(
            asyncio.ensure_future(self._write_transition(key, held, transition))
        )

    async def release(self, group_id: str, member_id: str, tps: Iterable[TopicIdPartition]) -> None:
        """Release what ``member_id`` holds in the share-partitions held here of ``tps``."""
        for tp in tps:
            key = SharePartitionKey(group_id, tp[0], tp[1])
            held = self._held.get(key)
            if held is None:
                continue
            transition = held.share_partition.release_acquired_records(member_id)
            if transition is not None:
                error = await self._completed(key, held, transition)
                if error != ErrorCode.NONE:
                    log.warning("share-partition %s: release failed: %s", key, error.name)

    def close(self) -> None:
        for key in list(self._held):
            self._drop(key)
