"""The groups this broker coordinates and their persistence in ``__consumer_offsets``
(Kafka's ``GroupMetadataManager``).

- ``__consumer_offsets`` is created on first use, compacted, with
  ``offsets.topic.num.partitions`` partitions; a group lives in partition
  :func:`~broker_py.coordinator.group.group_metadata_records.partition_for` of its id.
- Offset commits and group metadata are appended there as one record batch per
  write, in Kafka's record formats (:mod:`broker_py.coordinator.group.group_metadata_records`), and
  the in-memory state changes only after the append succeeded.
- :meth:`GroupMetadataManager.load` rebuilds every group from the log at startup:
  the latest record per key wins and tombstones delete. Loaded groups are Empty
  (their members must rejoin) and keep their generation and offsets.
- Offsets expire after ``offsets.retention.minutes`` (counted from when an Empty
  group became Empty, or from each commit for groups that only store offsets); an
  Empty group left without offsets is removed and gets a tombstone.
- A transactional offset commit (TxnOffsetCommit) is appended as a transactional
  batch of its producer and kept pending in the group; the COMMIT marker makes it the
  group's offsets, the ABORT marker drops it. On load, offsets whose transaction has
  no marker yet are pending again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

import logstore

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from broker_py.coordinator.group.group_metadata import Group, GroupState, OffsetAndMetadata
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

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

Record = tuple[bytes, bytes | None, list, int]


def now_ms() -> int:
    return int(time.time() * 1000)


def _group_append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed group metadata append to the client's error."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _offset_append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's ``maybeConvertOffsetCommitError``."""
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return _group_append_error(error)


class GroupMetadataManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.groups: dict[str, Group] = {}
        # producer id -> ids of groups holding its pending transactional offsets
        self._txn_groups: dict[int, set[str]] = {}

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

    def ensure_offsets_topic(self):
        return self.broker.ensure_topic(
            OFFSETS_TOPIC,
            self.config["offsets.topic.num.partitions"],
            {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])},
        )

    def num_partitions(self) -> int:
        topic = self.broker.metadata.get(OFFSETS_TOPIC)
        return topic.partitions if topic is not None else self.config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    def _append(self, group_id: str, records: list[Record], producer: tuple[int, int] | None = None) -> ErrorCode:
        """Appends one batch to the group's partition; the raw storage error, if any.
        ``producer`` (id, epoch) makes it a transactional batch of that producer."""
        try:
            topic = self.ensure_offsets_topic()
            partition = self.broker.partition(OFFSETS_TOPIC, partition_for(group_id, topic.partitions))
            if producer is None:
                data = logstore.encode_batch(records)
            else:
                data = logstore.encode_batch(records, producer_id=producer[0], producer_epoch=producer[1], transactional=True)
            first, last = partition.log.append(data, leader_epoch=partition.leader_epoch)
            if producer is not None:
                for batch in logstore.decode_batches(data, records=False):
                    partition.producer_state.record(batch, first, last)
        except KafkaError as e:
            log.warning("append to %s for group %s failed: %s", OFFSETS_TOPIC, group_id, e)
            return e.errno
        except logstore.RecordTooLargeError as e:
            log.warning("append to %s for group %s failed: %s", OFFSETS_TOPIC, group_id, e)
            return ErrorCode.MESSAGE_TOO_LARGE
        except logstore.CorruptRecordError as e:
            log.error("append to %s for group %s failed: %s", OFFSETS_TOPIC, group_id, e)
            return ErrorCode.CORRUPT_MESSAGE
        except logstore.LogStoreError as e:
            return partition.storage_error(e).errno  # logged there, at most every few seconds
        partition.notify_append()
        return ErrorCode.NONE

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
            current_state_timestamp=group.current_state_timestamp if group.current_state_timestamp is not None else -1,
            members=members,
        )
        return encode_group_metadata_value(value)

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> ErrorCode:
        """Writes the group's metadata with ``assignment``; the client-facing error."""
        record = (encode_group_metadata_key(group.group_id), self.group_metadata_value(group, assignment), [], now_ms())
        error = self._append(group.group_id, [record])
        return _group_append_error(error) if error else ErrorCode.NONE

    def store_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], ErrorCode]:
        """Writes offset commits; those whose metadata is too long are refused alone."""
        errors, accepted = self._write_offsets(group, offsets)
        if accepted and not group.is_(GroupState.DEAD):
            group.offsets.update(accepted)
        return errors

    def store_txn_offsets(
        self, group: Group, producer_id: int, producer_epoch: int, offsets: dict[tuple[str, int], OffsetAndMetadata]
    ) -> dict[tuple[str, int], ErrorCode]:
        """Writes offset commits in the producer's transaction; they stay pending
        until its marker."""
        errors, accepted = self._write_offsets(group, offsets, (producer_id, producer_epoch))
        if accepted:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
            self._txn_groups.setdefault(producer_id, set()).add(group.group_id)
        return errors

    def _write_offsets(
        self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata], producer: tuple[int, int] | None = None
    ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
        """Appends the offsets whose metadata fits ``offset.metadata.max.bytes`` as one
        batch: (the error of every offset, the offsets written)."""
        max_metadata = self.config["offset.metadata.max.bytes"]
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, o in offsets.items():
            if len(o.metadata) > max_metadata:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = o
        if not accepted:
            return errors, {}
        timestamp = now_ms()
        records = [
            (
                encode_offset_commit_key(group.group_id, topic, partition),
                encode_offset_commit_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp),
                [],
                timestamp,
            )
            for (topic, partition), o in accepted.items()
        ]
        error = self._append(group.group_id, records, producer)
        if error:
            error = _offset_append_error(error)
        for tp in accepted:
            errors[tp] = error
        return errors, {} if error else accepted

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, commit: bool) -> None:
        """Applies (COMMIT) or drops (ABORT) the producer's pending offsets of the groups
        in ``offsets_partition``."""
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

    def cleanup_group_metadata(self, groups: Iterable[Group], selector: Callable[[Group], list[tuple[str, int]]]) -> int:
        """Removes the offsets ``selector`` picks from each group and writes their
        tombstones; an Empty group left without offsets becomes Dead and is removed
        (with a group tombstone unless it only ever stored offsets)."""
        removed_total = 0
        timestamp = now_ms()
        for group in groups:
            removed = selector(group)
            for tp in removed:
                group.offsets.pop(tp, None)
            if group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_txn_offsets and not group.pending_members:
                group.transition_to(GroupState.DEAD)
            records: list[Record] = [
                (encode_offset_commit_key(group.group_id, topic, partition), None, [], timestamp) for topic, partition in removed
            ]
            if group.is_(GroupState.DEAD):
                self.remove_group(group)
                if group.generation_id > 0:
                    records.append((encode_group_metadata_key(group.group_id), None, [], timestamp))
            if records:
                error = self._append(group.group_id, records)
                if error:
                    log.warning("tombstones for group %s were not written: %s", group.group_id, error.name)
            removed_total += len(removed)
        return removed_total

    def expire_offsets(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        retention_ms = self.config["offsets.retention.minutes"] * 60_000
        removed = self.cleanup_group_metadata(self.current_groups(), lambda g: g.expired_offsets(now, retention_ms))
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # ---- loading ----

    async def load(self) -> None:
        """Reads every ``__consumer_offsets`` partition from log start to log end."""
        topic = self.broker.metadata.get(OFFSETS_TOPIC)
        if topic is None:
            return
        offsets: dict[tuple[str, str, int], OffsetAndMetadata] = {}
        metadata: dict[str, GroupMetadataValue] = {}
        pending: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}
        for p in range(topic.partitions):
            try:
                partition = self.broker.partition(OFFSETS_TOPIC, p)
            except KafkaError:
                log.warning("%s-%d is not open; its groups are not loaded", OFFSETS_TOPIC, p)
                continue
            records, open_txns = await asyncio.to_thread(_read_partition, partition.log)
            for key, value in records:
                _apply_record(key, value, offsets, metadata)
            for producer_id, txn_records in open_txns.items():
                for key, value in txn_records:
                    _apply_record(key, value, pending.setdefault(producer_id, {}), {})
        loaded_at = now_ms()
        for group_id, value in metadata.items():
            group = Group(group_id, loaded_at)
            group.generation_id = value.generation
            group.protocol_type = value.protocol_type or None
            if not value.members and value.current_state_timestamp >= 0:
                group.current_state_timestamp = value.current_state_timestamp
            self.groups[group_id] = group
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
                group.pending_txn_offsets.setdefault(producer_id, {})[(topic_name, partition_index)] = o
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
        log.info("loaded %d groups and %d offsets from %s", len(self.groups), len(offsets), OFFSETS_TOPIC)


