"""The records of ``__share_group_state`` as Kafka 4.1's share coordinator writes them,
and the partition of a share-partition key.

Key: int16 record type, then the key's fields in the classic encoding (int16-length
string, 16-byte uuid, int32):

    type  key                fields
    0     ShareSnapshotKey   group_id string, topic_id uuid, partition int32
    1     ShareUpdateKey     group_id string, topic_id uuid, partition int32

Value: int16 value version 0, then the fields in the flexible encoding (arrays as an
unsigned varint length + 1; every struct closed by a tagged-field section):

    ShareSnapshotValue  snapshot_epoch int32, state_epoch int32, leader_epoch int32,
                        start_offset int64, create_timestamp int64, write_timestamp
                        int64, state_batches [first_offset int64, last_offset int64,
                        delivery_state int8, delivery_count int16]
    ShareUpdateValue    snapshot_epoch int32, leader_epoch int32, start_offset int64,
                        state_batches (as above)

A snapshot holds the whole state of a share-partition; an update holds the batches one
write changed (start_offset -1: unchanged). The timestamps (ms) are when the state was
initialized and when this snapshot of it was written. Tagged fields of later releases
(4.2's delivery_complete_count) are skipped when read. A ShareSnapshotKey with a null value is a
tombstone: the share-partition's state is gone (DeleteShareGroupState). Delivery states
stored: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED (1 ACQUIRED is read as written).

The coordinator key of a share-partition is ``"<group>:<topic id>:<partition>"``, the
topic id in Kafka's base64 form (22 characters, URL-safe, unpadded); its partition of
``__share_group_state`` is ``abs(hashCode(key)) % partitions`` as for group ids.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import uuid
from typing import Any

from broker_py.common.java_string_hash import partition_for
from logstore.protocol.errors import EncodeError, MalformedMessageError
from logstore.protocol.schema import Array, Field, Struct
from logstore.protocol.types import INT8, INT16, INT32, INT64, STRING, UUID, Reader, Writer

SNAPSHOT = 0
UPDATE = 1
_INT = re.compile(r"[+-]?[0-9]+")
VALUE_VERSION = 0


class InvalidShareRecordError(ValueError):
    """A ``__share_group_state`` record that does not parse."""


@dataclasses.dataclass(frozen=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        return coordinator_key(self.group_id, self.topic_id, self.partition)


@dataclasses.dataclass(frozen=True)
class StateBatch:
    """Offsets first..last (inclusive) in one delivery state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclasses.dataclass(frozen=True)
class ShareSnapshot:
    key: SharePartitionKey
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclasses.dataclass(frozen=True)
class ShareUpdate:
    key: SharePartitionKey
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


@dataclasses.dataclass(frozen=True)
class ShareTombstone:
    key: SharePartitionKey


ShareRecord = ShareSnapshot | ShareUpdate | ShareTombstone


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_id}:{topic_id_string(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> SharePartitionKey:
    """The share-partition a FindCoordinator SHARE key names; ValueError when it is not
    ``group:topicId:partition`` with a non-empty group, a topic id and an int32."""
    tokens = key.split(":")
    if len(tokens) != 3:
        raise ValueError(f"share coordinator key {key!r} is not group:topicId:partition")
    group_id, topic, partition = tokens[0].strip(), tokens[1], tokens[2]
    if not group_id:
        raise ValueError("share coordinator key has an empty group id")
    if len(topic) != 22:
        raise ValueError(f"share coordinator key has an invalid topic id {topic!r}")
    try:
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(topic + "=="))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"share coordinator key {key!r}: {exc}") from None
    if _INT.fullmatch(partition) is None or not -(2**31) <= int(partition) < 2**31:
        raise ValueError(f"share coordinator key {key!r} has an invalid partition")
    index = int(partition)
    return SharePartitionKey(group_id, topic_id, index)


def state_partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """The ``__share_group_state`` partition holding ``key``'s state."""
    return partition_for(key.coordinator_key(), num_partitions)


# ---- schemas ----------------------------------------------------------------------

_KEY = Struct(
    "SharePartitionKey",
    [
        Field("group_id", STRING, "0+"),
        Field("topic_id", UUID, "0+"),
        Field("partition", INT32, "0+"),
    ],
)

_STATE_BATCH = Struct(
    "StateBatch",
    [
        Field("first_offset", INT64, "0+"),
        Field("last_offset", INT64, "0+"),
        Field("delivery_state", INT8, "0+"),
        Field("delivery_count", INT16, "0+"),
    ],
)

