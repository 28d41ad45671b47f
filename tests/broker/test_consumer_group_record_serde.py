"""Consumer-group records of ``__consumer_offsets`` (Kafka 4's key types 3-8 and 16):
bytes built by hand from Kafka's ConsumerGroup*Key/Value message definitions, round
trips of every record type, and what a load meets: unknown tagged fields, a newer value
version, malformed bytes, record types that are not consumer-group records."""

from __future__ import annotations

import logging
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.coordinator.group.group_metadata_records import (
    InvalidGroupRecordError,
    encode_group_metadata_key,
    encode_offset_commit_key,
)
from broker_py.coordinator.group.modern.member import MemberState
from broker_py.coordinator.group.modern.record_serde import deserialize, serialize
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

T1 = uuid.UUID("0123456789abcdef0123456789abcdef")
T2 = uuid.UUID("fedcba98765432100123456789abcdef")


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(s: str) -> bytes:
    """A classic (key) string: int16 length + UTF-8."""
    b = s.encode()
    return i16(len(b)) + b


def cstr(s: str | None) -> bytes:
    """A compact string: uvarint length + 1 (0 for null); short strings only."""
    if s is None:
        return b"\x00"
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


def carray(n: int) -> bytes:
    """A compact array's count: uvarint n + 1."""
    assert n < 127
    return bytes([n + 1])


NO_TAGS = b"\x00"


# ---- bytes built by hand ----


def test_group_metadata_golden():
    key = i16(3) + s16("orders-app")
    value = i16(0) + i32(42) + NO_TAGS
    record = GroupEpochRecord("orders-app", 42)
    assert serialize(record) == (key, value)
    assert deserialize(key, value) == record
    assert deserialize(key, None) == GroupEpochTombstone("orders-app")


def test_current_member_assignment_golden():
    key = i16(8) + s16("g") + s16("m-1")
    value = (
        i16(0)
        + i32(7)  # member epoch
        + i32(6)  # previous member epoch
        + bytes([1])  # state: UNREVOKED_PARTITIONS
        # assigned partitions: T1 [0, 2], T2 [5]; sorted by topic id
        + carray(2)
        + T1.bytes
        + carray(2)
        + i32(0)
        + i32(2)
        + NO_TAGS
        + T2.bytes
        + carray(1)
        + i32(5)
        + NO_TAGS
        # partitions pending revocation: T1 [1]
        + carray(1)
        + T1.bytes
        + carray(1)
        + i32(1)
        + NO_TAGS
        + NO_TAGS
    )
    record = CurrentAssignmentRecord(
        group_id="g",
        member_id="m-1",
        member_epoch=7,
        previous_member_epoch=6,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions={T2: frozenset({5}), T1: frozenset({2, 0})},
        partitions_pending_revocation={T1: frozenset({1})},
    )
    assert serialize(record) == (key, value)
    assert deserialize(key, value) == record
    assert deserialize(key, None) == CurrentAssignmentTombstone("g", "m-1")


def test_member_metadata_with_classic_metadata_golden():
    key = i16(5) + s16("g") + s16("m1")
    classic = (
        bytes([1])  # a tagged nullable struct starts with its presence byte
        + i32(10_000)  # session timeout
        + carray(1)
        + cstr("range")
        + bytes([3, 0, 1])  # compact bytes b"\x00\x01"
        + NO_TAGS
        + NO_TAGS
    )
    assert len(classic) == 17
    value = (
        i16(0)
        + cstr(None)  # instance id
        + cstr("r")  # rack id
        + cstr("c")  # client id
        + cstr("/h")  # client host
        + carray(1)
        + cstr("t")  # subscribed topic names
        + cstr(None)  # subscribed topic regex
        + i32(60_000)  # rebalance timeout
        + cstr("uniform")  # server assignor
        + bytes([1, 0, len(classic)])  # one tagged field: tag 0, its size
        + classic
    )
    record = MemberMetadataRecord(
        group_id="g",
        member_id="m1",
        instance_id=None,
        rack_id="r",
        client_id="c",
        client_host="/h",
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor="uniform",
        rebalance_timeout_ms=60_000,
        classic_member_metadata=ClassicMemberMetadata(
            10_000, (ClassicProtocol("range", b"\x00\x01"),)
        ),
    )
    assert serialize(record) == (key, value)
    assert deserialize(key, value) == record


