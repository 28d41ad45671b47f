"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share groups (KIP-932), at
Kafka 4.1's versions (1 each, flexible; version 0 was 4.0's early access and is gone).

ShareGroupHeartbeat: a member joins with ``member_epoch`` 0 and the member id it
generated itself, heartbeats with its current epoch and leaves with -1.
``rack_id`` and ``subscribed_topic_names`` are null when unchanged since the previous
heartbeat. The response's ``assignment`` (null when unchanged) is the member's whole
assignment; in a share group every member may be assigned every partition.

ShareGroupDescribe: per group its state, group and assignment epochs, assignor
(``simple``) and members with their current assignments (no target assignment: a share
member takes a new assignment at once, nothing is revoked first).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, STRING, UUID

__all__ = [
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
]


ShareGroupHeartbeatRequest = message(
    ApiKey.SHARE_GROUP_HEARTBEAT,
    "request",
    [
        Field("group_id", STRING, "1+"),
        Field("member_id", STRING, "1+"),
        Field("member_epoch", INT32, "1+"),
        Field("rack_id", STRING, "1+", nullable="1+", default=None),
        Field("subscribed_topic_names", Array(STRING), "1+", nullable="1+", default=None),
    ],
)

ShareGroupHeartbeatResponse = message(
    ApiKey.SHARE_GROUP_HEARTBEAT,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "1+"),
        Field("error_message", STRING, "1+", nullable="1+", default=None),
        Field("member_id", STRING, "1+", nullable="1+", default=None),
        Field("member_epoch", INT32, "1+"),
        Field("heartbeat_interval_ms", INT32, "1+"),
        Field(
            "assignment",
            Struct(
                "Assignment",
                [
                    Field(
                        "topic_partitions",
                        Array(
                            Struct(
                                "TopicPartitions",
                                [
                                    Field("topic_id", UUID, "1+"),
                                    Field("partitions", Array(INT32), "1+"),
                                ],
                            )
                        ),
                        "1+",
                    )
                ],
            ),
            "1+",
            nullable="1+",
            default=None,
        ),
    ],
)

ShareGroupDescribeRequest = message(
    ApiKey.SHARE_GROUP_DESCRIBE,
    "request",
    [
        Field("group_ids", Array(STRING), "1+"),
        Field("include_authorized_operations", BOOL, "1+"),
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
                        Field("topic_id", UUID, "1+"),
                        Field("topic_name", STRING, "1+"),
                        Field("partitions", Array(INT32), "1+"),
                    ],
                )
            ),
            "1+",
        )
    ],
)

_DESCRIBED_MEMBER = Struct(
    "Member",
    [
        Field("member_id", STRING, "1+"),
        Field("rack_id", STRING, "1+", nullable="1+", default=None),
        Field("member_epoch", INT32, "1+"),
        Field("client_id", STRING, "1+"),
        Field("client_host", STRING, "1+"),
        Field("subscribed_topic_names", Array(STRING), "1+"),
        Field("assignment", _DESCRIBED_ASSIGNMENT, "1+"),
    ],
)

ShareGroupDescribeResponse = message(
    ApiKey.SHARE_GROUP_DESCRIBE,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribedGroup",
                    [
                        Field("error_code", INT16, "1+"),
                        Field("error_message", STRING, "1+", nullable="1+", default=None),
                        Field("group_id", STRING, "1+"),
                        Field("group_state", STRING, "1+"),
                        Field("group_epoch", INT32, "1+"),
                        Field("assignment_epoch", INT32, "1+"),
                        Field("assignor_name", STRING, "1+"),
                        Field("members", Array(_DESCRIBED_MEMBER), "1+"),
                        Field("authorized_operations", INT32, "1+", default=-2147483648),
                    ],
                )
            ),
            "1+",
        ),
    ],
)
