"""Consumer-group records as the bytes Kafka 4 writes to ``__consumer_offsets``.

Key: int16 record type, then the key's fields in the classic encoding (int16-length
strings). The record type is also what Kafka calls the key version:

    type  key                                   key fields
    3     ConsumerGroupMetadataKey              group_id
    4     ConsumerGroupPartitionMetadataKey     group_id
    5     ConsumerGroupMemberMetadataKey        group_id, member_id
    6     ConsumerGroupTargetAssignmentMetadataKey  group_id
    7     ConsumerGroupTargetAssignmentMemberKey    group_id, member_id
    8     ConsumerGroupCurrentMemberAssignmentKey   group_id, member_id
    16    ConsumerGroupRegularExpressionKey     group_id, regular_expression

Value: int16 value version, then the value's fields in the flexible encoding (unsigned
varint length + 1 for strings, bytes and arrays, 0 for null; every struct closed by a
tagged-field section). Every value type has version 0 only, which is what is written;
later additions are tagged fields (the framing is :mod:`.record_codec`'s):

    ConsumerGroupMetadataValue            epoch int32; tag 0 metadata_hash int64
                                          (Kafka 4.1), tag 1 creation_time_ms int64
    ConsumerGroupPartitionMetadataValue   topics [topic_id uuid, topic_name string,
                                          num_partitions int32, partition_metadata
                                          [partition int32, racks [string]]]
    ConsumerGroupMemberMetadataValue      instance_id string?, rack_id string?, client_id
                                          string, client_host string, subscribed_topic_names
                                          [string], subscribed_topic_regex string?,
                                          rebalance_timeout_ms int32, server_assignor string?;
                                          tag 0 classic_member_metadata? [session_timeout_ms
                                          int32, supported_protocols [name string, metadata
                                          bytes]]
    ConsumerGroupTargetAssignmentMetadataValue  assignment_epoch int32
    ConsumerGroupTargetAssignmentMemberValue    topic_partitions [topic_id uuid,
                                                partitions [int32]]
    ConsumerGroupCurrentMemberAssignmentValue   member_epoch int32, previous_member_epoch
                                          int32, state int8, assigned_partitions and
                                          partitions_pending_revocation, each [topic_id uuid,
                                          partitions [int32]]
    ConsumerGroupRegularExpressionValue   topics [string], version int64, timestamp int64

(``?`` marks a nullable field.) A tagged nullable struct's data starts with a presence
byte, 1. A null value is a tombstone: it deletes the record with the same key.

Reading: tagged fields this module does not declare are skipped; newer value versions
and what does not parse are as :mod:`.record_codec` reads them. Key types that are not
consumer-group records (offset commits, classic groups, share and streams groups)
deserialize to ``None``.
"""

from __future__ import annotations

from typing import Any

from broker_py.coordinator.group.modern.member import MemberState
from broker_py.coordinator.group.modern.record_codec import (
    TOPIC_PARTITIONS,
    VALUE_VERSION,
    assignment_from_wire,
    encode,
    read_key,
    read_value,
    topic_partitions_to_wire,
)
from broker_py.coordinator.group.modern.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    CurrentAssignmentRecord,
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    Record,
    RegularExpressionRecord,
    RegularExpressionTombstone,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
    TopicMetadata,
)
from logstore.protocol.schema import Array, Field, Struct, StructValue
from logstore.protocol.types import BYTES, INT8, INT32, INT64, STRING, UUID

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "PARTITION_METADATA",
    "REGULAR_EXPRESSION",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "VALUE_VERSION",
    "deserialize",
    "record_type",
    "serialize",
]

# Record types (the key's int16 prefix).
GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

CONSUMER_GROUP_RECORD_TYPES = frozenset(
    {
        GROUP_METADATA,
        PARTITION_METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
        REGULAR_EXPRESSION,
    }
)

# ---- schemas ----------------------------------------------------------------------

_GROUP_KEY = Struct("ConsumerGroupKey", [Field("group_id", STRING, "0")])
_MEMBER_KEY = Struct(
    "ConsumerGroupMemberKey", [Field("group_id", STRING, "0"), Field("member_id", STRING, "0")]
)
_REGEX_KEY = Struct(
    "ConsumerGroupRegularExpressionKey",
    [Field("group_id", STRING, "0"), Field("regular_expression", STRING, "0")],
)

