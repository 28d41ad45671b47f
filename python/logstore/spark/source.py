"""The ``logstore`` PySpark data source (``pyspark.sql.datasource``).

Schema: Spark's Kafka source's, with ``headers`` when includeHeaders=true. Rows come
as ``pyarrow.RecordBatch``es decoded in Rust (``timestamp[us, tz=UTC]``).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from logstore.spark.batch_reader import BatchReader, PushdownBatchReader
from logstore.spark.file_reader import FileLog
from logstore.spark.network_reader import NetworkLog
from logstore.spark.options import SourceOptions, parse_options
from logstore.spark.planner import Log
from logstore.spark.stream_reader import StreamReader

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"


def make_log(opts: SourceOptions, metrics_dir: str | None = None) -> Log:
    """The partition reader behind a query: files under log.dirs, or the network."""
    if opts.bootstrap_servers:
        return NetworkLog(opts.bootstrap_servers, opts.network)
    return FileLog(opts.log_dirs, metrics_dir)


class LogstoreDataSource(DataSource):
    """``spark.read.format("logstore").load(log_dirs)``; see ``logstore.spark.options``."""

    pushdown = False

    @classmethod
    def name(cls) -> str:
        return "logstore"

    def schema(self) -> str:
        headers = self.options.get("includeHeaders", "false").strip().lower() == "true"
        return KAFKA_SCHEMA + (", " + HEADERS_COLUMN if headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_options(self.options, streaming=False)
        log = make_log(opts, self.options.get("metricsDir"))
        return PushdownBatchReader(log, opts) if self.pushdown else BatchReader(log, opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_options(self.options, streaming=True)
        return StreamReader(make_log(opts, self.options.get("metricsDir")), opts)


class LogstorePushdownDataSource(LogstoreDataSource):
    """The same source with filter pushdown, for sessions with
    ``spark.sql.python.filterPushdown.enabled=true``."""

    pushdown = True
