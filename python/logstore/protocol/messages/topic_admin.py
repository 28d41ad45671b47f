"""Topic administration: CreateTopics (19), DeleteTopics (20),
CreatePartitions (37).

CreateTopics: ``num_partitions`` / ``replication_factor`` -1 mean "broker
default" (v4+); ``assignments`` may replace both.  v5+ responses describe
the created topic's partitions and configs; v7+ its topic id.
DeleteTopics: by name up to v5, by name or topic id (``topics``) from v6.
CreatePartitions: ``count`` is the new total; ``assignments`` (nullable)
places the new partitions.  librdkafka's tests expect a ``results`` entry
per requested topic.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT8, INT16, INT32, STRING, UUID

__all__ = [
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
]

CreateTopicsRequest = message(
    ApiKey.CREATE_TOPICS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "CreatableTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field("num_partitions", INT32, "0+"),
                        Field("replication_factor", INT16, "0+"),
                        Field(
                            "assignments",
                            Array(
                                Struct(
                                    "CreatableReplicaAssignment",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("broker_ids", Array(INT32), "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    "CreatableTopicConfig",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field("value", STRING, "0+", nullable="0+"),
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
        Field("timeout_ms", INT32, "0+", default=60000),
        Field("validate_only", BOOL, "1+"),
    ],
)

CreateTopicsResponse = message(
    ApiKey.CREATE_TOPICS,
    "response",
    [
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            Array(
                Struct(
                    "CreatableTopicResult",
                    [
                        Field("name", STRING, "0+"),
                        Field("topic_id", UUID, "7+"),
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "1+", nullable="0+"),
                        Field("topic_config_error_code", INT16, "5+", tag=0),
                        Field("num_partitions", INT32, "5+", default=-1),
                        Field("replication_factor", INT16, "5+", default=-1),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    "CreatableTopicConfigs",
                                    [
                                        Field("name", STRING, "5+"),
                                        Field("value", STRING, "5+", nullable="5+"),
                                        Field("read_only", BOOL, "5+"),
                                        Field("config_source", INT8, "5+", default=-1),
                                        Field("is_sensitive", BOOL, "5+"),
                                    ],
                                )
                            ),
                            "5+",
                            nullable="5+",
                        ),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

DeleteTopicsRequest = message(
    ApiKey.DELETE_TOPICS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteTopicState",
                    [
                        Field("name", STRING, "6+", nullable="6+", default=None),
                        Field("topic_id", UUID, "6+"),
                    ],
                )
            ),
            "6+",
        ),
        Field("topic_names", Array(STRING), "0-5"),
        Field("timeout_ms", INT32, "0+"),
    ],
)

DeleteTopicsResponse = message(
    ApiKey.DELETE_TOPICS,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "responses",
            Array(
                Struct(
                    "DeletableTopicResult",
                    [
                        Field("name", STRING, "0+", nullable="6+"),
                        Field("topic_id", UUID, "6+"),
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "5+", nullable="5+", default=None),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

CreatePartitionsRequest = message(
    ApiKey.CREATE_PARTITIONS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "CreatePartitionsTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field("count", INT32, "0+"),
                        Field(
                            "assignments",
                            Array(
                                Struct(
                                    "CreatePartitionsAssignment",
                                    [
                                        Field("broker_ids", Array(INT32), "0+"),
                                    ],
                                )
                            ),
                            "0+",
                            nullable="0+",
                        ),
                    ],
                )
            ),
            "0+",
        ),
        Field("timeout_ms", INT32, "0+"),
        Field("validate_only", BOOL, "0+"),
    ],
)

CreatePartitionsResponse = message(
    ApiKey.CREATE_PARTITIONS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "CreatePartitionsTopicResult",
                    [
                        Field("name", STRING, "0+"),
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