_GROUP_METADATA_VALUE = Struct(
    "ConsumerGroupMetadataValue",
    [
        Field("epoch", INT32, "0+"),
        Field("metadata_hash", INT64, "0+", default=0, tag=0),
        Field("creation_time_ms", INT64, "0+", default=-1, tag=1),
    ],
)

_TOPIC_METADATA = Struct(
    "TopicMetadata",
    [
        Field("topic_id", UUID, "0+"),
        Field("topic_name", STRING, "0+"),
        Field("num_partitions", INT32, "0+"),
        # Racks per partition; written empty (Kafka 4 no longer reads them).
        Field(
            "partition_metadata",
            Array(
                Struct(
                    "PartitionMetadata",
                    [Field("partition", INT32, "0+"), Field("racks", Array(STRING), "0+")],
                )
            ),
            "0+",
        ),
    ],
)

_PARTITION_METADATA_VALUE = Struct(
    "ConsumerGroupPartitionMetadataValue", [Field("topics", Array(_TOPIC_METADATA), "0+")]
)

_CLASSIC_PROTOCOL = Struct(
    "ClassicProtocol", [Field("name", STRING, "0+"), Field("metadata", BYTES, "0+")]
)

_CLASSIC_MEMBER_METADATA = Struct(
    "ClassicMemberMetadata",
    [
        Field("session_timeout_ms", INT32, "0+"),
        Field("supported_protocols", Array(_CLASSIC_PROTOCOL), "0+"),
    ],
)

_MEMBER_METADATA_VALUE = Struct(
    "ConsumerGroupMemberMetadataValue",
    [
        Field("instance_id", STRING, "0+", nullable="0+"),
        Field("rack_id", STRING, "0+", nullable="0+"),
        Field("client_id", STRING, "0+"),
        Field("client_host", STRING, "0+"),
        Field("subscribed_topic_names", Array(STRING), "0+"),
        Field("subscribed_topic_regex", STRING, "0+", nullable="0+"),
        Field("rebalance_timeout_ms", INT32, "0+", default=-1),
        Field("server_assignor", STRING, "0+", nullable="0+"),
        Field(
            "classic_member_metadata",
            _CLASSIC_MEMBER_METADATA,
            "0+",
            nullable="0+",
            default=None,
            tag=0,
        ),
    ],
)

_TARGET_ASSIGNMENT_METADATA_VALUE = Struct(
    "ConsumerGroupTargetAssignmentMetadataValue", [Field("assignment_epoch", INT32, "0+")]
)


_TARGET_ASSIGNMENT_MEMBER_VALUE = Struct(
    "ConsumerGroupTargetAssignmentMemberValue",
    [Field("topic_partitions", Array(TOPIC_PARTITIONS), "0+")],
)

_CURRENT_MEMBER_ASSIGNMENT_VALUE = Struct(
    "ConsumerGroupCurrentMemberAssignmentValue",
    [
        Field("member_epoch", INT32, "0+"),
        Field("previous_member_epoch", INT32, "0+"),
        Field("state", INT8, "0+"),
        Field("assigned_partitions", Array(TOPIC_PARTITIONS), "0+"),
        Field("partitions_pending_revocation", Array(TOPIC_PARTITIONS), "0+"),
    ],
)

_REGULAR_EXPRESSION_VALUE = Struct(
    "ConsumerGroupRegularExpressionValue",
    [
        Field("topics", Array(STRING), "0+"),
        Field("version", INT64, "0+"),
        Field("timestamp", INT64, "0+"),
    ],
)

_KEYS = {
    GROUP_METADATA: _GROUP_KEY,
    PARTITION_METADATA: _GROUP_KEY,
    MEMBER_METADATA: _MEMBER_KEY,
    TARGET_ASSIGNMENT_METADATA: _GROUP_KEY,
    TARGET_ASSIGNMENT_MEMBER: _MEMBER_KEY,
    CURRENT_MEMBER_ASSIGNMENT: _MEMBER_KEY,
    REGULAR_EXPRESSION: _REGEX_KEY,
}

