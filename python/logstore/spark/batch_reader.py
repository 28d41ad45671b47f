"""Batch reads: ``spark.read.format("logstore")``.

Spark refuses a reader that overrides ``pushFilters`` when
``spark.sql.python.filterPushdown.enabled`` is off, so there are two readers:
``BatchReader`` (no pushdown) and ``PushdownBatchReader``; the data source picks the
one that matches the session's setting at registration (see ``source.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from logstore.spark.offset_range import OffsetRange, RecordBounds
from logstore.spark.options import SourceOptions
from logstore.spark.planner import Log, plan_batch
from logstore.spark.pushdown import PushedFilters


class BatchReader(DataSourceReader):
    def __init__(self, log: Log, opts: SourceOptions) -> None:
        self.log = log
        self.opts = opts
        self.bounds = RecordBounds()

    def partitions(self) -> list[InputPartition]:
        ranges = plan_batch(self.log, self.opts, self.bounds)
        self.log.close()
        # Spark needs at least one partition; an empty range reads nothing.
        return list(ranges) or [OffsetRange("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        if partition.size <= 0:
            return
        yield from self.log.read(
            partition,
            self.bounds,
            include_headers=self.opts.include_headers,
            fail_on_data_loss=self.opts.fail_on_data_loss,
            max_rows=self.opts.max_records_per_batch,
        )


class PushdownBatchReader(BatchReader):
    """``BatchReader`` plus filter pushdown on partition, offset and timestamp."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        pushed = PushedFilters()
        yield from pushed.push(filters)
        self.bounds = pushed.bounds
