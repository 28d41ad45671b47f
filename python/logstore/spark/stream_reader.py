"""Streaming reads: ``spark.readStream.format("logstore")``.

Offsets are JSON-able dicts ``{"topic": {"partition": next offset}}``, as Spark's Kafka
source writes them to its checkpoint. A micro-batch reads, per partition, from the
start dict's offset (a partition missing there appeared since: from its log start)
up to the end dict's offset.

Admission control, as Kafka's source does it:
- ``maxOffsetsPerTrigger`` is the default ``ReadMaxRows`` limit; a limit spreads over
  the partitions in proportion to what each has available, at least one offset for a
  partition with data.
- ``minOffsetsPerTrigger`` (the default ``ReadMinRows`` limit when it is the only one)
  holds a micro-batch back, by answering the start offsets again, until that many new
  offsets are available or ``maxTriggerDelay`` has passed since the last micro-batch
  the source let through. The first trigger always goes through. Both limits may be
  set; PySpark has no composite limit, so the source applies its options itself and
  a limit Spark passes on top.
``Trigger.AvailableNow`` fixes the latest offsets once, in
``prepareForTriggerAvailableNow``, and the query ends when they are read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from logstore.spark.offset_range import OffsetRange, RecordBounds, split_ranges
from logstore.spark.options import SourceOptions
from logstore.spark.planner import Log, check_start, resolve, selected_partitions

Offsets = dict[str, dict[str, int]]


def _get(offsets: Offsets, topic: str, partition: int) -> int | None:
    return offsets.get(topic, {}).get(str(partition))


def _put(offsets: Offsets, topic: str, partition: int, offset: int) -> None:
    offsets.setdefault(topic, {})[str(partition)] = offset


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self, log: Log, opts: SourceOptions, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = log
        self.opts = opts
        self.available_now: Offsets | None = None
        self.clock = clock
        self.last_trigger: float | None = None

    def _spans(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: self.log.offsets(*tp) for tp in selected_partitions(self.log, self.opts)}

    def initialOffset(self) -> Offsets:
        out: Offsets = {}
        for tp, span in self._spans().items():
            start = resolve(self.log, self.opts.starting, tp, span, self.opts, ending=False)
            _put(out, tp[0], tp[1], check_start(tp, start, span[0], self.opts))
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self._latest()

    def _latest(self) -> Offsets:
        out: Offsets = {}
        for (t, p), (_, end) in self._spans().items():
            _put(out, t, p, end)
        return out

    def reportLatestOffset(self) -> Offsets:
        return self._latest()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        spans = self._spans()
        cap = self.available_now
        begin: dict[tuple[str, int], int] = {}
        latest: dict[tuple[str, int], int] = {}
        for (t, p), (first, end) in spans.items():
            s = _get(start, t, p)
            begin[(t, p)] = first if s is None else s
            e = (
                end
                if cap is None
                else min(end, _get(cap, t, p) if _get(cap, t, p) is not None else first)
            )
            latest[(t, p)] = max(e, begin[(t, p)])
        min_rows = max(
            self.opts.min_offsets_per_trigger or 0,
            limit.min_rows if isinstance(limit, ReadMinRows) else 0,
        )
        # Trigger.AvailableNow reads what there is and ends: it never waits for more.
        if min_rows and cap is None and self._hold_back(begin, latest, min_rows):
            latest = begin
        max_rows = [
            n for n in (self.opts.max_offsets_per_trigger, getattr(limit, "max_rows", None)) if n
        ]
        if max_rows:
            latest = _rate_limit(begin, latest, min(max_rows))
        out: Offsets = {}
        # Partitions that vanished keep their last offset so the dict never shrinks.
        for t, parts in start.items():
            for p, o in parts.items():
                _put(out, t, int(p), o)
        for (t, p), o in latest.items():
            _put(out, t, p, o)
        return out

    def _hold_back(
        self, begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int], min_rows: int
    ) -> bool:
        """Kafka's ``delayBatch``: wait while fewer than ``min_rows`` offsets are new and
        ``maxTriggerDelay`` has not passed since the last micro-batch let through."""
        now = self.clock()
        waited_ms = None if self.last_trigger is None else (now - self.last_trigger) * 1000
        if waited_ms is not None and waited_ms < self.opts.max_trigger_delay_ms:
            if sum(latest[tp] - begin[tp] for tp in latest) < min_rows:
                return True
        self.last_trigger = now
        return False

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        ranges = []
        for t, parts in end.items():
            for p, e in parts.items():
                s = _get(start, t, int(p))
                if s is None:
                    s = self.log.offsets(t, int(p))[0]
                if s < e:
                    ranges.append(OffsetRange(t, int(p), s, e))
        self.log.close()
        return list(split_ranges(ranges, self.opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        yield from self.log.read(
            partition,
            RecordBounds(),
            include_headers=self.opts.include_headers,
            fail_on_data_loss=self.opts.fail_on_data_loss,
            max_rows=self.opts.max_records_per_batch,
        )

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the log keeps its data by its own retention."""

    def stop(self) -> None:
        self.log.close()


def _rate_limit(
    begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int], max_rows: int
) -> dict[tuple[str, int], int]:
    """At most ``max_rows`` offsets in all, shared in proportion to what is available."""
    avail = {tp: latest[tp] - begin[tp] for tp in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return latest
    out = {}
    budget = max_rows
    for tp in sorted(avail, key=lambda tp: avail[tp]):
        share = min(
            avail[tp], budget, max(1 if avail[tp] else 0, int(max_rows * avail[tp] / total))
        )
        out[tp] = begin[tp] + share
        budget -= share
    return out