_VALUES = {
    GROUP_METADATA: _GROUP_METADATA_VALUE,
    PARTITION_METADATA: _PARTITION_METADATA_VALUE,
    MEMBER_METADATA: _MEMBER_METADATA_VALUE,
    TARGET_ASSIGNMENT_METADATA: _TARGET_ASSIGNMENT_METADATA_VALUE,
    TARGET_ASSIGNMENT_MEMBER: _TARGET_ASSIGNMENT_MEMBER_VALUE,
    CURRENT_MEMBER_ASSIGNMENT: _CURRENT_MEMBER_ASSIGNMENT_VALUE,
    REGULAR_EXPRESSION: _REGULAR_EXPRESSION_VALUE,
}

# ---- serialize --------------------------------------------------------------------


def record_type(record: Record) -> int:
    """The key's record type of ``record`` (a tombstone's is its record's)."""
    match record:
        case GroupEpochRecord() | GroupEpochTombstone():
            return GROUP_METADATA
        case PartitionMetadataRecord() | PartitionMetadataTombstone():
            return PARTITION_METADATA
        case MemberMetadataRecord() | MemberMetadataTombstone():
            return MEMBER_METADATA
        case TargetAssignmentMetadataRecord() | TargetAssignmentMetadataTombstone():
            return TARGET_ASSIGNMENT_METADATA
        case TargetAssignmentMemberRecord() | TargetAssignmentMemberTombstone():
            return TARGET_ASSIGNMENT_MEMBER
        case CurrentAssignmentRecord() | CurrentAssignmentTombstone():
            return CURRENT_MEMBER_ASSIGNMENT
        case RegularExpressionRecord() | RegularExpressionTombstone():
            return REGULAR_EXPRESSION
    raise TypeError(f"not a consumer-group record: {record!r}")


def _key_fields(record: Record) -> StructValue:
    kind = record_type(record)
    schema = _KEYS[kind]
    if schema is _REGEX_KEY:
        assert isinstance(record, RegularExpressionRecord | RegularExpressionTombstone)
        return schema.cls(group_id=record.group_id, regular_expression=record.regex)
    if schema is _MEMBER_KEY:
        member_id: str = getattr(record, "member_id")  # noqa: B009 - every member-keyed type
        return schema.cls(group_id=record.group_id, member_id=member_id)
    return schema.cls(group_id=record.group_id)


def _value_fields(record: Record) -> StructValue | None:
    match record:
        case GroupEpochRecord(epoch=epoch):
            return _GROUP_METADATA_VALUE.cls(epoch=epoch)
        case PartitionMetadataRecord(topics=topics):
            return _PARTITION_METADATA_VALUE.cls(
                topics=[
                    _TOPIC_METADATA.cls(
                        topic_id=t.topic_id,
                        topic_name=t.name,
                        num_partitions=t.num_partitions,
                        partition_metadata=[],
                    )
                    for t in topics
                ]
            )
        case MemberMetadataRecord():
            classic = record.classic_member_metadata
            return _MEMBER_METADATA_VALUE.cls(
                instance_id=record.instance_id,
                rack_id=record.rack_id,
                client_id=record.client_id,
                client_host=record.client_host,
                subscribed_topic_names=list(record.subscribed_topic_names),
                subscribed_topic_regex=record.subscribed_topic_regex,
                rebalance_timeout_ms=record.rebalance_timeout_ms,
                server_assignor=record.server_assignor,
                classic_member_metadata=None if classic is None else _classic_out(classic),
            )
        case TargetAssignmentMetadataRecord(assignment_epoch=epoch):
            return _TARGET_ASSIGNMENT_METADATA_VALUE.cls(assignment_epoch=epoch)
        case TargetAssignmentMemberRecord(partitions=partitions):
            return _TARGET_ASSIGNMENT_MEMBER_VALUE.cls(
                topic_partitions=topic_partitions_to_wire(partitions)
            )
        case CurrentAssignmentRecord():
            return _CURRENT_MEMBER_ASSIGNMENT_VALUE.cls(
                member_epoch=record.member_epoch,
                previous_member_epoch=record.previous_member_epoch,
                state=int(record.state),
                assigned_partitions=topic_partitions_to_wire(record.assigned_partitions),
                partitions_pending_revocation=topic_partitions_to_wire(
                    record.partitions_pending_revocation
                ),
            )
        case RegularExpressionRecord():
            return _REGULAR_EXPRESSION_VALUE.cls(
                topics=list(record.topics), version=record.version, timestamp=record.timestamp_ms
            )
    return None  # a tombstone


