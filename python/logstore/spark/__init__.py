"""PySpark data source ``logstore``: reads logstore topics into Spark.

```python
import logstore.spark
logstore.spark.register(spark)
df = spark.read.format("logstore").option("topics", "a,b").load("/var/lib/logstore")
```

Modules: ``source`` (the DataSource), ``options`` (Kafka source option names),
``planner`` (offset ranges fixed at planning), ``batch_reader`` / ``stream_reader``,
``pushdown`` (filters on partition, offset, timestamp), ``file_reader`` (segment files,
read-only) and ``network_reader`` (Kafka protocol through ``kafka_client``), both
decoding with the Rust Arrow decoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logstore.spark.errors import (
    DataLossError,
    InvalidOptionError,
    OffsetForTimestampNotFound,
    SparkSourceError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

__all__ = [
    "DataLossError",
    "InvalidOptionError",
    "OffsetForTimestampNotFound",
    "SparkSourceError",
    "register",
]


def register(spark: SparkSession) -> None:
    """Registers the ``logstore`` format with ``spark``.

    Filter pushdown is on when the session has
    ``spark.sql.python.filterPushdown.enabled=true`` at registration (Spark rejects a
    pushdown reader when the setting is off, so register again after changing it).
    """
    from logstore.spark.source import LogstoreDataSource, LogstorePushdownDataSource

    pushdown = (spark.conf.get(PUSHDOWN_CONF, "false") or "false").lower() == "true"
    spark.dataSource.register(LogstorePushdownDataSource if pushdown else LogstoreDataSource)
