"""The records of ``__transaction_state``, byte for byte as Kafka writes them.

Key: ``version int16 = 0``, ``transactional_id string``.

Value: ``version int16`` then TransactionLogValue (we write v0; v1 is v0's fields in
the flexible encoding plus tagged fields, and is read too)::

    producer_id                          int64
    producer_epoch                       int16
    transaction_timeout_ms               int32
    transaction_status                   int8   (TransactionState)
    transaction_partitions               nullable [topic string, partition_ids [int32]]
    transaction_last_update_timestamp_ms int64
    transaction_start_timestamp_ms       int64

A null value (tombstone) removes the transactional id. The partition of a
transactional id is ``abs(hashCode(id)) % partitions``, as for groups.
"""

from __future__ import annotations

import struct

from broker_py.common.java_string_hash import partition_for
from broker_py.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)
from logstore.protocol.errors import KafkaException, ProtocolError
from logstore.protocol.schema import Array, Field, Struct
from logstore.protocol.types import INT8, INT16, INT32, INT64, STRING, Reader, Writer

__all__ = [
    "InvalidTransactionRecordError",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")

_PARTITIONS = Struct(
    "PartitionsSchema",
    [
        Field("topic", STRING, "0+"),
        Field("partition_ids", Array(INT32), "0+"),
    ],
)

_VALUE = Struct(
    "TransactionLogValue",
    [
        Field("producer_id", INT64, "0+"),
        Field("previous_producer_id", INT64, "1+", default=-1, tag=0),
        Field("next_producer_id", INT64, "1+", default=-1, tag=1),
        Field("producer_epoch", INT16, "0+"),
        Field("transaction_timeout_ms", INT32, "0+"),
        Field("transaction_status", INT8, "0+"),
        Field("transaction_partitions", Array(_PARTITIONS), "0+", nullable="0+"),
        Field("transaction_last_update_timestamp_ms", INT64, "0+"),
        Field("transaction_start_timestamp_ms", INT64, "0+"),
        Field("client_transaction_version", INT16, "1+", default=0, tag=2),
    ],
)

_CODECS = {0: _VALUE.codec(0, False), 1: _VALUE.codec(1, True)}


class InvalidTransactionRecordError(KafkaException):
    """A ``__transaction_state`` key or value that does not parse."""


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    if len(data) < 4:
        raise InvalidTransactionRecordError(f"key of {len(data)} bytes")
    version, n = struct.unpack_from(">hh", data)
    if version != KEY_VERSION:
        raise InvalidTransactionRecordError(f"key version {version}")
    if n < 0 or 4 + n != len(data):
        raise InvalidTransactionRecordError("key length disagrees with its string")
    try:
        return data[4:].decode()
    except UnicodeDecodeError as e:
        raise InvalidTransactionRecordError(f"transactional id is not UTF-8: {e}") from None


def encode_value(txn: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    value = _VALUE.cls(
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        transaction_timeout_ms=txn.txn_timeout_ms,
        transaction_status=int(txn.state),
        transaction_partitions=[
            _PARTITIONS.cls(topic=t, partition_ids=ps) for t, ps in by_topic.items()
        ],
        transaction_last_update_timestamp_ms=txn.txn_last_update_timestamp,
        transaction_start_timestamp_ms=txn.txn_start_timestamp,
    )
    w = Writer()
    _CODECS[VALUE_VERSION].write(w, value)
    return _I16.pack(VALUE_VERSION) + w.getvalue()


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    if len(data) < 2:
        raise InvalidTransactionRecordError(f"value of {len(data)} bytes")
    (version,) = _I16.unpack_from(data)
    codec = _CODECS.get(version)
    if codec is None:
        raise InvalidTransactionRecordError(f"value version {version}")
    r = Reader(data, 2)
    try:
        v = codec.read(r)
    except (ProtocolError, ValueError) as e:
        raise InvalidTransactionRecordError(f"value of {transactional_id!r}: {e}") from None
    if r.remaining():
        raise InvalidTransactionRecordError(
            f"value of {transactional_id!r} has {r.remaining()} bytes after its fields"
        )
    try:
        state = TransactionState(v.transaction_status)
    except ValueError:
        raise InvalidTransactionRecordError(
            f"value of {transactional_id!r} has status {v.transaction_status}"
        ) from None
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        txn_timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions={(p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids},
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
    )
