"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92): a share group's start offsets (KIP-932), at Kafka 4.1's
versions (0 each, flexible).

Describe: per group the topics (by name; null ``topics`` for every partition the
group has state for) and partitions; answers per partition the share-partition
``start_offset`` and ``leader_epoch``, with errors per partition and per group.
Alter: sets the start offsets of an empty group's partitions. Delete: drops an empty
group's state for whole topics. Alter answers a top-level error and one per partition;
Delete a top-level error and one per topic (Kafka 4.1's, KAFKA-16718: a topic's
partitions are deleted together).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, INT64, STRING, UUID

__all__ = [
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
]


def _error_fields() -> list[Field]:
    return [
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
    ]


def _topic_results(struct_name: str, partition_struct: str) -> Field:
    """Per topic (name and id) and partition: an error code and message."""
    return Field(
        "responses",
        Array(
            Struct(
                struct_name,
                [
                    Field("topic_name", STRING, "0+"),
                    Field("topic_id", UUID, "0+"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                partition_struct,
                                [Field("partition_index", INT32, "0+"), *_error_fields()],
                            )
                        ),
                        "0+",
                    ),
                ],
            )
        ),
        "0+",
    )


DescribeShareGroupOffsetsRequest = message(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    "request",
    [
        Field(
            "groups",
            Array(
                Struct(
                    "DescribeShareGroupOffsetsRequestGroup",
                    [
                        Field("group_id", STRING, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "DescribeShareGroupOffsetsRequestTopic",
                                    [
                                        Field("topic_name", STRING, "0+"),
                                        Field("partitions", Array(INT32), "0+"),
                                    ],
                                )
                            ),
                            "0+",
                            nullable="0+",
                            default=None,
                        ),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

DescribeShareGroupOffsetsResponse = message(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribeShareGroupOffsetsResponseGroup",
                    [
                        Field("group_id", STRING, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "DescribeShareGroupOffsetsResponseTopic",
                                    [
                                        Field("topic_name", STRING, "0+"),
                                        Field("topic_id", UUID, "0+"),
                                        Field(
                                            "partitions",
                                            Array(
                                                Struct(
                                                    "DescribeShareGroupOffsetsResponsePartition",
                                                    [
                                                        Field("partition_index", INT32, "0+"),
                                                        Field("start_offset", INT64, "0+"),
                                                        Field("leader_epoch", INT32, "0+"),
                                                        *_error_fields(),
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
                        *_error_fields(),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

AlterShareGroupOffsetsRequest = message(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "AlterShareGroupOffsetsRequestTopic",
                    [
                        Field("topic_name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "AlterShareGroupOffsetsRequestPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("start_offset", INT64, "0+"),
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

AlterShareGroupOffsetsResponse = message(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        *_error_fields(),
        _topic_results(
            "AlterShareGroupOffsetsResponseTopic", "AlterShareGroupOffsetsResponsePartition"
        ),
    ],
)

DeleteShareGroupOffsetsRequest = message(
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field(
            "topics",
            Array(
                Struct("DeleteShareGroupOffsetsRequestTopic", [Field("topic_name", STRING, "0+")])
            ),
            "0+",
        ),
    ],
)

DeleteShareGroupOffsetsResponse = message(
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        *_error_fields(),
        Field(
            "responses",
            Array(
                Struct(
                    "DeleteShareGroupOffsetsResponseTopic",
                    [
                        Field("topic_name", STRING, "0+"),
                        Field("topic_id", UUID, "0+"),
                        *_error_fields(),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
