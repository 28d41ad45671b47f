"""``__consumer_offsets`` key/value formats against bytes built by hand from Kafka's
message definitions (OffsetCommitKey, OffsetCommitValue, GroupMetadataKey,
GroupMetadataValue), and Java's String.hashCode partitioning."""

from __future__ import annotations

import struct

import pytest

from broker_py.common.java_string_hash import java_string_hashcode
from broker_py.coordinator.group.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    InvalidGroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    UnknownRecordKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)


def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def b32(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def cstr(s: str | None) -> bytes:
    """Compact string (flexible versions): uvarint length + 1; short strings only."""
    if s is None:
        return b"\x00"
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


def cbytes(b: bytes) -> bytes:
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


# ---- keys ----


def test_offset_commit_key_v1_golden():
    golden = struct.pack(">h", 1) + s16("my-group") + s16("orders") + struct.pack(">i", 7)
    assert encode_offset_commit_key("my-group", "orders", 7) == golden
    assert decode_key(golden) == OffsetCommitKey("my-group", "orders", 7, 1)


def test_offset_commit_key_v0_reads_like_v1():
    data = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 0)
    assert decode_key(data) == OffsetCommitKey("g", "t", 0, 0)


def test_group_metadata_key_v2_golden():
    golden = struct.pack(">h", 2) + s16("my-group")
    assert encode_group_metadata_key("my-group") == golden
    assert decode_key(golden) == GroupMetadataKey("my-group", 2)


def test_utf8_group_names():
    golden = struct.pack(">h", 2) + struct.pack(">h", len("gröup-ü".encode())) + "gröup-ü".encode()
    assert encode_group_metadata_key("gröup-ü") == golden
    assert decode_key(golden).group == "gröup-ü"


def test_newer_key_versions_are_skipped():
    assert decode_key(struct.pack(">h", 3) + s16("g")) == UnknownRecordKey(3)


def test_truncated_key_is_an_error():
    with pytest.raises(InvalidGroupRecordError):
        decode_key(struct.pack(">h", 1) + s16("g") + s16("t") + b"\x00\x00")


# ---- offset commit values ----


def test_offset_commit_value_v3_golden():
    golden = (
        struct.pack(">h", 3)
        + struct.pack(">q", 1234567890123)
        + struct.pack(">i", 5)
        + s16("checkpoint-α")
        + struct.pack(">q", 1700000000000)
    )
    assert encode_offset_commit_value(1234567890123, 5, "checkpoint-α", 1700000000000) == golden
    v = decode_offset_commit_value(golden)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp) == (
        1234567890123,
        5,
        "checkpoint-α",
        1700000000000,
        -1,
    )


def test_offset_commit_value_older_versions():
    v0 = struct.pack(">h", 0) + struct.pack(">q", 42) + s16("m") + struct.pack(">q", 1000)
    v = decode_offset_commit_value(v0)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, -1, "m", 1000)
    v1 = (
        struct.pack(">h", 1)
        + struct.pack(">q", 43)
        + s16("")
        + struct.pack(">q", 1000)
        + struct.pack(">q", 2000)
    )
    v = decode_offset_commit_value(v1)
    assert (v.offset, v.metadata, v.commit_timestamp, v.expire_timestamp) == (43, "", 1000, 2000)
    v2 = struct.pack(">h", 2) + struct.pack(">q", 44) + s16(None) + struct.pack(">q", 1000)
    v = decode_offset_commit_value(v2)
    assert (v.offset, v.metadata) == (44, "")


def test_offset_commit_value_v4_flexible():
    # v4: compact string, then an empty tagged-field section... plus one unknown tag.
    data = (
        struct.pack(">h", 4)
        + struct.pack(">q", 9)
        + struct.pack(">i", 2)
        + cstr("meta")
        + struct.pack(">q", 77)
        + b"\x01"  # one tagged field
        + b"\x05\x02ab"  # tag 5, 2 bytes
    )
    v = decode_offset_commit_value(data)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (9, 2, "meta", 77)


def test_unknown_value_version_is_an_error():
    with pytest.raises(InvalidGroupRecordError):
        decode_offset_commit_value(struct.pack(">h", 9) + b"\x00" * 30)


# ---- group metadata values ----


def _members():
    return [
        MemberMetadataValue(
            "m-1", None, "client-a", "/10.0.0.1", 60000, 10000, b"\x00\x01sub", b"\x00\x01asg"
        ),
        MemberMetadataValue(
            "m-2", "instance-2", "client-b", "/10.0.0.2", 45000, 6000, b"", b"assignment-2"
        ),
    ]


