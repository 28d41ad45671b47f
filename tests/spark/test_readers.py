"""The readers without a Spark session: ends fixed at planning while the log grows,
segments deleted between planning and reading, and the Arrow batches themselves."""

from __future__ import annotations

import glob
import os

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import logstore  # noqa: E402
from logstore.spark.errors import DataLossError, UnknownPartitionError  # noqa: E402
from logstore.spark.source import LogstoreDataSource  # noqa: E402

from .helpers import write_partition  # noqa: E402


def _reader(root: str, **options: str):  # type: ignore[no-untyped-def]
    source = LogstoreDataSource({"path": root, **options})
    return source.reader(source.schema())


def _read_all(reader) -> pa.Table:  # type: ignore[no-untyped-def]
    batches = [b for part in reader.partitions() for b in reader.read(part)]
    return pa.Table.from_batches(batches) if batches else pa.table({})


def test_end_offsets_are_fixed_at_planning(tmp_path):
    root = str(tmp_path)
    write_partition(root, "t", 0, 100)
    reader = _reader(root)
    parts = reader.partitions()
    write_partition(root, "t", 0, 50)  # appended after planning
    rows = sum(b.num_rows for p in parts for b in reader.read(p))
    assert rows == 100
    assert _read_all(_reader(root)).num_rows == 150


def test_arrow_batches_have_the_kafka_schema(tmp_path):
    root = str(tmp_path)
    write_partition(root, "t", 0, 30, codec="gzip")
    table = _read_all(_reader(root, includeHeaders="true", maxRecordsPerBatch="7"))
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert table.num_rows == 30
    assert table.column("offset").to_pylist() == list(range(30))


def test_segment_deleted_between_planning_and_reading(tmp_path):
    root = str(tmp_path)
    write_partition(root, "t", 0, 200, segment_bytes=2048)
    segs = sorted(glob.glob(os.path.join(root, "t-0", "*.log")))
    strict, lenient = _reader(root), _reader(root, failOnDataLoss="false")
    strict_parts, lenient_parts = strict.partitions(), lenient.partitions()
    os.remove(segs[0])  # retention, after planning
    with pytest.raises(DataLossError):
        [b for p in strict_parts for b in strict.read(p)]
    offsets = [
        o for p in lenient_parts for b in lenient.read(p) for o in b.column("offset").to_pylist()
    ]
    assert offsets == list(range(int(os.path.basename(segs[1])[:20]), 200))


def test_rolled_and_cleaned_segments_stay_readable(tmp_path):
    """A reader keeps reading a segment the writer rolls past, and sees the planned
    end even when the active segment has grown and rolled since planning."""
    root = str(tmp_path)
    path = os.path.join(root, "t-0")
    log = logstore.Log.open(path, segment_bytes=4096)
    try:
        for _ in range(20):
            log.append(logstore.encode_batch([(None, b"x" * 50)] * 5))
        reader = _reader(root, maxRecordsPerBatch="5")
        (part,) = reader.partitions()
        it = reader.read(part)
        first = next(it)
        for _ in range(40):
            log.append(logstore.encode_batch([(None, b"y" * 50)] * 5))
        log.roll()
        rest = list(it)
    finally:
        log.close()
    offsets = first.column("offset").to_pylist() + [
        o for b in rest for o in b.column("offset").to_pylist()
    ]
    assert offsets == list(range(100))


def test_assign_reads_exactly_the_named_partitions(tmp_path):
    root = str(tmp_path)
    for p in range(3):
        write_partition(root, "t", p, 10 + p)
    write_partition(root, "u", 0, 5)
    table = _read_all(_reader(root, assign='{"t": [0, 2], "u": [0]}'))
    assert sorted(
        set(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist()))
    ) == [("t", 0), ("t", 2), ("u", 0)]
    assert table.num_rows == 10 + 12 + 5
    with pytest.raises(UnknownPartitionError, match="t-7"):
        _reader(root, assign='{"t": [0, 7]}').partitions()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _stream_reader(root: str, clock: _Clock, **options: str):  # type: ignore[no-untyped-def]
    from logstore.spark.stream_reader import StreamReader

    source = LogstoreDataSource({"path": root, "startingOffsets": "earliest", **options})
    reader = source.streamReader(source.schema())
    return StreamReader(reader.log, reader.opts, clock=clock)


def test_min_offsets_per_trigger(tmp_path):
    from pyspark.sql.streaming.datasource import ReadMinRows

    root = str(tmp_path)
    write_partition(root, "m", 0, 100)
    clock = _Clock()
    r = _stream_reader(root, clock, minOffsetsPerTrigger="50", maxTriggerDelay="10s")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(50)
    start = r.initialOffset()
    assert start == {"m": {"0": 0}}
    # The first trigger goes through, as in Kafka's source.
    end = r.latestOffset(start, limit)
    assert end == {"m": {"0": 100}}
    write_partition(root, "m", 0, 30)
    clock.now += 1
    assert r.latestOffset(end, limit) == end  # 30 new < 50: held back
    write_partition(root, "m", 1, 25)  # a new partition's records count too
    clock.now += 1
    end = r.latestOffset(end, limit)
    assert end == {"m": {"0": 130, "1": 25}}
    write_partition(root, "m", 0, 10)
    clock.now += 9.5
    assert r.latestOffset(end, limit) == end  # 9.5 s since the last micro-batch
    clock.now += 0.6
    assert r.latestOffset(end, limit) == {"m": {"0": 140, "1": 25}}  # maxTriggerDelay passed


def test_min_and_max_offsets_per_trigger_together_and_available_now(tmp_path):
    from pyspark.sql.streaming.datasource import ReadMaxRows

    root = str(tmp_path)
    write_partition(root, "m", 0, 100)
    clock = _Clock()
    r = _stream_reader(root, clock, minOffsetsPerTrigger="20", maxOffsetsPerTrigger="30")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(30)
    start = r.initialOffset()
    end = r.latestOffset(start, limit)
    assert end == {"m": {"0": 30}}
    end = r.latestOffset(end, limit)
    assert end == {"m": {"0": 60}}
    end = r.latestOffset(end, limit)
    assert end == {"m": {"0": 90}}
    assert r.latestOffset(end, limit) == end  # 10 new < 20
    # Trigger.AvailableNow never waits for more: the last 10 come through.
    r.prepareForTriggerAvailableNow()
    assert r.latestOffset(end, limit) == {"m": {"0": 100}}
