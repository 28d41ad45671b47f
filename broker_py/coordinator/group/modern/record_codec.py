"""The framing the modern group records share in ``__consumer_offsets`` (consumer groups:
:mod:`.record_serde`; share groups: :mod:`.share.record_serde`), each family giving its
record types and schemas.

Key: int16 record type, then the key's fields in the classic encoding (int16-length
strings). Value: int16 value version, then the value's fields in the flexible encoding;
a null value is a tombstone. Every value type has version 0 only, which is what is
written.

Reading: a key or value that does not parse, or with bytes left after its fields, raises
:class:`InvalidGroupRecordError`; a negative value version too. A value version above 0 is
read for the version-0 fields it starts with, the rest ignored, with a warning (Kafka's
loader fails the whole load on it instead, which would leave the partition's groups
without a coordinator).

Assignments are written as ``[topic_id uuid, partitions [int32]]`` sorted by topic id and
partition, so that a record's bytes depend on its value only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from broker_py.coordinator.group.group_metadata_records import InvalidGroupRecordError
from broker_py.coordinator.group.modern.member import Assignment, make_assignment
from logstore.protocol.errors import EncodeError, MalformedMessageError
from logstore.protocol.schema import Array, Field, Struct, StructValue
from logstore.protocol.types import INT32, UUID, Reader, Writer

log = logging.getLogger(__name__)

# The value version written, and the highest one whose every field is known.
VALUE_VERSION = 0

TOPIC_PARTITIONS = Struct(
    "TopicPartitions", [Field("topic_id", UUID, "0+"), Field("partitions", Array(INT32), "0+")]
)


def encode(
    kind: int,
    key_schema: Struct,
    key_fields: StructValue,
    value_schema: Struct,
    value_fields: StructValue | None,
    what: str,
) -> tuple[bytes, bytes | None]:
    """The key and value bytes (``None`` for a tombstone: ``value_fields`` None). Raises
    :class:`ValueError` naming ``what`` for a record that cannot be written (a string
    longer than an int16 length in a key, a number outside its field's range)."""
    try:
        w = Writer()
        w.int16(kind)
        key_schema.codec(0, False).write(w, key_fields)
        key = w.getvalue()
        if value_fields is None:
            return key, None
        w = Writer()
        w.int16(VALUE_VERSION)
        value_schema.codec(VALUE_VERSION, True).write(w, value_fields)
        return key, w.getvalue()
    except EncodeError as exc:
        raise ValueError(f"cannot write {what}: {exc}") from None


def _read(schema: Struct, data: bytes, flexible: bool, what: str, exact: bool) -> Any:
    r = Reader(data, 2)
    try:
        out = schema.codec(0, flexible).read(r)
    except MalformedMessageError as exc:  # TruncatedMessageError included
        raise InvalidGroupRecordError(f"{schema.name}: {exc}") from None
    if exact and r.remaining():
        raise InvalidGroupRecordError(
            f"{schema.name}: {r.remaining()} bytes after the {what} at byte {r.pos}"
        )
    return out


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise InvalidGroupRecordError(f"{what} of {len(data)} bytes has no version")
    return int.from_bytes(data[:2], "big", signed=True)


def read_key(keys: Mapping[int, Struct], key: bytes) -> tuple[int, Any] | None:
    """The record type and key fields; None for a record type not in ``keys``."""
    kind = _version(key, "key")
    schema = keys.get(kind)
    if schema is None:
        return None
    return kind, _read(schema, key, False, "key", exact=True)


def read_value(kind: int, schema: Struct, value: bytes, family: str, group_id: str) -> Any:
    """The value's fields; ``family`` ("group", "share group") names the group in the
    warning about a newer value version."""
    version = _version(value, "value")
    if version < 0:
        raise InvalidGroupRecordError(f"record type {kind}: value version {version}")
    if version > VALUE_VERSION:
        log.warning(
            "__consumer_offsets: %s of %s %r has value version %d, newer than %d; "
            "reading the fields of version %d only",
            schema.name,
            family,
            group_id,
            version,
            VALUE_VERSION,
            VALUE_VERSION,
        )
    return _read(schema, value, True, "value", exact=version <= VALUE_VERSION)


def topic_partitions_to_wire(assignment: Assignment) -> list[StructValue]:
    return [
        TOPIC_PARTITIONS.cls(topic_id=topic_id, partitions=sorted(assignment[topic_id]))
        for topic_id in sorted(assignment)
    ]


def assignment_from_wire(topics: Iterable[Any]) -> dict[uuid.UUID, frozenset[int]]:
    """Topics named more than once have their partitions merged."""
    merged: dict[uuid.UUID, set[int]] = {}
    for t in topics:
        merged.setdefault(t.topic_id, set()).update(t.partitions)
    return make_assignment(merged)
