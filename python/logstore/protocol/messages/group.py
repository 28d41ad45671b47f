"""The classic consumer-group protocol: JoinGroup (11), SyncGroup (14),
Heartbeat (12), LeaveGroup (13).

``metadata`` and ``assignment`` are opaque bytes to the broker (the
consumer protocol's subscription and assignment).  JoinGroup v4+ makes a
new member with an empty ``member_id`` retry with the id the broker
returns (MEMBER_ID_REQUIRED).  ``group_instance_id`` (static membership)
appears in JoinGroup v5, SyncGroup/Heartbeat v3.  LeaveGroup v3+ removes a
batch of ``members``; earlier versions one ``member_id``.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, BYTES, INT16, INT32, STRING

__all__ = [
    "JoinGroupRequest",
    "JoinGroupResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
]

JoinGroupRequest = message(
    ApiKey.JOIN_GROUP,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("session_timeout_ms", INT32, "0+"),
        Field("rebalance_timeout_ms", INT32, "1+", default=-1),
        Field("member_id", STRING, "0+"),
        Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
        Field("protocol_type", STRING, "0+"),
        Field(
            "protocols",
            Array(
                Struct(
                    "JoinGroupRequestProtocol",
                    [
                        Field("name", STRING, "0+"),
                        Field("metadata", BYTES, "0+"),
                    ],
                )
            ),
            "0+",
        ),
        Field("reason", STRING, "8+", nullable="8+", default=None),
    ],
)

JoinGroupResponse = message(
    ApiKey.JOIN_GROUP,
    "response",
    [
        Field("throttle_time_ms", INT32, "2+"),
        Field("error_code", INT16, "0+"),
        Field("generation_id", INT32, "0+", default=-1),
        Field("protocol_type", STRING, "7+", nullable="7+", default=None),
        Field("protocol_name", STRING, "0+", nullable="7+"),
        Field("leader", STRING, "0+"),
        Field("skip_assignment", BOOL, "9+"),
        Field("member_id", STRING, "0+"),
        Field(
            "members",
            Array(
                Struct(
                    "JoinGroupResponseMember",
                    [
                        Field("member_id", STRING, "0+"),
                        Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
                        Field("metadata", BYTES, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

SyncGroupRequest = message(
    ApiKey.SYNC_GROUP,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("generation_id", INT32, "0+"),
        Field("member_id", STRING, "0+"),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None),
        Field(
            "assignments",
            Array(
                Struct(
                    "SyncGroupRequestAssignment",
                    [
                        Field("member_id", STRING, "0+"),
                        Field("assignment", BYTES, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

SyncGroupResponse = message(
    ApiKey.SYNC_GROUP,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0+"),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None),
        Field("assignment", BYTES, "0+"),
    ],
)

HeartbeatRequest = message(
    ApiKey.HEARTBEAT,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("generation_id", INT32, "0+"),
        Field("member_id", STRING, "0+"),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ],
)

HeartbeatResponse = message(
    ApiKey.HEARTBEAT,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0+"),
    ],
)

LeaveGroupRequest = message(
    ApiKey.LEAVE_GROUP,
    "request",
    [
        Field("group_id", STRING, "0+"),
        Field("member_id", STRING, "0-2"),
        Field(
            "members",
            Array(
                Struct(
                    "MemberIdentity",
                    [
                        Field("member_id", STRING, "3+"),
                        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
                        Field("reason", STRING, "5+", nullable="5+", default=None),
                    ],
                )
            ),
            "3+",
        ),
    ],
)

LeaveGroupResponse = message(
    ApiKey.LEAVE_GROUP,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0+"),
        Field(
            "members",
            Array(
                Struct(
                    "MemberResponse",
                    [
                        Field("member_id", STRING, "3+"),
                        Field("group_instance_id", STRING, "3+", nullable="3+"),
                        Field("error_code", INT16, "3+"),
                    ],
                )
            ),
            "3+",
        ),
    ],
)
