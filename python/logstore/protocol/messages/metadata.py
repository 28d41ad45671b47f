"""Metadata (3): brokers, controller, topics and partition leaders.

Request ``topics``: in v0 an empty array means "all topics"; from v1 the
array is nullable and null means all topics while empty means none.
``allow_auto_topic_creation`` (v4+) asks the broker to create unknown
topics; before v4 the broker decides alone (librdkafka's tests expect
auto-creation).  v10+ carry topic ids; v12+ may name a topic by id only
(``name`` null).  ``include_cluster_authorized_operations`` exists in v8-10
only (v11+ moved it to DescribeCluster).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, STRING, UUID

__all__ = ["MetadataRequest", "MetadataResponse"]

MetadataRequest = message(
    ApiKey.METADATA,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "MetadataRequestTopic",
                    [
                        Field("topic_id", UUID, "10+"),
                        Field("name", STRING, "0+", nullable="10+"),
                    ],
                )
            ),
            "0+",
            nullable="1+",
        ),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    ],
)

MetadataResponse = message(
    ApiKey.METADATA,
    "response",
    [
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "brokers",
            Array(
                Struct(
                    "MetadataResponseBroker",
                    [
                        Field("node_id", INT32, "0+"),
                        Field("host", STRING, "0+"),
                        Field("port", INT32, "0+"),
                        Field("rack", STRING, "1+", nullable="1+", default=None),
                    ],
                )
            ),
            "0+",
        ),
        Field("cluster_id", STRING, "2+", nullable="2+", default=None),
        Field("controller_id", INT32, "1+", default=-1),
        Field(
            "topics",
            Array(
                Struct(
                    "MetadataResponseTopic",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("name", STRING, "0+", nullable="12+"),
                        Field("topic_id", UUID, "10+"),
                        Field("is_internal", BOOL, "1+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "MetadataResponsePartition",
                                    [
                                        Field("error_code", INT16, "0+"),
                                        Field("partition_index", INT32, "0+"),
                                        Field("leader_id", INT32, "0+"),
                                        Field("leader_epoch", INT32, "7+", default=-1),
                                        Field("replica_nodes", Array(INT32), "0+"),
                                        Field("isr_nodes", Array(INT32), "0+"),
                                        Field("offline_replicas", Array(INT32), "5+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field("topic_authorized_operations", INT32, "8+", default=-2147483648),
                    ],
                )
            ),
            "0+",
        ),
        Field("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
    ],
)
