"""OffsetForLeaderEpoch (23): the end offset of a leader epoch.

Consumers use it to detect log truncation after a leader change (KIP-320),
followers to truncate their logs.  The answer for epoch E is the start
offset of the first epoch after E (or the log end offset if E is the
latest), with the largest epoch <= E that the leader knows.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, INT64, STRING

__all__ = ["OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse"]

OffsetForLeaderEpochRequest = message(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "request",
    [
        Field("replica_id", INT32, "3+", default=-2),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetForLeaderTopic",
                    [
                        Field("topic", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetForLeaderPartition",
                                    [
                                        Field("partition", INT32, "0+"),
                                        Field("current_leader_epoch", INT32, "2+", default=-1),
                                        Field("leader_epoch", INT32, "0+"),
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

OffsetForLeaderEpochResponse = message(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "response",
    [
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetForLeaderTopicResult",
                    [
                        Field("topic", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "EpochEndOffset",
                                    [
                                        Field("error_code", INT16, "0+"),
                                        Field("partition", INT32, "0+"),
                                        Field("leader_epoch", INT32, "1+", default=-1),
                                        Field("end_offset", INT64, "0+", default=-1),
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
