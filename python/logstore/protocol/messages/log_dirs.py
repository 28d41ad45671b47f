"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): where a broker keeps each
partition, and moving a partition to another of its log dirs.

DescribeLogDirs with ``topics`` null describes every partition. Version 3 adds a
top-level error code, version 4 each dir's total and usable bytes.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, INT64, STRING

__all__ = [
    "AlterReplicaLogDirsRequest",
    "AlterReplicaLogDirsResponse",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
]

DescribeLogDirsRequest = message(
    ApiKey.DESCRIBE_LOG_DIRS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "DescribableLogDirTopic",
                    [
                        Field("topic", STRING, "0+"),
                        Field("partitions", Array(INT32), "0+"),
                    ],
                )
            ),
            "0+",
            nullable="0+",
        ),
    ],
)

DescribeLogDirsResponse = message(
    ApiKey.DESCRIBE_LOG_DIRS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "3+"),
        Field(
            "results",
            Array(
                Struct(
                    "DescribeLogDirsResult",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("log_dir", STRING, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "DescribeLogDirsTopic",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field(
                                            "partitions",
                                            Array(
                                                Struct(
                                                    "DescribeLogDirsPartition",
                                                    [
                                                        Field("partition_index", INT32, "0+"),
                                                        Field("partition_size", INT64, "0+"),
                                                        Field("offset_lag", INT64, "0+"),
                                                        Field("is_future_key", BOOL, "0+"),
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
                        Field("total_bytes", INT64, "4+", default=-1),
                        Field("usable_bytes", INT64, "4+", default=-1),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

AlterReplicaLogDirsRequest = message(
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    "request",
    [
        Field(
            "dirs",
            Array(
                Struct(
                    "AlterReplicaLogDir",
                    [
                        Field("path", STRING, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "AlterReplicaLogDirTopic",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field("partitions", Array(INT32), "0+"),
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

AlterReplicaLogDirsResponse = message(
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "AlterReplicaLogDirTopicResult",
                    [
                        Field("topic_name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "AlterReplicaLogDirPartitionResult",
                                    [
                                        Field("partition_index", INT32, "0+"),
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
