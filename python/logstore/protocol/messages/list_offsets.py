"""ListOffsets (2): offsets by timestamp.

``timestamp`` -1 asks for the latest offset (log end, or last stable
offset under read_committed), -2 for the earliest (log start offset), -3
(v7+) for the offset of the largest timestamp; any other value for the
first offset whose timestamp is at least that.  ``isolation_level`` (v2+)
is 0 read_uncommitted, 1 read_committed.

v0 asks for up to ``max_num_offsets`` offsets and answers them, in
descending order, in ``old_style_offsets`` (no ``timestamp``/``offset``).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, INT64, STRING

__all__ = ["ListOffsetsRequest", "ListOffsetsResponse"]

ListOffsetsRequest = message(
    ApiKey.LIST_OFFSETS,
    "request",
    [
        Field("replica_id", INT32, "0+"),
        Field("isolation_level", INT8, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    "ListOffsetsTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "ListOffsetsPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("current_leader_epoch", INT32, "4+", default=-1),
                                        Field("timestamp", INT64, "0+"),
                                        Field("max_num_offsets", INT32, "0", default=1),
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

ListOffsetsResponse = message(
    ApiKey.LIST_OFFSETS,
    "response",
    [
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    "ListOffsetsTopicResponse",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "ListOffsetsPartitionResponse",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field("old_style_offsets", Array(INT64), "0"),
                                        Field("timestamp", INT64, "1+", default=-1),
                                        Field("offset", INT64, "1+", default=-1),
                                        Field("leader_epoch", INT32, "4+", default=-1),
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
