"""One partition's answer to an append (Kafka's ``ProduceResponse.PartitionResponse``).

The replica manager answers every append (a client's produce, a coordinator's own
records, transaction markers) with a :class:`ProducePartitionResult` per partition,
grouped by topic: ``[(topic, [result, ...]), ...]`` in the order asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from logstore.protocol.error_codes import ErrorCode

_LOST_PARTITION = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})


@dataclass(slots=True)
class ProducePartitionResult:
    """``error_code`` 0 with the offset of the first record appended, else the error
    and -1 offsets. ``log_append_time_ms``: -1 unless the topic stamps LogAppendTime.
    ``record_errors``: (batch index, message) of each record a validation refused."""

    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: Sequence[tuple[int, str]] = ()

    @classmethod
    def failed(
        cls,
        index: int,
        error: ErrorCode,
        message: str | None = None,
        record_errors: Sequence[tuple[int, str]] = (),
    ) -> ProducePartitionResult:
        """The answer of a partition that appended nothing."""
        return cls(index, int(error), -1, -1, -1, message or error.description, record_errors)

    def fail(self, error: ErrorCode) -> None:
        """Answers ``error`` (its description as the message) after all: an appended
        partition whose acks=all condition failed. A leader that lost its partition
        (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR) answers -1 offsets, as the records
        may be truncated away; NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT
        keep them (the records are in this leader's log), as Kafka's do."""
        self.error_code = int(error)
        self.error_message = error.description
        if error in _LOST_PARTITION:
            self.base_offset = self.log_append_time_ms = self.log_start_offset = -1

    def wire(self) -> tuple[int, int, int, int, int, str | None, Sequence[tuple[int, str]]]:
        """The 7-tuple ``logstore.encode_produce_response`` takes."""
        return (
            self.index,
            self.error_code,
            self.base_offset,
            self.log_append_time_ms,
            self.log_start_offset,
            self.error_message,
            self.record_errors,
        )
