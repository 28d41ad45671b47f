"""ShareFetch (78) and ShareAcknowledge (79): reading from and acknowledging to share
partitions (KIP-932), at Kafka 4.1's versions (1 each, flexible).

ShareFetch: a member's share session (``share_session_epoch`` 0 opens it, -1 closes
it, otherwise one more than the previous request's) names partitions to fetch, may
carry acknowledgements for records it holds, and drops partitions through
``forgotten_topics_data``. ``max_records`` bounds the records acquired (whole batches
may exceed it); ``batch_size`` is the preferred size of acquired ranges.
``acknowledge_types`` holds one type for the whole range or one per offset:
0 gap, 1 accept, 2 release, 3 reject.

The response gives per partition the fetched ``records`` (whole batches, possibly
more than were acquired) and the ``acquired_records`` ranges the member now holds,
each with its delivery count, both for ``acquisition_lock_timeout_ms``.
``error_code`` answers the fetch, ``acknowledge_error_code`` the acknowledgements.
``node_endpoints`` lists the current leaders of partitions answered
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID

__all__ = [
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareFetchRequest",
    "ShareFetchResponse",
]


def _acknowledgement_batches() -> Field:
    return Field(
        "acknowledgement_batches",
        Array(
            Struct(
                "AcknowledgementBatch",
                [
                    Field("first_offset", INT64, "1+"),
                    Field("last_offset", INT64, "1+"),
                    Field("acknowledge_types", Array(INT8), "1+"),
                ],
            )
        ),
        "1+",
    )


def _current_leader() -> Field:
    return Field(
        "current_leader",
        Struct(
            "LeaderIdAndEpoch",
            [
                Field("leader_id", INT32, "1+"),
                Field("leader_epoch", INT32, "1+"),
            ],
        ),
        "1+",
    )


def _node_endpoints() -> Field:
    return Field(
        "node_endpoints",
        Array(
            Struct(
                "NodeEndpoint",
                [
                    Field("node_id", INT32, "1+"),
                    Field("host", STRING, "1+"),
                    Field("port", INT32, "1+"),
                    Field("rack", STRING, "1+", nullable="1+", default=None),
                ],
            )
        ),
        "1+",
    )


ShareFetchRequest = message(
    ApiKey.SHARE_FETCH,
    "request",
    [
        Field("group_id", STRING, "1+", nullable="1+", default=None),
        Field("member_id", STRING, "1+", nullable="1+", default=None),
        Field("share_session_epoch", INT32, "1+"),
        Field("max_wait_ms", INT32, "1+"),
        Field("min_bytes", INT32, "1+"),
        Field("max_bytes", INT32, "1+", default=0x7FFFFFFF),
        Field("max_records", INT32, "1+"),
        Field("batch_size", INT32, "1+"),
        Field(
            "topics",
            Array(
                Struct(
                    "FetchTopic",
                    [
                        Field("topic_id", UUID, "1+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "FetchPartition",
                                    [
                                        Field("partition_index", INT32, "1+"),
                                        _acknowledgement_batches(),
                                    ],
                                )
                            ),
                            "1+",
                        ),
                    ],
                )
            ),
            "1+",
        ),
        Field(
            "forgotten_topics_data",
            Array(
                Struct(
                    "ForgottenTopic",
                    [
                        Field("topic_id", UUID, "1+"),
                        Field("partitions", Array(INT32), "1+"),
                    ],
                )
            ),
            "1+",
        ),
    ],
)

ShareFetchResponse = message(
    ApiKey.SHARE_FETCH,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "1+"),
        Field("error_message", STRING, "1+", nullable="1+", default=None),
        Field("acquisition_lock_timeout_ms", INT32, "1+"),
        Field(
            "responses",
            Array(
                Struct(
                    "ShareFetchableTopicResponse",
                    [
                        Field("topic_id", UUID, "1+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionData",
                                    [
                                        Field("partition_index", INT32, "1+"),
                                        Field("error_code", INT16, "1+"),
                                        Field(
                                            "error_message",
                                            STRING,
                                            "1+",
                                            nullable="1+",
                                            default=None,
                                        ),
                                        Field("acknowledge_error_code", INT16, "1+"),
                                        Field(
                                            "acknowledge_error_message",
                                            STRING,
                                            "1+",
                                            nullable="1+",
                                            default=None,
                                        ),
                                        _current_leader(),
                                        Field("records", RECORDS, "1+", nullable="1+"),
                                        Field(
                                            "acquired_records",
                                            Array(
                                                Struct(
                                                    "AcquiredRecords",
                                                    [
                                                        Field("first_offset", INT64, "1+"),
                                                        Field("last_offset", INT64, "1+"),
                                                        Field("delivery_count", INT16, "1+"),
                                                    ],
                                                )
                                            ),
                                            "1+",
                                        ),
                                    ],
                                )
                            ),
                            "1+",
                        ),
                    ],
                )
            ),
            "1+",
        ),
        _node_endpoints(),
    ],
)

ShareAcknowledgeRequest = message(
    ApiKey.SHARE_ACKNOWLEDGE,
    "request",
    [
        Field("group_id", STRING, "1+", nullable="1+", default=None),
        Field("member_id", STRING, "1+", nullable="1+", default=None),
        Field("share_session_epoch", INT32, "1+"),
        Field(
            "topics",
            Array(
                Struct(
                    "AcknowledgeTopic",
                    [
                        Field("topic_id", UUID, "1+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "AcknowledgePartition",
                                    [
                                        Field("partition_index", INT32, "1+"),
                                        _acknowledgement_batches(),
                                    ],
                                )
                            ),
                            "1+",
                        ),
                    ],
                )
            ),
            "1+",
        ),
    ],
)

ShareAcknowledgeResponse = message(
    ApiKey.SHARE_ACKNOWLEDGE,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "1+"),
        Field("error_message", STRING, "1+", nullable="1+", default=None),
        Field(
            "responses",
            Array(
                Struct(
                    "ShareAcknowledgeTopicResponse",
                    [
                        Field("topic_id", UUID, "1+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionData",
                                    [
                                        Field("partition_index", INT32, "1+"),
                                        Field("error_code", INT16, "1+"),
                                        Field(
                                            "error_message",
                                            STRING,
                                            "1+",
                                            nullable="1+",
                                            default=None,
                                        ),
                                        _current_leader(),
                                    ],
                                )
                            ),
                            "1+",
                        ),
                    ],
                )
            ),
            "1+",
        ),
        _node_endpoints(),
    ],
)
