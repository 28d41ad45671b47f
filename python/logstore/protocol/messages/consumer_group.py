"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): consumer groups on the
consumer protocol (KIP-848), at Kafka 4.1's versions (each 0-1, flexible).

ConsumerGroupHeartbeat: a member joins with ``member_epoch`` 0 (from v1 with the member
id it generated itself), heartbeats with its current epoch and leaves with -1 (-2: a
static member that will come back). The nullable fields are null when unchanged since
the previous heartbeat. ``subscribed_topic_regex`` exists from v1. ``topic_partitions``
are the partitions the member owns; the response's ``assignment`` (null when unchanged)
is the member's whole assignment.

ConsumerGroupDescribe: per group its state, group and assignment epochs, assignor and
members with their current and target assignments; v1 adds each member's
``member_type`` (-1 unknown, 0 classic, 1 consumer).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT8, INT16, INT32, STRING, UUID

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]


def _topic_partitions() -> Struct:
    return Struct(
        "TopicPartitions",
        [
            Field("topic_id", UUID, "0+"),
            Field("partitions", Array(INT32), "0+"),
        ],
    )


ConsumerGroupHeartbeatRequest = message(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("member_id", STRING, "0+"),
        Field("member_epoch", INT32, "0+"),
        Field("instance_id", STRING, "0+", nullable="0+", default=None),
        Field("rack_id", STRING, "0+", nullable="0+", default=None),
        Field("rebalance_timeout_ms", INT32, "0+", default=-1),
        Field("subscribed_topic_names", Array(STRING), "0+", nullable="0+", default=None),
        Field("subscribed_topic_regex", STRING, "1+", nullable="1+", default=None),
        Field("server_assignor", STRING, "0+", nullable="0+", default=None),
        Field("topic_partitions", Array(_topic_partitions()), "0+", nullable="0+", default=None),
    ],
)

ConsumerGroupHeartbeatResponse = message(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
        Field("member_id", STRING, "0+", nullable="0+", default=None),
        Field("member_epoch", INT32, "0+"),
        Field("heartbeat_interval_ms", INT32, "0+"),
        Field(
            "assignment",
            Struct("Assignment", [Field("topic_partitions", Array(_topic_partitions()), "0+")]),
            "0+",
            nullable="0+",
            default=None,
        ),
    ],
)

ConsumerGroupDescribeRequest = message(
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    "request",
    [
        Field("group_ids", Array(STRING), "0+"),
        Field("include_authorized_operations", BOOL, "0+"),
    ],
)


_DESCRIBED_ASSIGNMENT = Struct(
    "Assignment",
    [
        Field(
            "topic_partitions",
            Array(
                Struct(
                    "TopicPartitions",
                    [
                        Field("topic_id", UUID, "0+"),
                        Field("topic_name", STRING, "0+"),
                        Field("partitions", Array(INT32), "0+"),
                    ],
                )
            ),
            "0+",
        )
    ],
)


ConsumerGroupDescribeResponse = message(
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribedGroup",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                        Field("group_id", STRING, "0+"),
                        Field("group_state", STRING, "0+"),
                        Field("group_epoch", INT32, "0+"),
                        Field("assignment_epoch", INT32, "0+"),
                        Field("assignor_name", STRING, "0+"),
                        Field(
                            "members",
                            Array(
                                Struct(
                                    "Member",
                                    [
                                        Field("member_id", STRING, "0+"),
                                        Field(
                                            "instance_id", STRING, "0+", nullable="0+", default=None
                                        ),
                                        Field("rack_id", STRING, "0+", nullable="0+", default=None),
                                        Field("member_epoch", INT32, "0+"),
                                        Field("client_id", STRING, "0+"),
                                        Field("client_host", STRING, "0+"),
                                        Field("subscribed_topic_names", Array(STRING), "0+"),
                                        Field(
                                            "subscribed_topic_regex",
                                            STRING,
                                            "0+",
                                            nullable="0+",
                                            default=None,
                                        ),
                                        Field("assignment", _DESCRIBED_ASSIGNMENT, "0+"),
                                        Field("target_assignment", _DESCRIBED_ASSIGNMENT, "0+"),
                                        Field("member_type", INT8, "1+", default=-1),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field("authorized_operations", INT32, "0+", default=-2147483648),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
