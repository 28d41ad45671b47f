"""The groups this broker coordinates and their persistence in ``__consumer_offsets``
(Kafka's ``GroupMetadataManager``).

- ``__consumer_offsets`` is created on first use, compacted, with
  ``offsets.topic.num.partitions`` partitions; a group lives in partition
  :func:`~broker_py.coordinator.group.group_metadata_records.partition_for` of its id.
- Offset commits and group metadata are appended there as one record batch per
  write, in Kafka's record formats (:mod:`broker_py.coordinator.group.group_metadata_records`), and
  the in-memory state changes only after the append succeeded.
- The groups of a partition are this broker's while it leads that partition
  (Kafka's ``onElection`` / ``onResignation``): on election they are rebuilt from the
  partition's log (the latest record per key wins, tombstones delete; a group with
  members is Stable with them, their assignments and its generation, and their
  sessions start at the load, as Kafka's ``loadGroup`` / ``onGroupLoaded`` do), and
  requests for them get COORDINATOR_LOAD_IN_PROGRESS meanwhile; on resignation they
  are dropped, and requests get NOT_COORDINATOR. At start the partitions led then are
  loaded. An empty partition is owned at once.
- Offsets expire after ``offsets.retention.minutes`` (counted from when an Empty
  group became Empty, or from each commit for groups that only store offsets); an
  Empty group left without offsets is removed and gets a tombstone.
- A transactional offset commit (TxnOffsetCommit) is appended as a transactional
  batch of its producer and kept pending in the group; the COMMIT marker makes it the
  group's offsets, the ABORT marker drops it. On load, offsets whose transaction has
  no marker yet are pending again.
- Record timestamps, offset expiry and load times read the injected
  :class:`~broker_py.utils.time.Time`.
- Consumer-group records (KIP-848, key types 3-8 and 16,
  :mod:`broker_py.coordinator.group.modern.record_serde`) are not groups of this manager:
  a load decodes them and hands them, in log order and tombstones included, to
  ``consumer_group_loader(partition, records)`` (the consumer-group coordinator's). A group
  id's classic metadata record and its consumer-group records supersede each other, the
  later in the log winning as in Kafka's loader: a consumer-group record (not a tombstone)
  drops the classic group read before it, a classic metadata record (not a tombstone)
  drops the consumer-group records read before it. Share-group records (key types 10-14,
  :mod:`broker_py.coordinator.group.modern.share.record_serde`) travel the same way, to
  the same loader. Other record types (streams groups) are skipped with a warning, as
  Kafka's loader skips types it does not know.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import logstore
from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata import (
    Group,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
)
from broker_py.coordinator.group.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    InvalidGroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from broker_py.coordinator.group.modern import record_serde
from broker_py.coordinator.group.modern.records import Record as ConsumerGroupRecord
from broker_py.coordinator.group.modern.share import record_serde as share_record_serde
from broker_py.coordinator.operation_errors import operation_error
from broker_py.coordinator.partition_loads import PartitionLoads
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.partition_writer import PartitionWriter, TopicMetadata

log = logging.getLogger(__name__)

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

Record = tuple[bytes, bytes | None, list, int]

# Called with an offsets partition and its consumer-group records, in log order.
ConsumerGroupLoader = Callable[[int, list[ConsumerGroupRecord]], None]


def _keep_out(partition: int, records: list[ConsumerGroupRecord]) -> None:
    """The loader of a manager without a consumer-group coordinator: records stay unread."""


def offset_commit_error(error: ErrorCode) -> ErrorCode:
    """Kafka's ``maybeConvertOffsetCommitError``: a failed offset append or transaction
    verification as an offset commit answers it."""
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    if error == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retried without a coordinator lookup
    if error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return operation_error(error)


class GroupMetadataManager:
    def __init__(
        self,
        config: BrokerConfig,
        writer: PartitionWriter,
        *,
        cluster: bool,
        time: Time = SYSTEM_TIME,
        consumer_group_loader: ConsumerGroupLoader = _keep_out,
    ) -> None:
        self.config = config
        self.consumer_group_loader = consumer_group_loader
        self._writer = writer
        self.time = time
        self.groups: dict[str, Group] = {}
        # producer id -> ids of groups holding its pending transactional offsets
        self._txn_groups: dict[int, set[str]] = {}
        # Offsets partition being loaded -> the (producer id, commit) of each marker
        # written to it since its load began, in order: replayed once the load has
        # registered the open transactions it read (Kafka runs loads and transaction
        # completions on one scheduler thread, so a completion waits for the load).
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        # Offsets partitions whose groups are this broker's, and those being loaded.
        self.owned: set[int] = set()
        self.loads = PartitionLoads(
            OFFSETS_TOPIC, writer, self.load_partition, self.owned.__contains__, self.owned.add
        )
        self.loading = self.loads.loading
        # In a cluster a group whose offsets partition does not exist yet is nobody's.
        self.cluster = cluster
        # Called with each group a load rebuilt from its metadata record (the
        # coordinator starts its members' sessions: Kafka's onGroupLoaded).
        self.on_group_loaded: Callable[[Group], None] | None = None

    # ---- groups ----

    def get_group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def add_group(self, group: Group) -> Group:
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group: Group) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def current_groups(self) -> list[Group]:
        return list(self.groups.values())

    # ---- the offsets topic ----

    def ensure_offsets_topic(self) -> TopicMetadata:
        return self._writer.ensure_topic(
            OFFSETS_TOPIC,
            self.config["offsets.topic.num.partitions"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
            },
        )

    def num_partitions(self) -> int:
        topic = self._writer.topic(OFFSETS_TOPIC)
        return (
            topic.partitions if topic is not None else self.config["offsets.topic.num.partitions"]
        )

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    def _append(
        self,
        group_id: str,
        records: list[Record],
        callback: Callable[[ErrorCode], None],
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Appends one batch to the group's partition with acks=-1
        (``offsets.commit.timeout.ms``), then calls ``callback`` with the append's error
        (NONE once committed). ``producer`` (id, epoch) makes it a transactional batch of
        that producer."""
        try:
            topic = self.ensure_offsets_topic()
        except KafkaError as e:
            log.warning("append to %s for group %s failed: %s", OFFSETS_TOPIC, group_id, e)
            callback(e.errno)
            return
        if producer is None:
            data = logstore.encode_batch(records)
        else:
            data = logstore.encode_batch(
                records, producer_id=producer[0], producer_epoch=producer[1], transactional=True
            )

        def appended(error: ErrorCode, message: str | None) -> None:
            if error != ErrorCode.NONE:
                log.warning(
                    "append to %s for group %s failed (%s): %s",
                    OFFSETS_TOPIC,
                    group_id,
                    error.name,
                    message,
                )
            callback(error)

        self._writer.append(
            (OFFSETS_TOPIC, partition_for(group_id, topic.partitions)),
            data,
            self.config["offsets.commit.timeout.ms"],
            appended,
            producer is not None,
        )

    # ---- writes ----

    def group_metadata_value(self, group: Group, assignment: dict[str, bytes]) -> bytes:
        members = []
        if group.members:
            if group.protocol_name is None:
                raise ValueError(f"group {group.group_id} has members but no selected protocol")
            for m in group.members.values():
                members.append(
                    MemberMetadataValue(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout=m.rebalance_timeout_ms,
                        session_timeout=m.session_timeout_ms,
                        subscription=m.metadata(group.protocol_name),
                        assignment=assignment.get(m.member_id, b""),
                    )
                )
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp
            if group.current_state_timestamp is not None
            else -1,
            members=members,
        )
        return encode_group_metadata_value(value)

    def store_group(
        self, group: Group, assignment: dict[str, bytes], callback: Callable[[ErrorCode], None]
    ) -> None:
        """Writes the group's metadata with ``assignment``, then calls ``callback`` with
        the client-facing error."""
        record = (
            encode_group_metadata_key(group.group_id),
            self.group_metadata_value(group, assignment),
            [],
            self.time.milliseconds(),
        )
        self._append(
            group.group_id,
            [record],
            lambda error: callback(operation_error(error)),
        )

    def store_records(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        callback: Callable[[ErrorCode], None],
    ) -> None:
        """Appends (key, value) records of the group (None: a tombstone) as one batch,
        then calls ``callback`` with the client-facing error (NONE once committed)."""
        timestamp = self.time.milliseconds()
        self._append(
            group_id,
            [(key, value, [], timestamp) for key, value in records],
            lambda error: callback(operation_error(error)),
        )

    def store_offsets(
        self,
        group: Group,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        callback: Callable[[dict], None],
    ) -> None:
        """Writes offset commits, then calls ``callback`` with each one's error; those
        whose metadata is too long are refused alone. The group takes the offsets once
        they are written."""

        def written(errors, accepted) -> None:
            if accepted and not group.is_(GroupState.DEAD):
                group.offsets.update(accepted)
            callback(errors)

        self._write_offsets(group, offsets, written)

    def store_txn_offsets(
        self,
        group: Group,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        callback: Callable[[dict], None],
    ) -> None:
        """Writes offset commits in the producer's transaction, then calls ``callback``
        with each one's error; they stay pending until its marker."""

        def written(errors, accepted) -> None:
            if accepted:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
                self._txn_groups.setdefault(producer_id, set()).add(group.group_id)
            callback(errors)

        self._write_offsets(group, offsets, written, (producer_id, producer_epoch))

    def _write_offsets(
        self,
        group: Group,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        callback,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Appends the offsets whose metadata fits ``offset.metadata.max.bytes`` as one
        batch, then calls ``callback(the error of every offset, the offsets written)``."""
        max_metadata = self.config["offset.metadata.max.bytes"]
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, o in offsets.items():
            if len(o.metadata) > max_metadata:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = o
        if not accepted:
            callback(errors, {})
            return
        timestamp = self.time.milliseconds()
        records = [
            (
                encode_offset_commit_key(group.group_id, topic, partition),
                encode_offset_commit_value(
                    o.offset, o.leader_epoch, o.metadata, o.commit_timestamp
                ),
                [],
                timestamp,
            )
            for (topic, partition), o in accepted.items()
        ]

        def appended(error: ErrorCode) -> None:
            if error:
                error = offset_commit_error(error)
            for tp in accepted:
                errors[tp] = error
            callback(errors, {} if error else accepted)

        self._append(group.group_id, records, appended, producer)

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, commit: bool) -> None:
        """Applies (COMMIT) or drops (ABORT) the producer's pending offsets of the groups
        in ``offsets_partition``; while that partition loads, once its load is done.

        A marker written during a load may be past the log end the load read: the
        load then finds the transaction open, and the marker must end it after. One the
        load read ends nothing after it: no transactional offsets are written to a
        partition while it loads, so the load finds no open transaction of the producer
        after that marker."""
        deferred = self._markers_while_loading.get(offsets_partition)
        if deferred is not None and offsets_partition in self.loading:
            deferred.append((producer_id, commit))
            log.info(
                "%s marker of producer %d on %s-%d while it loads: applied after the load",
                "COMMIT" if commit else "ABORT",
                producer_id,
                OFFSETS_TOPIC,
                offsets_partition,
            )
            return
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in list(group_ids):
            if self.partition_for(group_id) != offsets_partition:
                continue
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, {})
            if commit and not group.is_(GroupState.DEAD):
                group.offsets.update(pending)
        if not group_ids:
            del self._txn_groups[producer_id]

    def cleanup_group_metadata(
        self, groups: Iterable[Group], selector: Callable[[Group], list[tuple[str, int]]]
    ) -> int:
        """Removes the offsets ``selector`` picks from each group and writes their
        tombstones; an Empty group left without offsets becomes Dead and is removed
        (with a group tombstone unless it only ever stored offsets)."""
        removed_total = 0
        timestamp = self.time.milliseconds()
        for group in groups:
            removed = selector(group)
            for tp in removed:
                group.offsets.pop(tp, None)
            if (
                group.is_(GroupState.EMPTY)
                and not group.offsets
                and not group.pending_txn_offsets
                and not group.pending_members
            ):
                group.transition_to(GroupState.DEAD)
            records: list[Record] = [
                (encode_offset_commit_key(group.group_id, topic, partition), None, [], timestamp)
                for topic, partition in removed
            ]
            if group.is_(GroupState.DEAD):
                self.remove_group(group)
                if group.generation_id > 0:
                    records.append((encode_group_metadata_key(group.group_id), None, [], timestamp))
            if records:

                def written(error: ErrorCode, group_id: str = group.group_id) -> None:
                    if error:
                        log.warning(
                            "tombstones for group %s were not written: %s", group_id, error.name
                        )

                self._append(group.group_id, records, written)
            removed_total += len(removed)
        return removed_total

    def expire_offsets(self, now: int | None = None) -> int:
        now = self.time.milliseconds() if now is None else now
        retention_ms = self.config["offsets.retention.minutes"] * 60_000
        removed = self.cleanup_group_metadata(
            self.current_groups(), lambda g: g.expired_offsets(now, retention_ms)
        )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # ---- loading ----

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """COORDINATOR_LOAD_IN_PROGRESS while the group's partition loads,
        NOT_COORDINATOR when another broker leads it; None when the group is this
        broker's (or, on a broker alone, before the offsets topic exists)."""
        topic = self._writer.topic(OFFSETS_TOPIC)
        if topic is None:
            return ErrorCode.NOT_COORDINATOR if self.cluster else None
        return self.loads.coordinator_error(partition_for(group_id, topic.partitions))

    def led_partitions(self) -> list[int]:
        return self.loads.led_partitions()

    async def load(self) -> None:
        """Loads every offsets partition this broker leads now."""
        for p in self.led_partitions():
            await self.load_partition(p)
        log.info(
            "loaded %d groups from %d partitions of %s",
            len(self.groups),
            len(self.owned),
            OFFSETS_TOPIC,
        )

    def on_election(self, p: int) -> None:
        """This broker now leads offsets partition ``p``: its groups load (at once when
        the partition is empty)."""
        self.loads.on_election(p)

    def on_resignation(self, p: int) -> list[Group]:
        """This broker no longer leads offsets partition ``p``: its groups go; returns them."""
        self.owned.discard(p)
        self.loads.on_resignation(p)
        self._markers_while_loading.pop(p, None)
        topic = self._writer.topic(OFFSETS_TOPIC)
        partitions = (
            topic.partitions if topic is not None else self.config["offsets.topic.num.partitions"]
        )
        gone = [g for g in self.groups.values() if partition_for(g.group_id, partitions) == p]
        for group in gone:
            del self.groups[group.group_id]
        ids = {g.group_id for g in gone}
        for producer_id in list(self._txn_groups):
            self._txn_groups[producer_id] -= ids
            if not self._txn_groups[producer_id]:
                del self._txn_groups[producer_id]
        if gone:
            log.info(
                "dropped %d groups of %s-%d: this broker no longer leads it",
                len(gone),
                OFFSETS_TOPIC,
                p,
            )
        return gone

    async def load_partition(self, p: int) -> None:
        """Rebuilds the groups of offsets partition ``p`` from its log, start to end."""
        self._markers_while_loading[p] = []
        read = await self.loads.read(p, LOAD_BUFFER_BYTES)
        if read is None:
            self._markers_while_loading.pop(p, None)
            return
        records, open_txns = read
        offsets: dict[tuple[str, str, int], OffsetAndMetadata] = {}
        metadata: dict[str, GroupMetadataValue] = {}
        pending: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}
        modern = _ConsumerGroupRecords()
        for key, value in records:
            _apply_record(key, value, offsets, metadata, modern)
        for producer_id, txn_records in open_txns.items():
            for key, value in txn_records:
                _apply_record(key, value, pending.setdefault(producer_id, {}), {}, None)
        loaded_at = self.time.milliseconds()
        for group_id, value in metadata.items():
            self.groups[group_id] = loaded_group(group_id, value, loaded_at)
        for (group_id, topic_name, partition_index), o in offsets.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, loaded_at)
                group.current_state_timestamp = None
            group.offsets[(topic_name, partition_index)] = o
        for producer_id, txn_offsets in pending.items():
            for (group_id, topic_name, partition_index), o in txn_offsets.items():
                group = self.groups.get(group_id)
                if group is None:
                    group = self.groups[group_id] = Group(group_id, loaded_at)
                    group.current_state_timestamp = None
                group.pending_txn_offsets.setdefault(producer_id, {})[
                    (topic_name, partition_index)
                ] = o
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
        for producer_id, commit in self._markers_while_loading.pop(p, []):
            self.complete_txn_offsets(producer_id, p, commit)
        self.consumer_group_loader(p, modern.in_log_order())
        self.loading.discard(p)
        self.owned.add(p)
        if metadata or offsets or pending:
            log.info(
                "loaded %d groups and %d offsets from %s-%d (%d open transactions' offsets)",
                len(metadata),
                len(offsets),
                OFFSETS_TOPIC,
                p,
                len(pending),
            )
        if self.on_group_loaded is not None:
            for group_id in metadata:
                self.on_group_loaded(self.groups[group_id])


