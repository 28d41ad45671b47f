"""Produce (0): append record batches to partitions.

``records`` holds one or more RecordBatch v2 (v3+) or a message set of
message format v0/v1 (v0-v2: magic 0 in v0-v1, magic 1 in v2), as a
``memoryview`` into the request frame: the codec never parses it; the
storage engine converts a message set to v2, validates and appends it.
``acks`` is 0 (no response is sent), 1 (leader) or -1 (all in-sync replicas).
v1 adds ``throttle_time_ms`` to the response, v2
``log_append_time_ms``; v3 adds ``transactional_id``; v7 is the first that
may carry zstd batches; v8 adds per-batch ``record_errors``; v10 adds the
tagged ``current_leader`` / ``node_endpoints`` hints for NOT_LEADER errors
(KIP-951).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, INT64, RECORDS, STRING

__all__ = ["ProduceRequest", "ProduceResponse"]

ProduceRequest = message(
    ApiKey.PRODUCE,
    "request",
    [
        Field("transactional_id", STRING, "3+", nullable="3+", default=None),
        Field("acks", INT16, "0+"),
        Field("timeout_ms", INT32, "0+"),
        Field(
            "topic_data",
            Array(
                Struct(
                    "TopicProduceData",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partition_data",
                            Array(
                                Struct(
                                    "PartitionProduceData",
                                    [
                                        Field("index", INT32, "0+"),
                                        Field("records", RECORDS, "0+", nullable="0+"),
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

ProduceResponse = message(
    ApiKey.PRODUCE,
    "response",
    [
        Field(
            "responses",
            Array(
                Struct(
                    "TopicProduceResponse",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partition_responses",
                            Array(
                                Struct(
                                    "PartitionProduceResponse",
                                    [
                                        Field("index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field("base_offset", INT64, "0+"),
                                        Field("log_append_time_ms", INT64, "2+", default=-1),
                                        Field("log_start_offset", INT64, "5+", default=-1),
                                        Field(
                                            "record_errors",
                                            Array(
                                                Struct(
                                                    "BatchIndexAndErrorMessage",
                                                    [
                                                        Field("batch_index", INT32, "8+"),
                                                        Field(
                                                            "batch_index_error_message",
                                                            STRING,
                                                            "8+",
                                                            nullable="8+",
                                                            default=None,
                                                        ),
                                                    ],
                                                )
                                            ),
                                            "8+",
                                        ),
                                        Field(
                                            "error_message",
                                            STRING,
                                            "8+",
                                            nullable="8+",
                                            default=None,
                                        ),
                                        Field(
                                            "current_leader",
                                            Struct(
                                                "LeaderIdAndEpoch",
                                                [
                                                    Field("leader_id", INT32, "10+", default=-1),
                                                    Field("leader_epoch", INT32, "10+", default=-1),
                                                ],
                                            ),
                                            "10+",
                                            tag=0,
                                        ),
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
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "node_endpoints",
            Array(
                Struct(
                    "NodeEndpoint",
                    [
                        Field("node_id", INT32, "10+"),
                        Field("host", STRING, "10+"),
                        Field("port", INT32, "10+"),
                        Field("rack", STRING, "10+", nullable="10+", default=None),
                    ],
                )
            ),
            "10+",
            tag=0,
        ),
    ],
)