def _read_partition(plog: logstore.Log) -> tuple[list[tuple[bytes, bytes | None]], dict[int, list[tuple[bytes, bytes | None]]]]:
    """(key, value) of every committed record of one partition, in offset order (a
    transaction's records at its COMMIT marker), and those of each producer's
    transaction that has no marker yet."""
    out: list[tuple[bytes, bytes | None]] = []
    pending_txn: dict[int, list[tuple[bytes, bytes | None]]] = {}
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = plog.read(offset, LOAD_BUFFER_BYTES, max_offset=end)
        batches = logstore.decode_batches(data)
        if not batches:
            break
        for batch in batches:
            if batch.is_control:
                txn = pending_txn.pop(batch.producer_id, [])
                if batch.control_type == 1:
                    out.extend(txn)
                continue
            target = pending_txn.setdefault(batch.producer_id, []) if batch.is_transactional else out
            for record in batch.records:
                if record.offset >= offset and record.key is not None:
                    target.append((record.key, record.value))
        offset = max(offset, batches[-1].last_offset + 1)
    return out, pending_txn


def _apply_record(
    key_bytes: bytes,
    value: bytes | None,
    offsets: dict[tuple[str, str, int], OffsetAndMetadata],
    metadata: dict[str, GroupMetadataValue],
) -> None:
    try:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            tp = (key.group, key.topic, key.partition)
            if value is None:
                offsets.pop(tp, None)
            else:
                v = decode_offset_commit_value(value)
                offsets[tp] = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                metadata.pop(key.group, None)
            else:
                metadata[key.group] = decode_group_metadata_value(value)
    except InvalidGroupRecordError as e:
        log.error("skipping unreadable %s record: %s", OFFSETS_TOPIC, e)
