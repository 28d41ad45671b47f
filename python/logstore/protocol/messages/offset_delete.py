"""OffsetDelete (47): removes a group's committed offsets (KIP-496), v0 only.

A group with members may only lose offsets of topics none of its members subscribe
to: the others get GROUP_SUBSCRIBED_TO_TOPIC.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, STRING

__all__ = ["OffsetDeleteRequest", "OffsetDeleteResponse"]

OffsetDeleteRequest = message(
    ApiKey.OFFSET_DELETE,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetDeleteRequestTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetDeleteRequestPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
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

OffsetDeleteResponse = message(
    ApiKey.OFFSET_DELETE,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetDeleteResponseTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetDeleteResponsePartition",
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
