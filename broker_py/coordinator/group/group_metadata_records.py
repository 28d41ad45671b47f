"""The records of ``__consumer_offsets``, byte for byte as Kafka writes them.

Every key and every value starts with an int16 version. The key's version says
what the record is:

=============  ===================  =========================================
key version    record               key fields after the version
=============  ===================  =========================================
0, 1           OffsetCommitKey      group string, topic string, partition int32
2              GroupMetadataKey     group string
3-8, 16        consumer groups      :mod:`~broker_py.coordinator.group.modern.record_serde`
other          share, streams...    skipped on load
=============  ===================  =========================================

OffsetCommitValue (we write v3):

- v0, v2: offset int64, metadata string, commit_timestamp int64
- v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
- v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
- v4: v3's fields in the flexible encoding (compact strings, tagged fields)

GroupMetadataValue (we write v3):

- protocol_type string, generation int32, protocol nullable string,
  leader nullable string, current_state_timestamp int64 (v2+),
  members int32 count of [member_id string, group_instance_id nullable string
  (v3+), client_id string, client_host string, rebalance_timeout int32 (v1+),
  session_timeout int32, subscription bytes, assignment bytes]
- v4: the same fields, flexible

Classic encodings: string = int16 length + UTF-8 (-1 for null), bytes = int32
length + data. Flexible ones: unsigned varint length + 1 (0 for null), and a
tagged-field section closing each struct. A record with a null value (a
tombstone) deletes its key.

The partition of a group is ``abs(hashCode(group)) % partitions`` with Java's
``String.hashCode`` and Kafka's ``Utils.abs`` (``x & 0x7fffffff``), so Kafka and
logstore place every group on the same partition.
"""

from __future__ import annotations

import dataclasses
import struct

from broker_py.common.java_string_hash import partition_for
from logstore.protocol.errors import KafkaException

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataValue",
    "InvalidGroupRecordError",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "UnknownRecordKey",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class InvalidGroupRecordError(KafkaException):
    """A ``__consumer_offsets`` key or value that does not parse."""


# ---- record types ----


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclasses.dataclass(frozen=True, slots=True)
class UnknownRecordKey:
    """A key version this codec does not read (consumer-group records, read by
    :mod:`~broker_py.coordinator.group.modern.record_serde`; share and streams groups)."""

    version: int


@dataclasses.dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # v1 only


@dataclasses.dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = dataclasses.field(default_factory=list)


# ---- encoding (classic, non-flexible versions) ----


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    data = s.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return _I32.pack(-1)
    return _I32.pack(len(b)) + bytes(b)


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey v1."""
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group)
        + _string(topic)
        + _I32.pack(partition)
    )


def encode_group_metadata_key(group: str) -> bytes:
    """GroupMetadataKey v2."""
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group)


def encode_offset_commit_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int
) -> bytes:
    """OffsetCommitValue v3."""
    return (
        _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _I64.pack(offset)
        + _I32.pack(leader_epoch)
        + _string(metadata)
        + _I64.pack(commit_timestamp)
    )


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """GroupMetadataValue v3."""
    out = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        out += [
            _string(m.member_id),
            _string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout),
            _I32.pack(m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


# ---- decoding (every version Kafka has written) ----


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise InvalidGroupRecordError(
                f"record ends at byte {len(self.data)}, wanted {n} more at {self.pos}"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise InvalidGroupRecordError("varint is too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise InvalidGroupRecordError(f"string is not UTF-8: {e}") from None

    def bytes_(self) -> bytes | None:
        n = self._length(True)
        return None if n < 0 else bytes(self._take(n))

    def array_length(self) -> int:
        return self._length(True)

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownRecordKey:
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.int32()
        if group is None or topic is None:
            raise InvalidGroupRecordError("offset commit key with a null group or topic")
        return OffsetCommitKey(group, topic, partition, version)
    if version == 2:
        group = r.string()
        if group is None:
            raise InvalidGroupRecordError("group metadata key with a null group")
        return GroupMetadataKey(group, version)
    return UnknownRecordKey(version)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise InvalidGroupRecordError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise InvalidGroupRecordError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_length(), 0)):
        member_id = r.string() or ""
        group_instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session_timeout_first = version == 0
        rebalance_timeout = r.int32() if not session_timeout_first else -1
        session_timeout = r.int32()
        if session_timeout_first:
            rebalance_timeout = session_timeout
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.tagged_fields()
        members.append(
            MemberMetadataValue(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, members
    )
