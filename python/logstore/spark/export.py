"""``logstore export``: a local Spark job that writes topics to Parquet.

Output layout: ``OUT/topic=<t>/partition=<p>/part-*.parquet`` (Hive-style partition
directories), the other columns being the Kafka source schema's (with headers).
``--from``/``--to`` take an offset (every partition) or an ISO-8601 time; they become
DataFrame filters that the source's pushdown turns into skipped segments.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from logstore.spark.errors import InvalidOptionError


@dataclass(frozen=True)
class Bound:
    """An offset (int) or a time (aware datetime)."""

    offset: int | None = None
    time: dt.datetime | None = None


def parse_bound(text: str, name: str) -> Bound:
    try:
        return Bound(offset=int(text))
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(
            f"{name} {text!r}: expected an offset or an ISO-8601 time"
        ) from None
    return Bound(time=t if t.tzinfo else t.replace(tzinfo=dt.UTC))


def _progress_printer(spark, stop: threading.Event, write: Callable[[str], None]) -> None:  # type: ignore[no-untyped-def]
    """Every half second: one line with the tasks done of the running stages."""
    tracker = spark.sparkContext.statusTracker()
    last = ""
    while not stop.wait(0.5):
        parts = []
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
        line = ", ".join(parts)
        if line and line != last:
            write(f"export: {line}\n")
            last = line


def run_export(
    out: str,
    *,
    log_dirs: str | None = None,
    bootstrap_servers: str | None = None,
    topics: str | None = None,
    start: Bound | None = None,
    end: Bound | None = None,
    overwrite: bool = False,
    master: str = "local[2]",
    write: Callable[[str], None] = sys.stderr.write,
) -> int:
    """Runs the export; returns the number of rows written."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import logstore.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("logstore-export")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    stop = threading.Event()
    printer = threading.Thread(target=_progress_printer, args=(spark, stop, write), daemon=True)
    try:
        logstore.spark.register(spark)
        reader = spark.read.format("logstore").option("includeHeaders", "true")
        if topics:
            reader = reader.option("topics", topics)
        if bootstrap_servers:
            reader = reader.option("kafka.bootstrap.servers", bootstrap_servers)
        df = reader.load(log_dirs) if log_dirs else reader.load()
        if start is not None:
            df = (
                df.filter(F.col("offset") >= start.offset)
                if start.offset is not None
                else df.filter(F.col("timestamp") >= start.time)
            )
        if end is not None:
            df = (
                df.filter(F.col("offset") < end.offset)
                if end.offset is not None
                else df.filter(F.col("timestamp") < end.time)
            )
        printer.start()
        write(f"export: writing Parquet to {out}\n")
        df.write.mode("overwrite" if overwrite else "errorifexists").partitionBy(
            "topic", "partition"
        ).parquet(out)
        stop.set()
        rows = spark.read.parquet(out).count()
        write(f"export: {rows} rows written to {out}\n")
        return rows
    finally:
        stop.set()
        spark.stop()