def test_partition_metadata_and_regex_golden():
    key = i16(4) + s16("g")
    value = (
        i16(0)
        + carray(1)
        + T1.bytes
        + cstr("orders")
        + i32(3)
        + carray(0)  # partition racks: none written
        + NO_TAGS
        + NO_TAGS
    )
    record = PartitionMetadataRecord("g", (TopicMetadata(T1, "orders", 3),))
    assert serialize(record) == (key, value)
    assert deserialize(key, value) == record

    key = i16(16) + s16("g") + s16("ord.*")
    value = i16(0) + carray(2) + cstr("orders") + cstr("ordinals") + i64(9) + i64(1234) + NO_TAGS
    record2 = RegularExpressionRecord("g", "ord.*", ("orders", "ordinals"), 1234, version=9)
    assert serialize(record2) == (key, value)
    assert deserialize(key, value) == record2


def test_target_assignment_golden():
    key = i16(6) + s16("g")
    value = i16(0) + i32(11) + NO_TAGS
    assert serialize(TargetAssignmentMetadataRecord("g", 11)) == (key, value)
    key = i16(7) + s16("g") + s16("m")
    value = i16(0) + carray(1) + T1.bytes + carray(1) + i32(4) + NO_TAGS + NO_TAGS
    record = TargetAssignmentMemberRecord("g", "m", {T1: frozenset({4})})
    assert serialize(record) == (key, value)
    assert deserialize(key, value) == record


# ---- what a load meets ----


def test_tagged_fields_of_later_kafka_versions_are_read_or_skipped():
    # ConsumerGroupMetadataValue with Kafka 4.1's MetadataHash (tag 0) and an unknown tag 9.
    key = i16(3) + s16("g")
    value = i16(0) + i32(3) + bytes([2, 0, 8]) + i64(0x1234) + bytes([9, 2, 0xAB, 0xCD])
    assert deserialize(key, value) == GroupEpochRecord("g", 3)
    # A TopicPartitions struct carrying AssignmentEpochs (tag 0, KIP-1251).
    key = i16(8) + s16("g") + s16("m")
    tagged_epochs = carray(1) + i32(3)
    value = (
        i16(0)
        + i32(3)
        + i32(2)
        + bytes([0])
        + carray(1)
        + T1.bytes
        + carray(1)
        + i32(0)
        + bytes([1, 0, len(tagged_epochs)])
        + tagged_epochs
        + carray(0)
        + NO_TAGS
    )
    record = deserialize(key, value)
    assert isinstance(record, CurrentAssignmentRecord)
    assert record.assigned_partitions == {T1: frozenset({0})}
    assert record.state is MemberState.STABLE


def test_a_newer_value_version_is_read_for_the_fields_it_starts_with(caplog):
    key = i16(6) + s16("g")
    value = i16(1) + i32(8) + NO_TAGS + b"fields of a later version"
    with caplog.at_level(logging.WARNING):
        assert deserialize(key, value) == TargetAssignmentMetadataRecord("g", 8)
    assert "value version 1" in caplog.text


def test_unknown_member_state_is_kept_as_unknown():
    key = i16(8) + s16("g") + s16("m")
    value = i16(0) + i32(3) + i32(2) + bytes([9]) + carray(0) + carray(0) + NO_TAGS
    record = deserialize(key, value)
    assert isinstance(record, CurrentAssignmentRecord)
    assert record.state is MemberState.UNKNOWN


