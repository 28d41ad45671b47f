"""OffsetCommit (8) and OffsetFetch (9): a consumer group's committed offsets.

OffsetCommit: ``generation_id_or_member_epoch`` and ``member_id`` must
match the group's current generation (-1 / "" for a simple consumer that
uses no group management).  ``committed_metadata`` is stored as given and
returned by OffsetFetch.  ``retention_time_ms`` exists in v2-4 only, a
per-partition ``commit_timestamp`` in v1 only; v0 has no generation or
member id (a commit outside group management).

OffsetFetch: up to v7 one group per request with ``topics`` (null in v2+
means all topics the group has offsets for); from v8 a ``groups`` array,
each with its own nullable ``topics``.  An unknown partition answers
offset -1.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, INT64, STRING

__all__ = [
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
]

OffsetCommitRequest = message(
    ApiKey.OFFSET_COMMIT,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("generation_id_or_member_epoch", INT32, "1+", default=-1),
        Field("member_id", STRING, "1+"),
        Field("group_instance_id", STRING, "7+", nullable="7+", default=None),
        Field("retention_time_ms", INT64, "2-4", default=-1),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetCommitRequestTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetCommitRequestPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("committed_offset", INT64, "0+"),
                                        Field("committed_leader_epoch", INT32, "6+", default=-1),
                                        Field("commit_timestamp", INT64, "1", default=-1),
                                        Field("committed_metadata", STRING, "0+", nullable="0+"),
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

OffsetCommitResponse = message(
    ApiKey.OFFSET_COMMIT,
    "response",
    [
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetCommitResponseTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetCommitResponsePartition",
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

OffsetFetchRequest = message(
    ApiKey.OFFSET_FETCH,
    "request",
    [
        Field("group_id", STRING, "0-7"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetFetchRequestTopic",
                    [
                        Field("name", STRING, "0-7"),
                        Field("partition_indexes", Array(INT32), "0-7"),
                    ],
                )
            ),
            "0-7",
            nullable="2-7",
        ),
        Field(
            "groups",
            Array(
                Struct(
                    "OffsetFetchRequestGroup",
                    [
                        Field("group_id", STRING, "8+"),
                        Field("member_id", STRING, "9+", nullable="9+", default=None),
                        Field("member_epoch", INT32, "9+", default=-1),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "OffsetFetchRequestTopics",
                                    [
                                        Field("name", STRING, "8+"),
                                        Field("partition_indexes", Array(INT32), "8+"),
                                    ],
                                )
                            ),
                            "8+",
                            nullable="8+",
                        ),
                    ],
                )
            ),
            "8+",
        ),
        Field("require_stable", BOOL, "7+"),
    ],
)

OffsetFetchResponse = message(
    ApiKey.OFFSET_FETCH,
    "response",
    [
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetFetchResponseTopic",
                    [
                        Field("name", STRING, "0-7"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "OffsetFetchResponsePartition",
                                    [
                                        Field("partition_index", INT32, "0-7"),
                                        Field("committed_offset", INT64, "0-7"),
                                        Field("committed_leader_epoch", INT32, "5-7", default=-1),
                                        Field("metadata", STRING, "0-7", nullable="0-7"),
                                        Field("error_code", INT16, "0-7"),
                                    ],
                                )
                            ),
                            "0-7",
                        ),
                    ],
                )
            ),
            "0-7",
        ),
        Field("error_code", INT16, "2-7"),
        Field(
            "groups",
            Array(
                Struct(
                    "OffsetFetchResponseGroup",
                    [
                        Field("group_id", STRING, "8+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "OffsetFetchResponseTopics",
                                    [
                                        Field("name", STRING, "8+"),
                                        Field(
                                            "partitions",
                                            Array(
                                                Struct(
                                                    "OffsetFetchResponsePartitions",
                                                    [
                                                        Field("partition_index", INT32, "8+"),
                                                        Field("committed_offset", INT64, "8+"),
                                                        Field(
                                                            "committed_leader_epoch",
                                                            INT32,
                                                            "8+",
                                                            default=-1,
                                                        ),
                                                        Field(
                                                            "metadata", STRING, "8+", nullable="8+"
                                                        ),
                                                        Field("error_code", INT16, "8+"),
                                                    ],
                                                )
                                            ),
                                            "8+",
                                        ),
                                    ],
                                )
                            ),
                            "8+",
                        ),
                        Field("error_code", INT16, "8+"),
                    ],
                )
            ),
            "8+",
        ),
    ],
)
