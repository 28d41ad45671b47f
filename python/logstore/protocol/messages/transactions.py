"""Idempotent and transactional producers: InitProducerId (22),
AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28), WriteTxnMarkers (27).

InitProducerId with a null ``transactional_id`` just allocates a producer
id (idempotence); v3+ may pass the current id and epoch to bump the epoch.
AddPartitionsToTxn up to v3 names one transaction in the ``v3_and_below_*``
fields; v4+ batches ``transactions`` (broker-to-broker, with
``verify_only``).  EndTxn ``committed`` true commits, false aborts.
WriteTxnMarkers is sent by the transaction coordinator to partition
leaders, which append COMMIT/ABORT control batches.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT16, INT32, INT64, STRING

__all__ = [
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
]

InitProducerIdRequest = message(
    ApiKey.INIT_PRODUCER_ID,
    "request",
    [
        Field("transactional_id", STRING, "0+", nullable="0+"),
        Field("transaction_timeout_ms", INT32, "0+"),
        Field("producer_id", INT64, "3+", default=-1),
        Field("producer_epoch", INT16, "3+", default=-1),
    ],
)

InitProducerIdResponse = message(
    ApiKey.INIT_PRODUCER_ID,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("producer_id", INT64, "0+", default=-1),
        Field("producer_epoch", INT16, "0+"),
    ],
)

ADD_PARTITIONS_TO_TXN_TOPIC = Struct(
    "AddPartitionsToTxnTopic",
    [
        Field("name", STRING, "0+"),
        Field("partitions", Array(INT32), "0+"),
    ],
)

AddPartitionsToTxnRequest = message(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "request",
    [
        Field(
            "transactions",
            Array(
                Struct(
                    "AddPartitionsToTxnTransaction",
                    [
                        Field("transactional_id", STRING, "4+"),
                        Field("producer_id", INT64, "4+"),
                        Field("producer_epoch", INT16, "4+"),
                        Field("verify_only", BOOL, "4+"),
                        Field("topics", Array(ADD_PARTITIONS_TO_TXN_TOPIC), "4+"),
                    ],
                )
            ),
            "4+",
        ),
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        Field("v3_and_below_topics", Array(ADD_PARTITIONS_TO_TXN_TOPIC), "0-3"),
    ],
)

ADD_PARTITIONS_TO_TXN_PARTITION_RESULT = Struct(
    "AddPartitionsToTxnPartitionResult",
    [
        Field("partition_index", INT32, "0+"),
        Field("partition_error_code", INT16, "0+"),
    ],
)

ADD_PARTITIONS_TO_TXN_TOPIC_RESULT = Struct(
    "AddPartitionsToTxnTopicResult",
    [
        Field("name", STRING, "0+"),
        Field("results_by_partition", Array(ADD_PARTITIONS_TO_TXN_PARTITION_RESULT), "0+"),
    ],
)

AddPartitionsToTxnResponse = message(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "4+"),
        Field(
            "results_by_transaction",
            Array(
                Struct(
                    "AddPartitionsToTxnResult",
                    [
                        Field("transactional_id", STRING, "4+"),
                        Field("topic_results", Array(ADD_PARTITIONS_TO_TXN_TOPIC_RESULT), "4+"),
                    ],
                )
            ),
            "4+",
        ),
        Field("results_by_topic_v3_and_below", Array(ADD_PARTITIONS_TO_TXN_TOPIC_RESULT), "0-3"),
    ],
)

AddOffsetsToTxnRequest = message(
    ApiKey.ADD_OFFSETS_TO_TXN,
    "request",
    [
        Field("transactional_id", STRING, "0+"),
        Field("producer_id", INT64, "0+"),
        Field("producer_epoch", INT16, "0+"),
        Field("group_id", STRING, "0+"),
    ],
)

AddOffsetsToTxnResponse = message(
    ApiKey.ADD_OFFSETS_TO_TXN,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
    ],
)

EndTxnRequest = message(
    ApiKey.END_TXN,
    "request",
    [
        Field("transactional_id", STRING, "0+"),
        Field("producer_id", INT64, "0+"),
        Field("producer_epoch", INT16, "0+"),
        Field("committed", BOOL, "0+"),
    ],
)

EndTxnResponse = message(
    ApiKey.END_TXN,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
    ],
)

TxnOffsetCommitRequest = message(
    ApiKey.TXN_OFFSET_COMMIT,
    "request",
    [
        Field("transactional_id", STRING, "0+"),
        Field("group_id", STRING, "0+"),
        Field("producer_id", INT64, "0+"),
        Field("producer_epoch", INT16, "0+"),
        Field("generation_id", INT32, "3+", default=-1),
        Field("member_id", STRING, "3+"),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        Field(
            "topics",
            Array(
                Struct(
                    "TxnOffsetCommitRequestTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "TxnOffsetCommitRequestPartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("committed_offset", INT64, "0+"),
                                        Field("committed_leader_epoch", INT32, "2+", default=-1),
                                        Field("committed_metadata", STRING, "0+", nullable="0+"),
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

TxnOffsetCommitResponse = message(
    ApiKey.TXN_OFFSET_COMMIT,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "TxnOffsetCommitResponseTopic",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "TxnOffsetCommitResponsePartition",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
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

WriteTxnMarkersRequest = message(
    ApiKey.WRITE_TXN_MARKERS,
    "request",
    [
        Field(
            "markers",
            Array(
                Struct(
                    "WritableTxnMarker",
                    [
                        Field("producer_id", INT64, "0+"),
                        Field("producer_epoch", INT16, "0+"),
                        Field("transaction_result", BOOL, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "WritableTxnMarkerTopic",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field("partition_indexes", Array(INT32), "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                        Field("coordinator_epoch", INT32, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

WriteTxnMarkersResponse = message(
    ApiKey.WRITE_TXN_MARKERS,
    "response",
    [
        Field(
            "markers",
            Array(
                Struct(
                    "WritableTxnMarkerResult",
                    [
                        Field("producer_id", INT64, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "WritableTxnMarkerTopicResult",
                                    [
                                        Field("name", STRING, "0+"),
                                        Field(
                                            "partitions",
                                            Array(
                                                Struct(
                                                    "WritableTxnMarkerPartitionResult",
                                                    [
                                                        Field("partition_index", INT32, "0+"),
                                                        Field("error_code", INT16, "0+"),
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
            ),
            "0+",
        ),
    ],
)
