"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, a page at a time.

Only v0, flexible. An empty ``topics`` list means every topic. ``response_partition_limit``
caps the partitions in one response; ``cursor`` (nullable struct) names the topic and
partition to start from, and the response's ``next_cursor`` the first one left out (null
when nothing was). ``eligible_leader_replicas`` and ``last_known_elr`` are KIP-966's
eligible leader replicas, null where the broker keeps none.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, STRING, UUID

__all__ = ["DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse"]


def _cursor(name: str) -> Struct:
    return Struct(
        name,
        [
            Field("topic_name", STRING, "0+"),
            Field("partition_index", INT32, "0+"),
        ],
    )


DescribeTopicPartitionsRequest = message(
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    "request",
    [
        Field("topics", Array(Struct("TopicRequest", [Field("name", STRING, "0+")])), "0+"),
        Field("response_partition_limit", INT32, "0+", default=2000),
        Field("cursor", _cursor("Cursor"), "0+", nullable="0+", default=None),
    ],
)

DescribeTopicPartitionsResponse = message(
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "DescribeTopicPartitionsResponseTopic",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("name", STRING, "0+", nullable="0+"),
                        Field("topic_id", UUID, "0+"),
                        Field("is_internal", BOOL, "0+", default=False),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "DescribeTopicPartitionsResponsePartition",
                                    [
                                        Field("error_code", INT16, "0+"),
                                        Field("partition_index", INT32, "0+"),
                                        Field("leader_id", INT32, "0+"),
                                        Field("leader_epoch", INT32, "0+", default=-1),
                                        Field("replica_nodes", Array(INT32), "0+"),
                                        Field("isr_nodes", Array(INT32), "0+"),
                                        Field(
                                            "eligible_leader_replicas",
                                            Array(INT32),
                                            "0+",
                                            nullable="0+",
                                            default=None,
                                        ),
                                        Field(
                                            "last_known_elr",
                                            Array(INT32),
                                            "0+",
                                            nullable="0+",
                                            default=None,
                                        ),
                                        Field("offline_replicas", Array(INT32), "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field("topic_authorized_operations", INT32, "0+", default=-2147483648),
                    ],
                )
            ),
            "0+",
        ),
        Field("next_cursor", _cursor("Cursor"), "0+", nullable="0+", default=None),
    ],
)
