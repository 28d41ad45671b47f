"""Fetch (1): read record batches from partitions.

Request: up to v12 topics are named, from v13 identified by ``topic_id``
(the name field is absent).  v7+ carry fetch-session fields; a broker may
always answer without a session (``session_id`` 0), clients then send full
requests.  v11 adds ``rack_id``; v12 ``last_fetched_epoch`` (follower
truncation); v15+ replace ``replica_id`` by the tagged ``replica_state``.

v3 adds the response-wide ``max_bytes``; v4 ``isolation_level``.

Response: each partition's ``records`` is a raw slice of whole batches
(v4+: RecordBatch v2; v0-v3: a message set of magic 0 (v0-v1) or 1 (v2-v3),
which the broker converts down).  v1 adds ``throttle_time_ms``; v4
``last_stable_offset`` and ``aborted_transactions``.
To send them by ``sendfile(2)`` put a
:class:`~logstore.protocol.types.DeferredRecords` in ``records`` and
encode with ``frame.encode_response_chunks``; see that module.
``aborted_transactions`` (v4+, nullable) lists transactions whose batches a
read_committed consumer must drop.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID

__all__ = ["FetchRequest", "FetchResponse"]

FetchRequest = message(
    ApiKey.FETCH,
    "request",
    [
        Field("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
        Field("replica_id", INT32, "0-14", default=-1),
        Field(
            "replica_state",
            Struct(
                "ReplicaState",
                [
                    Field("replica_id", INT32, "15+", default=-1),
                    Field("replica_epoch", INT64, "15+", default=-1),
                ],
            ),
            "15+",
            tag=1,
        ),
        Field("max_wait_ms", INT32, "0+"),
        Field("min_bytes", INT32, "0+"),
        Field("max_bytes", INT32, "3+", default=2147483647),
        Field("isolation_level", INT8, "4+"),
        Field("session_id", INT32, "7+"),
        Field("session_epoch", INT32, "7+", default=-1),
        Field(
            "topics",
            Array(
                Struct(
                    "FetchTopic",
                    [
                        Field("topic", STRING, "0-12"),
                        Field("topic_id", UUID, "13+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "FetchPartition",
                                    [
                                        Field("partition", INT32, "0+"),
                                        Field("current_leader_epoch", INT32, "9+", default=-1),
                                        Field("fetch_offset", INT64, "0+"),
                                        Field("last_fetched_epoch", INT32, "12+", default=-1),
                                        Field("log_start_offset", INT64, "5+", default=-1),
                                        Field("partition_max_bytes", INT32, "0+"),
                                        Field("replica_directory_id", UUID, "17+", tag=0),
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
        Field(
            "forgotten_topics_data",
            Array(
                Struct(
                    "ForgottenTopic",
                    [
                        Field("topic", STRING, "7-12"),
                        Field("topic_id", UUID, "13+"),
                        Field("partitions", Array(INT32), "7+"),
                    ],
                )
            ),
            "7+",
        ),
        Field("rack_id", STRING, "11+"),
    ],
)

FetchResponse = message(
    ApiKey.FETCH,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "7+"),
        Field("session_id", INT32, "7+"),
        Field(
            "responses",
            Array(
                Struct(
                    "FetchableTopicResponse",
                    [
                        Field("topic", STRING, "0-12"),
                        Field("topic_id", UUID, "13+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionData",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field("high_watermark", INT64, "0+"),
                                        Field("last_stable_offset", INT64, "4+", default=-1),
                                        Field("log_start_offset", INT64, "5+", default=-1),
                                        Field(
                                            "diverging_epoch",
                                            Struct(
                                                "EpochEndOffset",
                                                [
                                                    Field("epoch", INT32, "12+", default=-1),
                                                    Field("end_offset", INT64, "12+", default=-1),
                                                ],
                                            ),
                                            "12+",
                                            tag=0,
                                        ),
                                        Field(
                                            "current_leader",
                                            Struct(
                                                "LeaderIdAndEpoch",
                                                [
                                                    Field("leader_id", INT32, "12+", default=-1),
                                                    Field("leader_epoch", INT32, "12+", default=-1),
                                                ],
                                            ),
                                            "12+",
                                            tag=1,
                                        ),
                                        Field(
                                            "snapshot_id",
                                            Struct(
                                                "SnapshotId",
                                                [
                                                    Field("end_offset", INT64, "0+", default=-1),
                                                    Field("epoch", INT32, "0+", default=-1),
                                                ],
                                            ),
                                            "12+",
                                            tag=2,
                                        ),
                                        Field(
                                            "aborted_transactions",
                                            Array(
                                                Struct(
                                                    "AbortedTransaction",
                                                    [
                                                        Field("producer_id", INT64, "4+"),
                                                        Field("first_offset", INT64, "4+"),
                                                    ],
                                                )
                                            ),
                                            "4+",
                                            nullable="4+",
                                        ),
                                        Field("preferred_read_replica", INT32, "11+", default=-1),
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
        Field(
            "node_endpoints",
            Array(
                Struct(
                    "NodeEndpoint",
                    [
                        Field("node_id", INT32, "16+"),
                        Field("host", STRING, "16+"),
                        Field("port", INT32, "16+"),
                        Field("rack", STRING, "16+", nullable="16+", default=None),
                    ],
                )
            ),
            "16+",
            tag=0,
        ),
    ],
)