def loaded_group(group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
    """The group a metadata record describes (Kafka's ``GroupMetadata.loadGroup``):
    Stable with its members, their subscriptions in the selected protocol and their
    assignments when it has members, else Empty; generation, protocol and leader as
    written."""
    members = value.members if value.protocol is not None else []
    group = Group(group_id, now_ms, GroupState.STABLE if members else GroupState.EMPTY)
    for m in members:
        member = MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            value.protocol_type,
            [(value.protocol, m.subscription)],
        )
        member.assignment = m.assignment
        group.add(member)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    if value.current_state_timestamp >= 0:
        group.current_state_timestamp = value.current_state_timestamp
    if members:
        group.protocol_name = value.protocol
        if value.leader in group.members:
            group.leader_id = value.leader
    return group


class _ConsumerGroupRecords:
    """The consumer-group records of a load, in log order, without those a later classic
    metadata record of their group superseded."""

    def __init__(self) -> None:
        self.records: list[ConsumerGroupRecord] = []
        # group id -> how many records were read when its classic metadata record was.
        self.superseded_before: dict[str, int] = {}

    def add(self, record: ConsumerGroupRecord) -> None:
        self.records.append(record)

    def supersede(self, group_id: str) -> None:
        self.superseded_before[group_id] = len(self.records)

    def in_log_order(self) -> list[ConsumerGroupRecord]:
        cut = self.superseded_before
        return [r for i, r in enumerate(self.records) if i >= cut.get(r.group_id, 0)]


def _apply_record(
    key_bytes: bytes,
    value: bytes | None,
    offsets: dict[tuple[str, str, int], OffsetAndMetadata],
    metadata: dict[str, GroupMetadataValue],
    modern: _ConsumerGroupRecords | None,
) -> None:
    try:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            tp = (key.group, key.topic, key.partition)
            if value is None:
                offsets.pop(tp, None)
            else:
                v = decode_offset_commit_value(value)
                offsets[tp] = OffsetAndMetadata(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                )
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                metadata.pop(key.group, None)
            else:
                metadata[key.group] = decode_group_metadata_value(value)
                if modern is not None:
                    modern.supersede(key.group)
        elif modern is not None:
            record = record_serde.deserialize(key_bytes, value)
            if record is None:
                record = share_record_serde.deserialize(key_bytes, value)
            if record is None:
                log.warning(
                    "skipping a %s record of unknown type %d",
                    OFFSETS_TOPIC,
                    int.from_bytes(key_bytes[:2], "big", signed=True),
                )
            else:
                if value is not None:
                    metadata.pop(record.group_id, None)
                modern.add(record)
    except InvalidGroupRecordError as e:
        log.error("skipping unreadable %s record: %s", OFFSETS_TOPIC, e)