def _classic_out(classic: ClassicMemberMetadata) -> StructValue:
    return _CLASSIC_MEMBER_METADATA.cls(
        session_timeout_ms=classic.session_timeout_ms,
        supported_protocols=[
            _CLASSIC_PROTOCOL.cls(name=p.name, metadata=p.metadata)
            for p in classic.supported_protocols
        ],
    )


def serialize(record: Record) -> tuple[bytes, bytes | None]:
    """The key and value bytes of ``record``; the value is ``None`` for a tombstone.

    Raises :class:`ValueError` for a record that cannot be written (a string longer than
    an int16 length in a key, a number outside its field's range).
    """
    kind = record_type(record)
    return encode(
        kind,
        _KEYS[kind],
        _key_fields(record),
        _VALUES[kind],
        _value_fields(record),
        type(record).__name__,
    )


# ---- deserialize ------------------------------------------------------------------


def deserialize(key: bytes, value: bytes | None) -> Record | None:
    """The record ``key`` and ``value`` hold; ``None`` when the key's type is not a
    consumer-group record. Raises :class:`InvalidGroupRecordError` when they do not parse.
    """
    found = read_key(_KEYS, key)
    if found is None:
        return None
    kind, k = found
    if value is None:
        return _tombstone(kind, k)
    return _record(kind, k, read_value(kind, _VALUES[kind], value, "group", k.group_id))


def _tombstone(kind: int, k: Any) -> Record:
    group_id: str = k.group_id
    if kind == GROUP_METADATA:
        return GroupEpochTombstone(group_id)
    if kind == PARTITION_METADATA:
        return PartitionMetadataTombstone(group_id)
    if kind == MEMBER_METADATA:
        return MemberMetadataTombstone(group_id, k.member_id)
    if kind == TARGET_ASSIGNMENT_METADATA:
        return TargetAssignmentMetadataTombstone(group_id)
    if kind == TARGET_ASSIGNMENT_MEMBER:
        return TargetAssignmentMemberTombstone(group_id, k.member_id)
    if kind == CURRENT_MEMBER_ASSIGNMENT:
        return CurrentAssignmentTombstone(group_id, k.member_id)
    return RegularExpressionTombstone(group_id, k.regular_expression)


def _record(kind: int, k: Any, v: Any) -> Record:
    group_id: str = k.group_id
    if kind == GROUP_METADATA:
        return GroupEpochRecord(group_id, v.epoch)
    if kind == PARTITION_METADATA:
        return PartitionMetadataRecord(
            group_id,
            tuple(TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in v.topics),
        )
    if kind == MEMBER_METADATA:
        classic = v.classic_member_metadata
        return MemberMetadataRecord(
            group_id=group_id,
            member_id=k.member_id,
            instance_id=v.instance_id,
            rack_id=v.rack_id,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topic_names=tuple(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex,
            server_assignor=v.server_assignor,
            rebalance_timeout_ms=v.rebalance_timeout_ms,
            classic_member_metadata=None
            if classic is None
            else ClassicMemberMetadata(
                classic.session_timeout_ms,
                tuple(ClassicProtocol(p.name, p.metadata) for p in classic.supported_protocols),
            ),
        )
    if kind == TARGET_ASSIGNMENT_METADATA:
        return TargetAssignmentMetadataRecord(group_id, v.assignment_epoch)
    if kind == TARGET_ASSIGNMENT_MEMBER:
        return TargetAssignmentMemberRecord(
            group_id, k.member_id, assignment_from_wire(v.topic_partitions)
        )
    if kind == CURRENT_MEMBER_ASSIGNMENT:
        return CurrentAssignmentRecord(
            group_id=group_id,
            member_id=k.member_id,
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=MemberState.from_value(v.state),
            assigned_partitions=assignment_from_wire(v.assigned_partitions),
            partitions_pending_revocation=assignment_from_wire(v.partitions_pending_revocation),
        )
    return RegularExpressionRecord(
        group_id=group_id,
        regex=k.regular_expression,
        topics=tuple(v.topics),
        timestamp_ms=v.timestamp,
        version=v.version,
    )
