"""ElectLeaders (43): elect the preferred (type 0) or, with no in-sync replica left,
any live (type 1, unclean) replica as leader. Version 1 adds the election type and a
top-level error code.

``topic_partitions`` null means every partition; the answer then lists only the
partitions where an election was needed.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, STRING

__all__ = ["ElectLeadersRequest", "ElectLeadersResponse"]

ElectLeadersRequest = message(
    ApiKey.ELECT_LEADERS,
    "request",
    [
        Field("election_type", INT8, "1+"),
        Field(
            "topic_partitions",
            Array(
                Struct(
                    "TopicPartitions",
                    [
                        Field("topic", STRING, "0+"),
                        Field("partitions", Array(INT32), "0+"),
                    ],
                )
            ),
            "0+",
            nullable="0+",
        ),
        Field("timeout_ms", INT32, "0+", default=60000),
    ],
)

ElectLeadersResponse = message(
    ApiKey.ELECT_LEADERS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "1+"),
        Field(
            "replica_election_results",
            Array(
                Struct(
                    "ReplicaElectionResult",
                    [
                        Field("topic", STRING, "0+"),
                        Field(
                            "partition_result",
                            Array(
                                Struct(
                                    "PartitionResult",
                                    [
                                        Field("partition_id", INT32, "0+"),
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
