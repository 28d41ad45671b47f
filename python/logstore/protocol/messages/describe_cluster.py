"""DescribeCluster (60): brokers, controller and cluster id.

Every version is flexible.  v1 adds ``endpoint_type`` (1 brokers, 2
controllers; KIP-919).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT8, INT16, INT32, STRING

__all__ = ["DescribeClusterRequest", "DescribeClusterResponse"]

DescribeClusterRequest = message(
    ApiKey.DESCRIBE_CLUSTER,
    "request",
    [
        Field("include_cluster_authorized_operations", BOOL, "0+"),
        Field("endpoint_type", INT8, "1+", default=1),
    ],
)

DescribeClusterResponse = message(
    ApiKey.DESCRIBE_CLUSTER,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
        Field("endpoint_type", INT8, "1+", default=1),
        Field("cluster_id", STRING, "0+"),
        Field("controller_id", INT32, "0+", default=-1),
        Field(
            "brokers",
            Array(
                Struct(
                    "DescribeClusterBroker",
                    [
                        Field("broker_id", INT32, "0+"),
                        Field("host", STRING, "0+"),
                        Field("port", INT32, "0+"),
                        Field("rack", STRING, "0+", nullable="0+", default=None),
                    ],
                )
            ),
            "0+",
        ),
        Field("cluster_authorized_operations", INT32, "0+", default=-2147483648),
    ],
)
