"""Turns options (and pushed-down filters) into the offset ranges a query reads.

Each range's end is fixed here, at planning: a later read never goes past it, so a
query sees one consistent snapshot of a log that a broker keeps appending to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa

from logstore.spark.errors import DataLossError, OffsetForTimestampNotFound, UnknownPartitionError
from logstore.spark.offset_range import OffsetRange, RecordBounds, split_ranges
from logstore.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions


class Log(Protocol):
    """A source of partitions: ``FileLog`` (segment files) or ``NetworkLog`` (Kafka protocol)."""

    def partitions(self) -> dict[str, list[int]]: ...
    def offsets(self, topic: str, partition: int) -> tuple[int, int]: ...
    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None: ...
    def read(
        self,
        r: OffsetRange,
        bounds: RecordBounds,
        *,
        include_headers: bool,
        fail_on_data_loss: bool,
        max_rows: int,
    ) -> Iterator[pa.RecordBatch]: ...
    def close(self) -> None: ...


def selected_partitions(log: Log, opts: SourceOptions) -> list[tuple[str, int]]:
    """The topic-partitions the options select; with ``assign``, each of them must exist."""
    present = log.partitions()
    if opts.assigned is not None:
        missing = sorted(tp for tp in opts.assigned if tp[1] not in present.get(tp[0], ()))
        if missing:
            raise UnknownPartitionError(
                "assign names partitions that do not exist: "
                + ", ".join(f"{t}-{p}" for t, p in missing)
            )
        return sorted(opts.assigned)
    return [(t, p) for t, ps in present.items() if opts.selects(t) for p in ps]


def resolve(
    log: Log,
    spec: OffsetSpec,
    tp: tuple[str, int],
    bounds: tuple[int, int],
    opts: SourceOptions,
    *,
    ending: bool,
) -> int:
    """The offset ``spec`` names for ``tp``, whose log spans ``bounds`` = (start, end)."""
    earliest, latest = bounds
    if spec.kind == "earliest":
        return earliest
    if spec.kind == "latest":
        return latest
    if spec.kind == "offsets":
        assert spec.per_partition is not None
        o = spec.per_partition.get(tp, LATEST if ending else EARLIEST)
        return earliest if o == EARLIEST else latest if o == LATEST else o
    ts = spec.timestamp if spec.timestamp is not None else (spec.per_partition or {}).get(tp)
    if ts is None:
        return latest if ending else earliest
    o = log.offset_for_timestamp(tp[0], tp[1], ts)
    if o is not None:
        return o
    if ending or opts.timestamp_not_found_latest:
        return latest
    raise OffsetForTimestampNotFound(
        f"{tp[0]}-{tp[1]}: no record has a timestamp >= {ts} "
        "(set startingOffsetsByTimestampStrategy=latest)"
    )


def check_start(tp: tuple[str, int], start: int, earliest: int, opts: SourceOptions) -> int:
    """A start below the log start offset is data loss: an error, or skip to the log start."""
    if start < earliest:
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{tp[0]}-{tp[1]}: offset {start} is below the log start offset {earliest} "
                "(records deleted by retention; set failOnDataLoss=false to skip them)"
            )
        return earliest
    return start


def plan_batch(log: Log, opts: SourceOptions, bounds: RecordBounds) -> list[OffsetRange]:
    """The ranges of a batch query: [starting, ending) of every selected partition,
    narrowed by the pushed-down partition and offset filters."""
    ranges = []
    for tp in selected_partitions(log, opts):
        if bounds.partitions is not None and tp[1] not in bounds.partitions:
            continue
        span = log.offsets(*tp)
        start = check_start(
            tp, resolve(log, opts.starting, tp, span, opts, ending=False), span[0], opts
        )
        end = min(resolve(log, opts.ending, tp, span, opts, ending=True), span[1])
        if bounds.min_offset is not None:
            start = max(start, bounds.min_offset)
        if bounds.end_offset is not None:
            end = min(end, bounds.end_offset)
        if start < end:
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return split_ranges(ranges, opts.min_partitions)
