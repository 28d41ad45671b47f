"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), v0 (flexible):
move partitions' replicas to other brokers (KIP-455), and list the moves under way.

``replicas`` null cancels a pending reassignment; ``topics`` null lists all of them.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, STRING

__all__ = [
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
]

AlterPartitionReassignmentsRequest = message(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    "request",
    [
        Field("timeout_ms", INT32, "0+", default=60000),
        Field(
            "topics",
            Array(
                Struct(
                    "ReassignableTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "ReassignablePartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field(
                                            "replicas",
                                            Array(INT32),
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
            ),
            "0+",
        ),
    ],
)

AlterPartitionReassignmentsResponse = message(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+"),
        Field(
            "responses",
            Array(
                Struct(
                    "ReassignableTopicResponse",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "ReassignablePartitionResponse",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field("error_message", STRING, "0+", nullable="0+"),
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

ListPartitionReassignmentsRequest = message(
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    "request",
    [
        Field("timeout_ms", INT32, "0+", default=60000),
        Field(
            "topics",
            Array(
                Struct(
                    "ListPartitionReassignmentsTopics",
                    [
                        Field("name", STRING, "0+"),
                        Field("partition_indexes", Array(INT32), "0+"),
                    ],
                )
            ),
            "0+",
            nullable="0+",
            default=None,
        ),
    ],
)

ListPartitionReassignmentsResponse = message(
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OngoingTopicReassignment",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OngoingPartitionReassignment",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("replicas", Array(INT32), "0+"),
                                        Field("adding_replicas", Array(INT32), "0+"),
                                        Field("removing_replicas", Array(INT32), "0+"),
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
