"""Group administration: DescribeGroups (15), ListGroups (16), DeleteGroups (42).

``group_state`` is one of Kafka's names: Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead.  ``authorized_operations`` is a bit set
of ACL operations, or -2147483648 when not requested.  ListGroups v4 adds
a state filter, v5 a type filter ("classic", "consumer").
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, BYTES, INT16, INT32, STRING

__all__ = [
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
]

DescribeGroupsRequest = message(
    ApiKey.DESCRIBE_GROUPS,
    "request",
    [
        Field("groups", Array(STRING), "0+"),
        Field("include_authorized_operations", BOOL, "3+"),
    ],
)

DescribeGroupsResponse = message(
    ApiKey.DESCRIBE_GROUPS,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribedGroup",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("group_id", STRING, "0+"),
                        Field("group_state", STRING, "0+"),
                        Field("protocol_type", STRING, "0+"),
                        Field("protocol_data", STRING, "0+"),
                        Field(
                            "members",
                            Array(
                                Struct(
                                    "DescribedGroupMember",
                                    [
                                        Field("member_id", STRING, "0+"),
                                        Field(
                                            "group_instance_id",
                                            STRING,
                                            "4+",
                                            nullable="4+",
                                            default=None,
                                        ),
                                        Field("client_id", STRING, "0+"),
                                        Field("client_host", STRING, "0+"),
                                        Field("member_metadata", BYTES, "0+"),
                                        Field("member_assignment", BYTES, "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field("authorized_operations", INT32, "3+", default=-2147483648),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

ListGroupsRequest = message(
    ApiKey.LIST_GROUPS,
    "request",
    [
        Field("states_filter", Array(STRING), "4+"),
        Field("types_filter", Array(STRING), "5+"),
    ],
)

ListGroupsResponse = message(
    ApiKey.LIST_GROUPS,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0+"),
        Field(
            "groups",
            Array(
                Struct(
                    "ListedGroup",
                    [
                        Field("group_id", STRING, "0+"),
                        Field("protocol_type", STRING, "0+"),
                        Field("group_state", STRING, "4+"),
                        Field("group_type", STRING, "5+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

DeleteGroupsRequest = message(
    ApiKey.DELETE_GROUPS,
    "request",
    [
        Field("groups_names", Array(STRING), "0+"),
    ],
)

DeleteGroupsResponse = message(
    ApiKey.DELETE_GROUPS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "DeletableGroupResult",
                    [
                        Field("group_id", STRING, "0+"),
                        Field("error_code", INT16, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