def test_group_metadata_value_v3_golden():
    golden = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 12)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1700000000123)
        + struct.pack(">i", 2)
        # member 1
        + s16("m-1")
        + s16(None)
        + s16("client-a")
        + s16("/10.0.0.1")
        + struct.pack(">i", 60000)
        + struct.pack(">i", 10000)
        + b32(b"\x00\x01sub")
        + b32(b"\x00\x01asg")
        # member 2
        + s16("m-2")
        + s16("instance-2")
        + s16("client-b")
        + s16("/10.0.0.2")
        + struct.pack(">i", 45000)
        + struct.pack(">i", 6000)
        + b32(b"")
        + b32(b"assignment-2")
    )
    value = GroupMetadataValue("consumer", 12, "range", "m-1", 1700000000123, _members())
    assert encode_group_metadata_value(value) == golden
    assert decode_group_metadata_value(golden) == value


def test_empty_group_metadata_value_v3_golden():
    golden = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 3)
        + s16(None)
        + s16(None)
        + struct.pack(">q", 1700000000000)
        + struct.pack(">i", 0)
    )
    value = GroupMetadataValue("consumer", 3, None, None, 1700000000000, [])
    assert encode_group_metadata_value(value) == golden
    assert decode_group_metadata_value(golden) == value


def test_group_metadata_value_older_versions():
    # v0: no rebalance timeout, no state timestamp, no instance id.
    v0 = (
        struct.pack(">h", 0)
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16("range")
        + s16("m")
        + struct.pack(">i", 1)
        + s16("m")
        + s16("c")
        + s16("/h")
        + struct.pack(">i", 30000)
        + b32(b"s")
        + b32(b"a")
    )
    v = decode_group_metadata_value(v0)
    assert (v.generation, v.protocol, v.leader, v.current_state_timestamp) == (1, "range", "m", -1)
    m = v.members[0]
    assert (m.member_id, m.group_instance_id, m.session_timeout, m.rebalance_timeout) == (
        "m",
        None,
        30000,
        30000,
    )
    assert (m.subscription, m.assignment) == (b"s", b"a")
    # v1: rebalance timeout before session timeout.
    v1 = (
        struct.pack(">h", 1)
        + s16("consumer")
        + struct.pack(">i", 2)
        + s16(None)
        + s16(None)
        + struct.pack(">i", 1)
        + s16("m")
        + s16("c")
        + s16("/h")
        + struct.pack(">i", 50000)
        + struct.pack(">i", 10000)
        + b32(b"")
        + b32(b"")
    )
    m = decode_group_metadata_value(v1).members[0]
    assert (m.rebalance_timeout, m.session_timeout) == (50000, 10000)
    # v2: adds the state timestamp.
    v2 = (
        struct.pack(">h", 2)
        + s16("")
        + struct.pack(">i", 4)
        + s16(None)
        + s16(None)
        + struct.pack(">q", 99)
        + struct.pack(">i", 0)
    )
    v = decode_group_metadata_value(v2)
    assert (v.protocol_type, v.generation, v.current_state_timestamp, v.members) == ("", 4, 99, [])


def test_group_metadata_value_v4_flexible():
    data = (
        struct.pack(">h", 4)
        + cstr("consumer")
        + struct.pack(">i", 7)
        + cstr("range")
        + cstr("m")
        + struct.pack(">q", 5)
        + b"\x02"  # compact array: 1 member
        + cstr("m")
        + cstr(None)
        + cstr("c")
        + cstr("/h")
        + struct.pack(">i", 300)
        + struct.pack(">i", 100)
        + cbytes(b"sub")
        + cbytes(b"asg")
        + b"\x00"  # member tagged fields
        + b"\x00"  # value tagged fields
    )
    v = decode_group_metadata_value(data)
    assert (v.generation, v.protocol, v.leader, v.current_state_timestamp) == (7, "range", "m", 5)
    assert v.members == [MemberMetadataValue("m", None, "c", "/h", 300, 100, b"sub", b"asg")]


# ---- partitioning ----


def reference_hashcode(s: str) -> int:
    """Java's documented closed form: s[0]*31^(n-1) + ... + s[n-1], as a signed int."""
    units = [
        int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i : i + 2], "big")
        for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)
    ]
    n = len(units)
    total = sum(u * pow(31, n - 1 - i) for i, u in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= 1 << 31 else total


@pytest.mark.parametrize(
    "s, expected",
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello", 99162322),
        ("polygenelubricants", -(1 << 31)),  # hashes to Integer.MIN_VALUE
        ("console-consumer-12345", None),
        ("😀-group", None),  # a surrogate pair counts as two code units
    ],
)
def test_java_string_hashcode(s, expected):
    assert java_string_hashcode(s) == reference_hashcode(s)
    if expected is not None:
        assert java_string_hashcode(s) == expected


@pytest.mark.parametrize(
    "group", ["", "my-group", "test-consumer-group", "polygenelubricants", "grüppe", "😀"]
)
def test_partition_for_is_abs_hash_mod_partitions(group):
    # Kafka's Utils.abs(x) is x & 0x7fffffff (so MIN_VALUE maps to 0, not to itself).
    assert partition_for(group, 50) == (reference_hashcode(group) & 0x7FFFFFFF) % 50
    assert 0 <= partition_for(group, 50) < 50


def test_partition_for_known_values():
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("hello", 50) == 99162322 % 50