@pytest.mark.parametrize(
    "key",
    [
        encode_offset_commit_key("g", "t", 0),
        encode_group_metadata_key("g"),
        i16(9) + s16("share-group"),  # ShareGroupMemberMetadataKey
        i16(17) + s16("streams-group"),  # StreamsGroupMetadataKey
    ],
)
def test_other_record_types_are_not_consumer_group_records(key):
    assert deserialize(key, i16(0) + NO_TAGS) is None
    assert deserialize(key, None) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"", None),
        (b"\x00", None),
        (i16(3), None),  # no group id
        (i16(3) + i16(5) + b"ab", None),  # group id cut short
        (i16(3) + s16("g") + b"x", None),  # bytes after the key
        (i16(3) + i16(-1), None),  # null group id
        (i16(5) + s16("g"), None),  # member key without a member id
        (i16(3) + s16("g"), b"\x00"),  # value without a whole version
        (i16(3) + s16("g"), i16(-1) + i32(1) + NO_TAGS),  # negative value version
        (i16(3) + s16("g"), i16(0) + i32(1)),  # no tagged-field section
        (i16(3) + s16("g"), i16(0) + i32(1) + NO_TAGS + b"x"),  # bytes after the value
        (i16(3) + s16("g"), i16(0) + i32(1) + bytes([1, 0, 9]) + i64(1)),  # tag overruns
        (i16(7) + s16("g") + s16("m"), i16(0) + bytes([0x7F]) + T1.bytes),  # huge array
        (i16(7) + s16("g") + s16("m"), i16(0) + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])),
        (i16(5) + s16("g") + s16("m"), i16(0) + cstr(None) * 2 + bytes([0])),  # null client id
        (i16(16) + s16("g") + s16("r"), i16(0) + carray(1) + bytes([2, 0xFF])),  # not UTF-8
    ],
)
def test_malformed_records_raise_invalid_group_record_error(key, value):
    with pytest.raises(InvalidGroupRecordError):
        deserialize(key, value)


def test_a_key_string_too_long_for_int16_is_refused():
    with pytest.raises(ValueError, match="cannot write"):
        serialize(GroupEpochRecord("g" * 40_000, 1))


# ---- round trips of every record type ----

names = st.text(max_size=12)
opt_names = st.none() | names
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
topic_ids = st.uuids()
assignments = st.dictionaries(
    topic_ids, st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=5), max_size=4
)
member_states = st.sampled_from(list(MemberState))

classic_metadata = st.builds(
    ClassicMemberMetadata,
    int32s,
    st.lists(st.builds(ClassicProtocol, names, st.binary(max_size=20)), max_size=3).map(tuple),
)

records: st.SearchStrategy[Record] = st.one_of(
    st.builds(GroupEpochRecord, names, int32s),
    st.builds(GroupEpochTombstone, names),
    st.builds(
        PartitionMetadataRecord,
        names,
        st.lists(st.builds(TopicMetadata, topic_ids, names, int32s), max_size=4).map(tuple),
    ),
    st.builds(PartitionMetadataTombstone, names),
    st.builds(
        MemberMetadataRecord,
        group_id=names,
        member_id=names,
        instance_id=opt_names,
        rack_id=opt_names,
        client_id=names,
        client_host=names,
        subscribed_topic_names=st.lists(names, max_size=4).map(tuple),
        subscribed_topic_regex=opt_names,
        server_assignor=opt_names,
        rebalance_timeout_ms=int32s,
        classic_member_metadata=st.none() | classic_metadata,
    ),
    st.builds(MemberMetadataTombstone, names, names),
    st.builds(TargetAssignmentMetadataRecord, names, int32s),
    st.builds(TargetAssignmentMetadataTombstone, names),
    st.builds(TargetAssignmentMemberRecord, names, names, assignments),
    st.builds(TargetAssignmentMemberTombstone, names, names),
    st.builds(
        CurrentAssignmentRecord,
        group_id=names,
        member_id=names,
        member_epoch=int32s,
        previous_member_epoch=int32s,
        state=member_states,
        assigned_partitions=assignments,
        partitions_pending_revocation=assignments,
    ),
    st.builds(CurrentAssignmentTombstone, names, names),
    st.builds(
        RegularExpressionRecord,
        group_id=names,
        regex=names,
        topics=st.lists(names, max_size=4).map(tuple),
        timestamp_ms=int64s,
        version=int64s,
    ),
    st.builds(RegularExpressionTombstone, names, names),
)


@settings(max_examples=300, deadline=None)
@given(records)
def test_every_record_type_round_trips(record):
    key, value = serialize(record)
    assert deserialize(key, value) == record
    # The bytes depend on the value alone.
    assert serialize(deserialize(key, value)) == (key, value)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_cut_or_flipped_bytes_never_raise_anything_but_invalid_group_record_error(record, data):
    key, value = serialize(record)
    if value is not None and value:
        cut = data.draw(st.integers(0, len(value) - 1))
        flip = data.draw(st.integers(0, len(value) - 1))
        for broken in (value[:cut], value[:flip] + bytes([value[flip] ^ 0xFF]) + value[flip + 1 :]):
            try:
                deserialize(key, broken)
            except InvalidGroupRecordError:
                pass
