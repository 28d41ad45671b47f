"""Topic and broker configs: DescribeConfigs (32), AlterConfigs (33),
IncrementalAlterConfigs (44).

``resource_type`` is 2 for a topic, 4 for a broker, 8 for a broker logger.
DescribeConfigs ``configuration_keys`` null means every key; entries carry
``config_source`` (1 dynamic topic, 4 static broker, 5 default, ...) and,
if asked, synonyms.  librdkafka's tests expect default entries to be
listed.  AlterConfigs replaces a resource's whole dynamic config;
IncrementalAlterConfigs applies ``config_operation`` 0 set, 1 delete, 2
append, 3 subtract per key.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT8, INT16, INT32, STRING

__all__ = [
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "AlterConfigsRequest",
    "AlterConfigsResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
]

DescribeConfigsRequest = message(
    ApiKey.DESCRIBE_CONFIGS,
    "request",
    [
        Field(
            "resources",
            Array(
                Struct(
                    "DescribeConfigsResource",
                    [
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field("configuration_keys", Array(STRING), "0+", nullable="0+"),
                    ],
                )
            ),
            "0+",
        ),
        Field("include_synonyms", BOOL, "1+"),
        Field("include_documentation", BOOL, "3+"),
    ],
)

DescribeConfigsResponse = message(
    ApiKey.DESCRIBE_CONFIGS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "DescribeConfigsResult",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+"),
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    "DescribeConfigsResourceResult",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field("value", STRING, "0+", nullable="0+"),
                                        Field("read_only", BOOL, "0+"),
                                        Field("is_default", BOOL, "0"),
                                        Field("config_source", INT8, "1+", default=-1),
                                        Field("is_sensitive", BOOL, "0+"),
                                        Field(
                                            "synonyms",
                                            Array(
                                                Struct(
                                                    "DescribeConfigsSynonym",
                                                    [
                                                        Field("name", STRING, "1+"),
                                                        Field("value", STRING, "1+", nullable="0+"),
                                                        Field("source", INT8, "1+"),
                                                    ],
                                                )
                                            ),
                                            "1+",
                                        ),
                                        Field("config_type", INT8, "3+"),
                                        Field("documentation", STRING, "3+", nullable="0+"),
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

AlterConfigsRequest = message(
    ApiKey.ALTER_CONFIGS,
    "request",
    [
        Field(
            "resources",
            Array(
                Struct(
                    "AlterConfigsResource",
                    [
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    "AlterableConfig",
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
        Field("validate_only", BOOL, "0+"),
    ],
)

AlterConfigsResponse = message(
    ApiKey.ALTER_CONFIGS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "responses",
            Array(
                Struct(
                    "AlterConfigsResourceResponse",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+"),
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

IncrementalAlterConfigsRequest = message(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "request",
    [
        Field(
            "resources",
            Array(
                Struct(
                    "AlterConfigsResource",
                    [
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                        Field(
                            "configs",
                            Array(
                                Struct(
                                    "AlterableConfig",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field("config_operation", INT8, "0+"),
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
        Field("validate_only", BOOL, "0+"),
    ],
)

IncrementalAlterConfigsResponse = message(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "responses",
            Array(
                Struct(
                    "AlterConfigsResourceResponse",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+"),
                        Field("resource_type", INT8, "0+"),
                        Field("resource_name", STRING, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
