"""The admin side of transactions: DescribeProducers (61), DescribeTransactions
(65) and ListTransactions (66), all flexible from v0 (KIP-664).

DescribeProducers asks a partition leader for the producers it tracks, with the
first offset of each one's open transaction (-1: none). DescribeTransactions and
ListTransactions ask a transaction coordinator; ListTransactions v1 adds
``duration_filter`` (only transactions running longer than that many ms, -1: all).
Transaction states are named as Kafka's ``TransactionState`` (``Ongoing``,
``PrepareCommit``, ``CompleteAbort``, ...).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT16, INT32, INT64, STRING

__all__ = [
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
]

DescribeProducersRequest = message(
    ApiKey.DESCRIBE_PRODUCERS,
    "request",
    [
        Field(
            "topics",
            Array(
                Struct(
                    "TopicRequest",
                    [
                        Field("name", STRING, "0+"),
                        Field("partition_indexes", Array(INT32), "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

DescribeProducersResponse = message(
    ApiKey.DESCRIBE_PRODUCERS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "TopicResponse",
                    [
                        Field("name", STRING, "0+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionResponse",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field(
                                            "error_message",
                                            STRING,
                                            "0+",
                                            nullable="0+",
                                            default=None,
                                        ),
                                        Field(
                                            "active_producers",
                                            Array(
                                                Struct(
                                                    "ProducerState",
                                                    [
                                                        Field("producer_id", INT64, "0+"),
                                                        Field("producer_epoch", INT32, "0+"),
                                                        Field(
                                                            "last_sequence", INT32, "0+", default=-1
                                                        ),
                                                        Field(
                                                            "last_timestamp",
                                                            INT64,
                                                            "0+",
                                                            default=-1,
                                                        ),
                                                        Field("coordinator_epoch", INT32, "0+"),
                                                        Field(
                                                            "current_txn_start_offset",
                                                            INT64,
                                                            "0+",
                                                            default=-1,
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
            ),
            "0+",
        ),
    ],
)

DescribeTransactionsRequest = message(
    ApiKey.DESCRIBE_TRANSACTIONS,
    "request",
    [
        Field("transactional_ids", Array(STRING), "0+"),
    ],
)

DescribeTransactionsResponse = message(
    ApiKey.DESCRIBE_TRANSACTIONS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "transaction_states",
            Array(
                Struct(
                    "TransactionState",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("transactional_id", STRING, "0+"),
                        Field("transaction_state", STRING, "0+"),
                        Field("transaction_timeout_ms", INT32, "0+"),
                        Field("transaction_start_time_ms", INT64, "0+"),
                        Field("producer_id", INT64, "0+"),
                        Field("producer_epoch", INT16, "0+"),
                        Field(
                            "topics",
                            Array(
                                Struct(
                                    "TopicData",
                                    [
                                        Field("topic", STRING, "0+"),
                                        Field("partitions", Array(INT32), "0+"),
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

ListTransactionsRequest = message(
    ApiKey.LIST_TRANSACTIONS,
    "request",
    [
        Field("state_filters", Array(STRING), "0+"),
        Field("producer_id_filters", Array(INT64), "0+"),
        Field("duration_filter", INT64, "1+", default=-1),
    ],
)

ListTransactionsResponse = message(
    ApiKey.LIST_TRANSACTIONS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("unknown_state_filters", Array(STRING), "0+"),
        Field(
            "transaction_states",
            Array(
                Struct(
                    "TransactionState",
                    [
                        Field("transactional_id", STRING, "0+"),
                        Field("producer_id", INT64, "0+"),
                        Field("transaction_state", STRING, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