_SNAPSHOT_VALUE = Struct(
    "ShareSnapshotValue",
    [
        Field("snapshot_epoch", INT32, "0+"),
        Field("state_epoch", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
        Field("create_timestamp", INT64, "0+"),
        Field("write_timestamp", INT64, "0+"),
        Field("state_batches", Array(_STATE_BATCH), "0+"),
    ],
)

_UPDATE_VALUE = Struct(
    "ShareUpdateValue",
    [
        Field("snapshot_epoch", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
        Field("state_batches", Array(_STATE_BATCH), "0+"),
    ],
)


def _batches_out(batches: tuple[StateBatch, ...]) -> list[Any]:
    return [
        _STATE_BATCH.cls(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in batches
    ]


def _batches_in(values: Any) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(v.first_offset, v.last_offset, v.delivery_state, v.delivery_count)
        for v in values
    )


def serialize(record: ShareRecord) -> tuple[bytes, bytes | None]:
    """The key and value bytes of ``record`` (value None: a tombstone). Raises ValueError
    for a value outside its field's range."""
    kind = UPDATE if isinstance(record, ShareUpdate) else SNAPSHOT
    k = record.key
    try:
        w = Writer()
        w.int16(kind)
        _KEY.codec(0, False).write(
            w, _KEY.cls(group_id=k.group_id, topic_id=k.topic_id, partition=k.partition)
        )
        key = w.getvalue()
        if isinstance(record, ShareTombstone):
            return key, None
        w = Writer()
        w.int16(VALUE_VERSION)
        if isinstance(record, ShareSnapshot):
            _SNAPSHOT_VALUE.codec(0, True).write(
                w,
                _SNAPSHOT_VALUE.cls(
                    snapshot_epoch=record.snapshot_epoch,
                    state_epoch=record.state_epoch,
                    leader_epoch=record.leader_epoch,
                    start_offset=record.start_offset,
                    create_timestamp=record.create_timestamp,
                    write_timestamp=record.write_timestamp,
                    state_batches=_batches_out(record.state_batches),
                ),
            )
        else:
            _UPDATE_VALUE.codec(0, True).write(
                w,
                _UPDATE_VALUE.cls(
                    snapshot_epoch=record.snapshot_epoch,
                    leader_epoch=record.leader_epoch,
                    start_offset=record.start_offset,
                    state_batches=_batches_out(record.state_batches),
                ),
            )
        return key, w.getvalue()
    except EncodeError as exc:
        raise ValueError(f"cannot write {type(record).__name__}: {exc}") from None


def _read(schema: Struct, data: bytes, flexible: bool) -> Any:
    r = Reader(data, 2)
    try:
        out = schema.codec(0, flexible).read(r)
    except MalformedMessageError as exc:
        raise InvalidShareRecordError(f"{schema.name}: {exc}") from None
    if r.remaining():
        raise InvalidShareRecordError(f"{schema.name}: {r.remaining()} bytes after its end")
    return out


def deserialize(key: bytes, value: bytes | None) -> ShareRecord | None:
    """The record ``key`` and ``value`` hold; None for a record type other than 0 and 1.
    Raises InvalidShareRecordError when they do not parse."""
    if len(key) < 2:
        raise InvalidShareRecordError(f"a key of {len(key)} bytes has no record type")
    kind = int.from_bytes(key[:2], "big", signed=True)
    if kind not in (SNAPSHOT, UPDATE):
        return None
    k = _read(_KEY, key, False)
    spk = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return ShareTombstone(spk)
    if len(value) < 2:
        raise InvalidShareRecordError(f"a value of {len(value)} bytes has no version")
    version = int.from_bytes(value[:2], "big", signed=True)
    if version != VALUE_VERSION:
        raise InvalidShareRecordError(f"record type {kind}: value version {version}")
    if kind == SNAPSHOT:
        v = _read(_SNAPSHOT_VALUE, value, True)
        return ShareSnapshot(
            spk,
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            _batches_in(v.state_batches),
            v.create_timestamp,
            v.write_timestamp,
        )
    v = _read(_UPDATE_VALUE, value, True)
    return ShareUpdate(
        spk, v.snapshot_epoch, v.leader_epoch, v.start_offset, _batches_in(v.state_batches)
    )
