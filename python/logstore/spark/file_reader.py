"""Reads topics from a broker's ``log.dirs`` on disk, read-only, while it may be writing.

Partition directories are ``<log.dir>/<topic>-<partition>`` (the last ``-`` splits);
directories being deleted (``...-delete``) and internal topics unless named are
skipped. All file access is the Rust ``PartitionReader``'s: ``pread`` of whole
batches, stopping at the end offset fixed at planning, a vanished segment handled
per failOnDataLoss. ``log end`` ("latest") is the offset after the last whole batch
on disk when asked.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator

import pyarrow as pa

from logstore import _native
from logstore.spark.errors import DataLossError
from logstore.spark.offset_range import OffsetRange, RecordBounds

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class FileLog:
    """The topic-partitions under one or more log dirs. Picklable (only paths)."""

    def __init__(self, log_dirs: tuple[str, ...], metrics_dir: str | None = None) -> None:
        self.log_dirs = log_dirs
        self.metrics_dir = metrics_dir

    def _partition_dirs(self) -> dict[tuple[str, int], str]:
        out: dict[tuple[str, int], str] = {}
        for log_dir in self.log_dirs:
            try:
                names = os.listdir(log_dir)
            except FileNotFoundError:
                continue
            for name in names:
                m = _PARTITION_DIR.match(name)
                path = os.path.join(log_dir, name)
                if m and os.path.isdir(path):
                    out[(m["topic"], int(m["partition"]))] = path
        return out

    def _dir(self, topic: str, partition: int) -> str:
        try:
            return self._partition_dirs()[(topic, partition)]
        except KeyError:
            raise DataLossError(
                f"partition {topic}-{partition} is not in {', '.join(self.log_dirs)}"
            ) from None

    def close(self) -> None:
        """Nothing is held open between calls."""

    def partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, p in sorted(self._partition_dirs()):
            out.setdefault(topic, []).append(p)
        return out

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) now."""
        return _native.partition_offsets(self._dir(topic, partition))

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        return _native.offset_for_timestamp(self._dir(topic, partition), timestamp)

    def read(
        self,
        r: OffsetRange,
        bounds: RecordBounds,
        *,
        include_headers: bool,
        fail_on_data_loss: bool,
        max_rows: int,
    ) -> Iterator[pa.RecordBatch]:
        start, end = bounds.clamp(r.start, r.end)
        if start >= end:
            return
        try:
            path = self._dir(r.topic, r.partition)
        except DataLossError:
            if fail_on_data_loss:
                raise
            return
        reader = _native.PartitionReader(
            path,
            r.topic,
            r.partition,
            start_offset=start,
            end_offset=end,
            min_timestamp=bounds.min_timestamp,
            max_timestamp=bounds.max_timestamp,
            include_headers=include_headers,
            fail_on_data_loss=fail_on_data_loss,
        )
        try:
            while (batch := reader.read(max_rows)) is not None:
                yield batch
        except _native.OffsetOutOfRangeError as e:
            raise DataLossError(
                f"{r.topic}-{r.partition}: {e} (set failOnDataLoss=false to skip lost offsets)"
            ) from e
        finally:
            self._write_metrics(r, reader)

    def _write_metrics(self, r: OffsetRange, reader: _native.PartitionReader) -> None:
        """With the ``metricsDir`` option, each task leaves one JSON file of what it read."""
        if not self.metrics_dir:
            return
        os.makedirs(self.metrics_dir, exist_ok=True)
        doc = {
            "topic": r.topic,
            "partition": r.partition,
            "start": r.start,
            "end": r.end,
            "segments_opened": reader.segments_opened,
            "bytes_read": reader.bytes_read,
            "batches_decoded": reader.batches_decoded,
        }
        name = f"{r.topic}-{r.partition}-{r.start}-{uuid.uuid4().hex}.json"
        with open(os.path.join(self.metrics_dir, name), "w") as f:
            json.dump(doc, f)
