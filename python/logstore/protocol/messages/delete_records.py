"""DeleteRecords (21): advance partitions' log start offsets.

``offset`` -1 means the high watermark.  The response gives each
partition's new ``low_watermark`` (log start offset).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, INT64, STRING

__all__ = ["DeleteRecordsRequest", "DeleteRecordsResponse"]

DeleteRecordsRequest = message(
    ApiKey.DELETE_RECORDS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteRecordsTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "DeleteRecordsPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("offset", INT64, "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                    ],
                )
            ),
            "0+",
        ),
        Field("timeout_ms", INT32, "0+"),
    ],
)

DeleteRecordsResponse = message(
    ApiKey.DELETE_RECORDS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteRecordsTopicResult",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "DeleteRecordsPartitionResult",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("low_watermark", INT64, "0+"),
                                        Field("error_code", INT16, "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
