"""The Spark data source: 10 M records of 100 B into a Spark count and a Parquet write,
through the Arrow path (Rust decodes straight into Arrow record batches) and through
a plain tuple-yielding Python reader over the same segment files (``decode_batches``
then one tuple per record: the baseline).

Goals: the Arrow path >= 5x the tuple reader; >= 1 M rows/s on local[2].
The ceiling of the Parquet case, in the same run: Spark's Parquet writer alone,
writing the same rows from Spark's in-memory cache (no source at all).
One round per case (a Spark job over 10 M rows takes seconds to minutes); the
SparkSession and the data are made once per session, outside the timed part.

    pytest benches/test_spark.py --benchmark-only -s
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

import logstore  # noqa: E402

RECORDS = int(os.environ.get("LOGSTORE_SPARK_BENCH_RECORDS", 10_000_000))
PARTITIONS = 2
BATCH = 1000
VALUE = 100
REPO_ROOT = str(Path(__file__).resolve().parents[1])


class TupleReader(DataSourceReader):
    """The baseline: pure Python, one tuple per record, over the same files."""

    def __init__(self, root: str) -> None:
        self.root = root

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(name) for name in sorted(os.listdir(self.root))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        topic, p = partition.value.rsplit("-", 1)
        d = os.path.join(self.root, partition.value)
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        for seg in sorted(f for f in os.listdir(d) if f.endswith(".log")):
            with open(os.path.join(d, seg), "rb") as f:
                rest = b""
                while chunk := f.read(4 << 20):
                    data = rest + chunk
                    batches = logstore.decode_batches(data)
                    used = batches[-1].position + batches[-1].size if batches else 0
                    rest = data[used:]
                    for b in batches:
                        if b.is_control:
                            continue
                        tt = 1 if b.timestamp_type == "LogAppendTime" else 0
                        for r in b.records:
                            ts = epoch + dt.timedelta(milliseconds=r.timestamp)
                            yield (r.key, r.value, topic, int(p), r.offset, ts, tt)


class TupleSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "logstore_tuples"

    def schema(self) -> str:
        return (
            "key binary, value binary, topic string, partition int, offset long, "
            "timestamp timestamp, timestampType int"
        )

    def reader(self, schema: Any) -> DataSourceReader:
        return TupleReader(self.options["path"])


@pytest.fixture(scope="session")
def spark_data(bench_dir: Path):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Workers unpickle TupleSource by reference to this module: benches/ goes on their path.
    bench_path = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [REPO_ROOT, bench_path, os.environ.get("PYTHONPATH")])
    )
    from pyspark.sql import SparkSession

    import logstore.spark

    root = bench_dir / "spark-logs"
    per = RECORDS // PARTITIONS
    recs = [
        (f"key-{i:06d}".encode(), bytes([65 + i % 26]) * VALUE, [], 1_732_190_000_000 + i)
        for i in range(BATCH)
    ]
    batch = logstore.encode_batch(recs, "none")
    for p in range(PARTITIONS):
        log = logstore.Log.open(str(root / f"bench-{p}"), segment_bytes=256 << 20)
        for _ in range(per // BATCH):
            log.append(batch)
        log.close()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    logstore.spark.register(spark)
    spark.dataSource.register(TupleSource)
    # Warm up, outside the timed part: the Python workers of both sources, and the
    # JVM's JIT on the Arrow-to-rows and Parquet paths (both sources hand Spark Arrow
    # batches) with a count and a write of a tenth of the data.
    for fmt in ("logstore", "logstore_tuples"):
        spark.read.format(fmt).load(str(root)).limit(10).collect()
    tenth = json.dumps({"bench": {str(p): per // 10 for p in range(PARTITIONS)}})
    warm = spark.read.format("logstore").option("endingOffsets", tenth).load(str(root))
    warm.count()
    warm.write.mode("overwrite").parquet(str(bench_dir / "warmup"))
    shutil.rmtree(bench_dir / "warmup", ignore_errors=True)
    yield spark, str(root)
    spark.stop()


def _section(report) -> None:  # type: ignore[no-untyped-def]
    report.section(
        "spark",
        f"Spark: {RECORDS:,} records of {VALUE} B, local[2] (one round)",
        [
            ("seconds", "s"),
            ("rows_s", "rows/s"),
            ("speedup", "vs tuples"),
            ("vs_writer", "vs writer alone"),
        ],
    )


def _run(benchmark, report, spark, root, fmt: str, action: str, bench_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _section(report)
    out = bench_dir / f"parquet-{fmt}"

    def job() -> None:
        df = spark.read.format(fmt).load(root)
        if action == "count":
            assert df.count() == RECORDS
        else:
            shutil.rmtree(out, ignore_errors=True)
            df.write.parquet(str(out))

    start = time.perf_counter()
    benchmark.pedantic(job, rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    if action == "parquet":
        assert spark.read.parquet(str(out)).count() == RECORDS
        shutil.rmtree(out, ignore_errors=True)
    impl = "arrow" if fmt == "logstore" else "tuples"
    values = {"seconds": seconds, "rows_s": RECORDS / seconds}
    base = report.get("spark", action, "tuples")
    arrow = report.get("spark", action, "arrow")
    if impl == "tuples" and arrow is not None:
        arrow.values["speedup"] = seconds / arrow.values["seconds"]
    benchmark.extra_info.update(values)
    report.add("spark", action, impl, **values)
    if base is not None and impl == "arrow":
        report.get("spark", action, "arrow").values["speedup"] = base.values["seconds"] / seconds  # type: ignore[union-attr]
    print(f"\n{action} via {impl}: {seconds:.1f} s, {RECORDS / seconds:,.0f} rows/s")


@pytest.mark.parametrize("action", ["count", "parquet"])
@pytest.mark.parametrize("fmt", ["logstore", "logstore_tuples"])
def test_spark_read(benchmark, report, spark_data, fmt, action, bench_dir):
    spark, root = spark_data
    _run(benchmark, report, spark, root, fmt, action, bench_dir)


def test_parquet_writer_ceiling(benchmark, report, spark_data, bench_dir):
    """Spark's Parquet writer alone: the same rows, cached in memory beforehand (outside
    the timed part), written the same way. The Arrow path's Parquet case can at best
    match it."""
    spark, root = spark_data
    from pyspark import StorageLevel

    _section(report)
    cached = spark.read.format("logstore").load(root).persist(StorageLevel.MEMORY_AND_DISK)
    assert cached.count() == RECORDS
    out = bench_dir / "parquet-cached"

    def job() -> None:
        shutil.rmtree(out, ignore_errors=True)
        cached.write.parquet(str(out))

    start = time.perf_counter()
    benchmark.pedantic(job, rounds=1, iterations=1)
    seconds = time.perf_counter() - start
    assert spark.read.parquet(str(out)).count() == RECORDS
    shutil.rmtree(out, ignore_errors=True)
    cached.unpersist()
    values = {"seconds": seconds, "rows_s": RECORDS / seconds}
    benchmark.extra_info.update(values)
    report.add("spark", "parquet", "writer alone (cached rows)", **values)
    arrow = report.get("spark", "parquet", "arrow")
    if arrow is not None:
        ratio = seconds / arrow.values["seconds"]
        arrow.values["vs_writer"] = ratio
        benchmark.extra_info["arrow_vs_writer_alone"] = ratio
    print(f"\nparquet writer alone: {seconds:.1f} s, {RECORDS / seconds:,.0f} rows/s")
