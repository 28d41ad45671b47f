"""Classic members seen from a consumer group: the ConsumerProtocol bytes they exchange and
the plain view of a classic group that the conversions read and write.

ConsumerProtocolSubscription (the metadata of each protocol a member offers in JoinGroup;
non-flexible, versions 0-3; a newer version is read as version 3, as Kafka's clients do)::

    version          int16
    topics           int32 count, then int16 length + UTF-8 per topic
    user_data        nullable bytes (int32 length, -1 for null)
    owned_partitions v1+: int32 count, then per topic: string, int32 count, int32 partitions
    generation_id    v2+: int32 (-1: none)
    rack_id          v3+: nullable string (int16 length, -1 for null; librdkafka sends ""
                     for no rack, which the conversions take as none)

ConsumerProtocolAssignment (what SyncGroup hands a member; versions 0-3, one layout)::

    version             int16
    assigned_partitions int32 count, then per topic: string, int32 count, int32 partitions
    user_data           nullable bytes

Bytes that do not parse raise :class:`MalformedConsumerProtocolError`; nothing read is
larger than the input (every count is checked against the bytes left).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    TopicMetadata,
)

CONSUMER_PROTOCOL_TYPE = "consumer"
HIGHEST_SUBSCRIPTION_VERSION = 3
HIGHEST_ASSIGNMENT_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Topic name -> partitions, as the ConsumerProtocol carries them.
NamedPartitions = dict[str, frozenset[int]]


class MalformedConsumerProtocolError(ValueError):
    """Bytes that are not a ConsumerProtocol subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: NamedPartitions = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class ConsumerAssignment:
    version: int
    partitions: NamedPartitions
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedConsumerProtocolError(
                f"{n} bytes wanted at byte {self.pos} of {len(self.data)}"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        (v,) = _I16.unpack(self._take(2))
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack(self._take(4))
        return int(v)

    def count(self, min_item_size: int) -> int:
        n = self.i32()
        if n < 0 or n * min_item_size > len(self.data) - self.pos:
            raise MalformedConsumerProtocolError(f"array of {n} at byte {self.pos - 4}")
        return n

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise MalformedConsumerProtocolError(f"null string at byte {self.pos - 2}")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise MalformedConsumerProtocolError(f"string not UTF-8: {e}") from None

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        self.pos -= 2
        return self.string()

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else self._take(n)

    def partitions(self) -> NamedPartitions:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.count(6)):
            topic = self.string()
            parts = frozenset(self.i32() for _ in range(self.count(4)))
            out[topic] = out.get(topic, frozenset()) | parts
        return {t: p for t, p in out.items() if p}


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise MalformedConsumerProtocolError(f"subscription version {version}")
    version = min(version, HIGHEST_SUBSCRIPTION_VERSION)
    topics = tuple(r.string() for _ in range(r.count(2)))
    user_data = r.nullable_bytes()
    owned: NamedPartitions = {}
    generation_id, rack_id = -1, None
    if version >= 1:
        owned = r.partitions()
    if version >= 2:
        generation_id = r.i32()
    if version >= 3:
        rack_id = r.nullable_string()
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def subscription_version(data: bytes) -> int:
    """The version a subscription was written at (the assignment answering it uses it)."""
    version = _Reader(data).i16()
    if version < 0:
        raise MalformedConsumerProtocolError(f"subscription version {version}")
    return version


def decode_assignment(data: bytes) -> ConsumerAssignment:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise MalformedConsumerProtocolError(f"assignment version {version}")
    partitions = r.partitions()
    user_data = r.nullable_bytes()
    return ConsumerAssignment(version, partitions, user_data)


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """An assignment at ``version`` (clamped to 0-3), topics and partitions sorted, no
    user data."""
    version = max(0, min(version, HIGHEST_ASSIGNMENT_VERSION))
    out = bytearray(_I16.pack(version))
    topics = sorted((t, sorted(set(p))) for t, p in partitions.items() if p)
    out += _I32.pack(len(topics))
    for topic, parts in topics:
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)


def encode_subscription(
    topics: Iterable[str],
    version: int = HIGHEST_SUBSCRIPTION_VERSION,
    owned: Mapping[str, Iterable[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """A subscription as clients write it (for tests and the classic group's records)."""
    out = bytearray(_I16.pack(version))
    names = list(topics)
    out += _I32.pack(len(names))
    for t in names:
        b = t.encode()
        out += _I16.pack(len(b)) + b
    out += _I32.pack(-1)
    if version >= 1:
        items = sorted((t, sorted(set(p))) for t, p in (owned or {}).items())
        out += _I32.pack(len(items))
        for t, parts in items:
            b = t.encode()
            out += _I16.pack(len(b)) + b + _I32.pack(len(parts))
            for p in parts:
                out += _I32.pack(p)
    if version >= 2:
        out += _I32.pack(generation_id)
    if version >= 3:
        if rack_id is None:
            out += _I16.pack(-1)
        else:
            b = rack_id.encode()
            out += _I16.pack(len(b)) + b
    return bytes(out)


# --- topic names <-> topic ids ------------------------------------------------------------


def to_topic_ids(
    partitions: Mapping[str, frozenset[int]], topics: Mapping[str, TopicMetadata]
) -> dict[uuid.UUID, frozenset[int]]:
    """By topic id; topics that do not exist (any more) are left out, as Kafka does."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for name, parts in partitions.items():
        meta = topics.get(name)
        if meta is not None and parts:
            out[meta.topic_id] = out.get(meta.topic_id, frozenset()) | parts
    return out


def to_topic_names(assignment: Assignment, topics: Mapping[str, TopicMetadata]) -> NamedPartitions:
    """By topic name; topic ids no longer known are left out."""
    names = {t.topic_id: t.name for t in topics.values()}
    return {names[t]: p for t, p in assignment.items() if t in names and p}


def classic_metadata(
    session_timeout_ms: int, protocols: Iterable[tuple[str, bytes]]
) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(
        session_timeout_ms, tuple(ClassicProtocol(name, bytes(md)) for name, md in protocols)
    )


# --- a classic group as plain values -------------------------------------------------------


@dataclass(frozen=True)
class ClassicMemberView:
    """One member of a classic group: what a conversion needs of it."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    # (name, metadata) in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    # ConsumerProtocol assignment bytes (b"" before the member's first SyncGroup).
    assignment: bytes = b""


@dataclass(frozen=True)
class ClassicGroupView:
    """A classic group as plain values: built from the coordinator's group before an
    upgrade, and the group a downgrade produces (in state Stable, to be rebalanced)."""

    group_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    # Kafka's classic state names: Empty, PreparingRebalance, CompletingRebalance, Stable.
    state: str
    leader_id: str | None
    members: tuple[ClassicMemberView, ...]
