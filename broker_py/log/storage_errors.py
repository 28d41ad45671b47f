"""The one place where the storage engine's errors become Kafka errors.

Every ``logstore.LogStoreError`` that crosses out of the log layer is raised again as
the :class:`~logstore.protocol.errors.KafkaError` Kafka answers with, so the layers
above (partition, replica manager, handlers, coordinators) catch only ``KafkaError``:

| storage engine                               | Kafka error             | code |
|----------------------------------------------|-------------------------|------|
| ``CorruptRecordError``                       | CORRUPT_MESSAGE         | 2    |
| ``InvalidTimestampError``                    | INVALID_TIMESTAMP       | 32   |
| ``InvalidRecordError``                       | INVALID_RECORD          | 87   |
| ``RecordTooLargeError``                      | MESSAGE_TOO_LARGE       | 10   |
| ``OffsetOutOfRangeError``                    | OFFSET_OUT_OF_RANGE     | 1    |
| ``InvalidConfigError``                       | INVALID_CONFIG          | 40   |
| ``LogClosedError`` (deleted or moved away)   | NOT_LEADER_OR_FOLLOWER  | 6    |
| any other (I/O, index, offsets)              | KAFKA_STORAGE_ERROR     | 56   |

A record-rule refusal keeps each offending record's error (``record_errors``) for the
Produce response. Storage errors (KAFKA_STORAGE_ERROR) are logged by
:class:`StorageErrorLog`, at most once per interval per partition, with the count.
"""

from __future__ import annotations

import logging
import time

import logstore
from logstore.protocol.errors import (
    CorruptMessageError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)

log = logging.getLogger(__name__)

# A failing disk fails every retry of every producer: one log line per partition per
# this many seconds says so without flooding the log.
STORAGE_ERROR_LOG_INTERVAL_S = 10.0


def _rejected(e: logstore.InvalidRecordError) -> KafkaError:
    """INVALID_TIMESTAMP or INVALID_RECORD for records the topic's config refused,
    worded as Kafka words it, with each record's own error for record_errors."""
    listed = tuple(e.record_errors)
    shown = ", ".join(f"(batchIndex={i}, message={m})" for i, m in listed[:3])
    cls = (
        InvalidTimestampError
        if isinstance(e, logstore.InvalidTimestampError)
        else InvalidRecordError
    )
    error = cls(
        f"One or more records have been rejected due to {len(listed)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    error.record_errors = listed
    return error


def kafka_error(e: logstore.LogStoreError, where: str) -> KafkaError:
    """The Kafka error for storage-engine error ``e`` raised by the log of ``where``
    (``topic-partition``)."""
    if isinstance(e, logstore.CorruptRecordError):
        return CorruptMessageError(str(e))
    if isinstance(e, logstore.InvalidRecordError):
        return _rejected(e)
    if isinstance(e, logstore.RecordTooLargeError):
        return MessageTooLargeError(str(e))
    if isinstance(e, logstore.OffsetOutOfRangeError):
        return OffsetOutOfRangeError(f"{where}: {e}")
    if isinstance(e, logstore.InvalidConfigError):
        return InvalidConfigError(str(e))
    if isinstance(e, logstore.LogClosedError):
        return NotLeaderOrFollowerError(f"{where}: the log is closed ({e})")
    return KafkaStorageError(f"{where}: {e}")


class StorageErrorLog:
    """Logs a partition's storage errors at most once per interval, with the count."""

    def __init__(self, where: str, interval_s: float = STORAGE_ERROR_LOG_INTERVAL_S) -> None:
        self.where = where
        self.interval_s = interval_s
        self._logged_at = -interval_s
        self._since_logged = 0

    def record(self, error: KafkaError, action: str = "appending to") -> KafkaError:
        if not isinstance(error, KafkaStorageError):
            return error
        self._since_logged += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval_s:
            log.error(
                "%s %s failed %d time(s) in the last %.0f s (KAFKA_STORAGE_ERROR): %s",
                action,
                self.where,
                self._since_logged,
                self.interval_s,
                error,
            )
            self._logged_at = now
            self._since_logged = 0
        return error
