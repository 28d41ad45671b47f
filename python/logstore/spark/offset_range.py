"""The unit of work of a Spark task: one topic-partition's offsets [start, end)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class RecordBounds:
    """Row filters pushed down by Spark, applied while decoding.

    Offsets in [min_offset, end_offset) and timestamps (ms) in [min_timestamp,
    max_timestamp], both inclusive; None is unbounded. ``partitions`` None means all.
    """

    partitions: frozenset[int] | None = None
    min_offset: int | None = None
    end_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    def clamp(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) narrowed to these offset bounds (possibly empty: start >= end)."""
        if self.min_offset is not None:
            start = max(start, self.min_offset)
        if self.end_offset is not None:
            end = min(end, self.end_offset)
        return start, end


class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic-partition, read by one Spark task.

    Invariant: start <= end, both fixed when the query (or micro-batch) is planned.
    """

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.end}))"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Splits the largest ranges into equal offset pieces until there are at least
    ``min_partitions`` (Kafka's KafkaOffsetRangeCalculator: pieces proportional to size)."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, round(min_partitions * r.size / total))
        parts = min(parts, max(1, r.size))
        step, extra = divmod(r.size, parts)
        start = r.start
        for i in range(parts):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out
