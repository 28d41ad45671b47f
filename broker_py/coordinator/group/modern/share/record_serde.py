"""Share-group records as the bytes Kafka 4.1 writes to ``__consumer_offsets``.

Key: int16 record type, then the key's fields in the classic encoding (int16-length
strings), as for consumer groups (:mod:`broker_py.coordinator.group.modern.record_serde`):

    type  key                                     key fields
    10    ShareGroupMemberMetadataKey             group_id, member_id
    11    ShareGroupMetadataKey                   group_id
    12    ShareGroupTargetAssignmentMetadataKey   group_id
    13    ShareGroupTargetAssignmentMemberKey     group_id, member_id
    14    ShareGroupCurrentMemberAssignmentKey    group_id, member_id
    15    ShareGroupStatePartitionMetadataKey     group_id

Value: int16 value version (0), then the fields in the flexible encoding:

    ShareGroupMemberMetadataValue       rack_id string?, client_id string, client_host
                                        string, subscribed_topic_names [string]
    ShareGroupMetadataValue             epoch int32; tag 0 metadata_hash int64
    ShareGroupTargetAssignmentMetadataValue  assignment_epoch int32
    ShareGroupTargetAssignmentMemberValue    topic_partitions [topic_id uuid,
                                             partitions [int32]]
    ShareGroupCurrentMemberAssignmentValue   member_epoch int32, previous_member_epoch
                                        int32, state int8, assigned_partitions
                                        [topic_id uuid, partitions [int32]]
    ShareGroupStatePartitionMetadataValue  initializing_topics and initialized_topics
                                        [topic_id uuid, topic_name string, partitions
                                        [int32]], deleting_topics [topic_id uuid,
                                        topic_name string]

A null value is a tombstone. Unknown tagged fields are skipped; the framing, newer value
versions and what does not parse are those of
:mod:`broker_py.coordinator.group.modern.record_codec`. Other key types deserialize to
``None``.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker_py.coordinator.group.modern.record_codec import (
    TOPIC_PARTITIONS,
    assignment_from_wire,
    encode,
    read_key,
    read_value,
    topic_partitions_to_wire,
)
from broker_py.coordinator.group.modern.share.records import (
    ShareCurrentAssignmentRecord,
    ShareCurrentAssignmentTombstone,
    ShareGroupEpochRecord,
    ShareGroupEpochTombstone,
    ShareMemberMetadataRecord,
    ShareMemberMetadataTombstone,
    ShareRecord,
    ShareStatePartitionsRecord,
    ShareStatePartitionsTombstone,
    ShareTargetAssignmentMemberRecord,
    ShareTargetAssignmentMemberTombstone,
    ShareTargetAssignmentMetadataRecord,
    ShareTargetAssignmentMetadataTombstone,
)
from logstore.protocol.schema import Array, Field, Struct, StructValue
from logstore.protocol.types import INT8, INT32, INT64, STRING, UUID

__all__ = ["SHARE_GROUP_RECORD_TYPES", "deserialize", "record_type", "serialize"]

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

SHARE_GROUP_RECORD_TYPES = frozenset(
    {
        MEMBER_METADATA,
        GROUP_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
        STATE_PARTITION_METADATA,
    }
)

_GROUP_KEY = Struct("ShareGroupKey", [Field("group_id", STRING, "0")])
_MEMBER_KEY = Struct(
    "ShareGroupMemberKey", [Field("group_id", STRING, "0"), Field("member_id", STRING, "0")]
)

_TOPIC_PARTITIONS_INFO = Struct(
    "TopicPartitionsInfo",
    [
        Field("topic_id", UUID, "0+"),
        Field("topic_name", STRING, "0+"),
        Field("partitions", Array(INT32), "0+"),
    ],
)
_TOPIC_INFO = Struct(
    "TopicInfo", [Field("topic_id", UUID, "0+"), Field("topic_name", STRING, "0+")]
)

_VALUES = {
    MEMBER_METADATA: Struct(
        "ShareGroupMemberMetadataValue",
        [
            Field("rack_id", STRING, "0+", nullable="0+"),
            Field("client_id", STRING, "0+"),
            Field("client_host", STRING, "0+"),
            Field("subscribed_topic_names", Array(STRING), "0+"),
        ],
    ),
    GROUP_METADATA: Struct(
        "ShareGroupMetadataValue",
        [
            Field("epoch", INT32, "0+"),
            Field("metadata_hash", INT64, "0+", default=0, tag=0),
        ],
    ),
    TARGET_ASSIGNMENT_METADATA: Struct(
        "ShareGroupTargetAssignmentMetadataValue", [Field("assignment_epoch", INT32, "0+")]
    ),
    TARGET_ASSIGNMENT_MEMBER: Struct(
        "ShareGroupTargetAssignmentMemberValue",
        [Field("topic_partitions", Array(TOPIC_PARTITIONS), "0+")],
    ),
    CURRENT_MEMBER_ASSIGNMENT: Struct(
        "ShareGroupCurrentMemberAssignmentValue",
        [
            Field("member_epoch", INT32, "0+"),
            Field("previous_member_epoch", INT32, "0+"),
            Field("state", INT8, "0+"),
            Field("assigned_partitions", Array(TOPIC_PARTITIONS), "0+"),
        ],
    ),
    STATE_PARTITION_METADATA: Struct(
        "ShareGroupStatePartitionMetadataValue",
        [
            Field("initializing_topics", Array(_TOPIC_PARTITIONS_INFO), "0+"),
            Field("initialized_topics", Array(_TOPIC_PARTITIONS_INFO), "0+"),
            Field("deleting_topics", Array(_TOPIC_INFO), "0+"),
        ],
    ),
}

_KEYS = {
    MEMBER_METADATA: _MEMBER_KEY,
    GROUP_METADATA: _GROUP_KEY,
    TARGET_ASSIGNMENT_METADATA: _GROUP_KEY,
    TARGET_ASSIGNMENT_MEMBER: _MEMBER_KEY,
    CURRENT_MEMBER_ASSIGNMENT: _MEMBER_KEY,
    STATE_PARTITION_METADATA: _GROUP_KEY,
}


def record_type(record: ShareRecord) -> int:
    match record:
        case ShareMemberMetadataRecord() | ShareMemberMetadataTombstone():
            return MEMBER_METADATA
        case ShareGroupEpochRecord() | ShareGroupEpochTombstone():
            return GROUP_METADATA
        case ShareTargetAssignmentMetadataRecord() | ShareTargetAssignmentMetadataTombstone():
            return TARGET_ASSIGNMENT_METADATA
        case ShareTargetAssignmentMemberRecord() | ShareTargetAssignmentMemberTombstone():
            return TARGET_ASSIGNMENT_MEMBER
        case ShareCurrentAssignmentRecord() | ShareCurrentAssignmentTombstone():
            return CURRENT_MEMBER_ASSIGNMENT
        case ShareStatePartitionsRecord() | ShareStatePartitionsTombstone():
            return STATE_PARTITION_METADATA
    raise TypeError(f"not a share-group record: {record!r}")


def _value_fields(kind: int, record: ShareRecord) -> StructValue | None:
    cls = _VALUES[kind].cls
    match record:
        case ShareMemberMetadataRecord():
            return cls(
                rack_id=record.rack_id,
                client_id=record.client_id,
                client_host=record.client_host,
                subscribed_topic_names=list(record.subscribed_topic_names),
            )
        case ShareGroupEpochRecord(epoch=epoch, metadata_hash=metadata_hash):
            return cls(epoch=epoch, metadata_hash=metadata_hash)
        case ShareTargetAssignmentMetadataRecord(assignment_epoch=epoch):
            return cls(assignment_epoch=epoch)
        case ShareTargetAssignmentMemberRecord(partitions=partitions):
            return cls(topic_partitions=topic_partitions_to_wire(partitions))
        case ShareCurrentAssignmentRecord():
            return cls(
                member_epoch=record.member_epoch,
                previous_member_epoch=record.previous_member_epoch,
                state=record.state,
                assigned_partitions=topic_partitions_to_wire(record.assigned_partitions),
            )
        case ShareStatePartitionsRecord():
            info = _TOPIC_PARTITIONS_INFO.cls
            return cls(
                initializing_topics=[
                    info(topic_id=t, topic_name=name, partitions=sorted(p))
                    for t, (name, p) in sorted(record.initializing.items())
                ],
                initialized_topics=[
                    info(topic_id=t, topic_name=name, partitions=sorted(p))
                    for t, (name, p) in sorted(record.initialized.items())
                ],
                deleting_topics=[
                    _TOPIC_INFO.cls(topic_id=t, topic_name=name)
                    for t, name in sorted(record.deleting.items())
                ],
            )
    return None


def serialize(record: ShareRecord) -> tuple[bytes, bytes | None]:
    """The key and value bytes of ``record``; the value is ``None`` for a tombstone.
    Raises :class:`ValueError` for a record that cannot be written."""
    kind = record_type(record)
    schema = _KEYS[kind]
    if schema is _MEMBER_KEY:
        member_id: str = getattr(record, "member_id")  # noqa: B009 - member-keyed types
        key_fields = schema.cls(group_id=record.group_id, member_id=member_id)
    else:
        key_fields = schema.cls(group_id=record.group_id)
    fields = _value_fields(kind, record)
    return encode(kind, schema, key_fields, _VALUES[kind], fields, type(record).__name__)


def deserialize(key: bytes, value: bytes | None) -> ShareRecord | None:
    """The share-group record ``key`` and ``value`` hold; ``None`` for other key types."""
    found = read_key(_KEYS, key)
    if found is None:
        return None
    kind, k = found
    group_id: str = k.group_id
    if value is None:
        return _tombstone(kind, k)
    v: Any = read_value(kind, _VALUES[kind], value, "share group", group_id)
    if kind == MEMBER_METADATA:
        return ShareMemberMetadataRecord(
            group_id,
            k.member_id,
            v.rack_id,
            v.client_id,
            v.client_host,
            tuple(sorted(set(v.subscribed_topic_names))),
        )
    if kind == GROUP_METADATA:
        return ShareGroupEpochRecord(group_id, v.epoch, v.metadata_hash)
    if kind == TARGET_ASSIGNMENT_METADATA:
        return ShareTargetAssignmentMetadataRecord(group_id, v.assignment_epoch)
    if kind == STATE_PARTITION_METADATA:
        return ShareStatePartitionsRecord(
            group_id,
            _topic_partitions_info(v.initializing_topics),
            _topic_partitions_info(v.initialized_topics),
            {t.topic_id: t.topic_name for t in v.deleting_topics},
        )
    if kind == TARGET_ASSIGNMENT_MEMBER:
        return ShareTargetAssignmentMemberRecord(
            group_id, k.member_id, assignment_from_wire(v.topic_partitions)
        )
    return ShareCurrentAssignmentRecord(
        group_id,
        k.member_id,
        v.member_epoch,
        v.previous_member_epoch,
        v.state,
        assignment_from_wire(v.assigned_partitions),
    )


def _tombstone(kind: int, k: Any) -> ShareRecord:
    group_id: str = k.group_id
    if kind == MEMBER_METADATA:
        return ShareMemberMetadataTombstone(group_id, k.member_id)
    if kind == GROUP_METADATA:
        return ShareGroupEpochTombstone(group_id)
    if kind == TARGET_ASSIGNMENT_METADATA:
        return ShareTargetAssignmentMetadataTombstone(group_id)
    if kind == TARGET_ASSIGNMENT_MEMBER:
        return ShareTargetAssignmentMemberTombstone(group_id, k.member_id)
    if kind == STATE_PARTITION_METADATA:
        return ShareStatePartitionsTombstone(group_id)
    return ShareCurrentAssignmentTombstone(group_id, k.member_id)


def _topic_partitions_info(topics: Any) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    out: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
    for t in topics:
        name, partitions = out.get(t.topic_id, (t.topic_name, frozenset()))
        out[t.topic_id] = (name, partitions | frozenset(t.partitions))
    return out
