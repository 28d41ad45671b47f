"""logstore: a Kafka-compatible event streaming broker with a Rust storage engine.

This package is the Python face of the storage engine (``logstore._native``): the
partition ``Log``, the RecordBatch v2 encoder and decoder, zero-copy ``sendfile``,
and one exception hierarchy under ``LogStoreError``.
"""

from logstore._native import (
    COMPRESSION_TYPES,
    AppendInfo,
    CorruptIndexError,
    CorruptRecordError,
    FileSlice,
    InvalidConfigError,
    InvalidOffsetError,
    Log,
    LogClosedError,
    LogIOError,
    LogStoreError,
    OffsetOutOfRangeError,
    Record,
    RecordBatch,
    RecordTooLargeError,
    SegmentInfo,
    crc32c,
    decode_batches,
    encode_batch,
    encode_control_batch,
    sendfile,
    validate_log_config,
)

__all__ = [
    "COMPRESSION_TYPES",
    "AppendInfo",
    "CorruptIndexError",
    "CorruptRecordError",
    "FileSlice",
    "InvalidConfigError",
    "InvalidOffsetError",
    "Log",
    "LogClosedError",
    "LogIOError",
    "LogStoreError",
    "OffsetOutOfRangeError",
    "Record",
    "RecordBatch",
    "RecordTooLargeError",
    "SegmentInfo",
    "crc32c",
    "decode_batches",
    "encode_batch",
    "encode_control_batch",
    "sendfile",
    "validate_log_config",
]
