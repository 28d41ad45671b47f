"""ACL admin: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3, flexible
from v2. v1 adds the resource pattern type (LITERAL 3 before it); v3 adds the USER
resource type. The codes are those of :mod:`broker_py.security.authorizer.acl_binding`.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, STRING

__all__ = [
    "DescribeAclsRequest",
    "DescribeAclsResponse",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
]

LITERAL = 3


def _filter_fields() -> list[Field]:
    return [
        Field("resource_type_filter", INT8, "0+"),
        Field("resource_name_filter", STRING, "0+", nullable="0+", default=None),
        Field("pattern_type_filter", INT8, "1+", default=LITERAL),
        Field("principal_filter", STRING, "0+", nullable="0+", default=None),
        Field("host_filter", STRING, "0+", nullable="0+", default=None),
        Field("operation", INT8, "0+"),
        Field("permission_type", INT8, "0+"),
    ]


DescribeAclsRequest = message(ApiKey.DESCRIBE_ACLS, "request", _filter_fields())

DescribeAclsResponse = message(
    ApiKey.DESCRIBE_ACLS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
        Field(
            "resources",
            Array(
                Struct(
                    "DescribeAclsResource",
                    [
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field("pattern_type", INT8, "1+", default=LITERAL),
                        Field(
                            "acls",
                            Array(
                                Struct(
                                    "AclDescription",
                                    [
                                        Field("principal", STRING, "0+"),
                                        Field("host", STRING, "0+"),
                                        Field("operation", INT8, "0+"),
                                        Field("permission_type", INT8, "0+"),
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

CreateAclsRequest = message(
    ApiKey.CREATE_ACLS,
    "request",
    [
        Field(
            "creations",
            Array(
                Struct(
                    "AclCreation",
                    [
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field("resource_pattern_type", INT8, "1+", default=LITERAL),
                        Field("principal", STRING, "0+"),
                        Field("host", STRING, "0+"),
                        Field("operation", INT8, "0+"),
                        Field("permission_type", INT8, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

CreateAclsResponse = message(
    ApiKey.CREATE_ACLS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "AclCreationResult",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

DeleteAclsRequest = message(
    ApiKey.DELETE_ACLS,
    "request",
    [
        Field("filters", Array(Struct("DeleteAclsFilter", _filter_fields())), "0+"),
    ],
)

DeleteAclsResponse = message(
    ApiKey.DELETE_ACLS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "filter_results",
            Array(
                Struct(
                    "DeleteAclsFilterResult",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                        Field(
                            "matching_acls",
                            Array(
                                Struct(
                                    "DeleteAclsMatchingAcl",
                                    [
                                        Field("error_code", INT16, "0+"),
                                        Field(
                                            "error_message",
                                            STRING,
                                            "0+",
                                            nullable="0+",
                                            default=None,
                                        ),
                                        Field("resource_type", INT8, "0+"),
                                        Field("resource_name", STRING, "0+"),
                                        Field("pattern_type", INT8, "1+", default=LITERAL),
                                        Field("principal", STRING, "0+"),
                                        Field("host", STRING, "0+"),
                                        Field("operation", INT8, "0+"),
                                        Field("permission_type", INT8, "0+"),
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
