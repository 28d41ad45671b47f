"""The share coordinator's APIs (KIP-932), at Kafka 4.1's versions (0 each, flexible):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87).

Brokers send them to the share coordinator of a ``(group, topic id, partition)`` key
(the leader of its ``__share_group_state`` partition). Every request names a group and
per topic id the partitions; every response answers per topic id and partition with an
error code and message.

* Initialize: a partition's ``state_epoch`` and ``start_offset`` (-1: not set).
* Read: by the share partition's ``leader_epoch``; answers the ``state_epoch``,
  ``start_offset`` (-1: not initialized) and the ``state_batches``.
* Write: ``state_epoch``, ``leader_epoch``, ``start_offset`` (-1: unchanged) and
  ``state_batches``.
* Delete: the partitions' state goes.
* ReadSummary: ``state_epoch``, ``leader_epoch`` and ``start_offset`` without batches.

A state batch is ``first_offset``..``last_offset`` (inclusive) with a
``delivery_state`` (0 available, 2 acknowledged, 4 archived) and ``delivery_count``.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Message, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, INT64, STRING, UUID

__all__ = [
    "DeleteShareGroupStateRequest",
    "DeleteShareGroupStateResponse",
    "InitializeShareGroupStateRequest",
    "InitializeShareGroupStateResponse",
    "ReadShareGroupStateRequest",
    "ReadShareGroupStateResponse",
    "ReadShareGroupStateSummaryRequest",
    "ReadShareGroupStateSummaryResponse",
    "WriteShareGroupStateRequest",
    "WriteShareGroupStateResponse",
]


def _state_batches() -> Field:
    return Field(
        "state_batches",
        Array(
            Struct(
                "StateBatch",
                [
                    Field("first_offset", INT64, "0+"),
                    Field("last_offset", INT64, "0+"),
                    Field("delivery_state", INT8, "0+"),
                    Field("delivery_count", INT16, "0+"),
                ],
            )
        ),
        "0+",
    )


def _request(key: ApiKey, topic_struct: str, partition_fields: list[Field]) -> type[Message]:
    return message(
        key,
        "request",
        [
            Field("group_id", STRING, "0+"),
            Field(
                "topics",
                Array(
                    Struct(
                        topic_struct,
                        [
                            Field("topic_id", UUID, "0+"),
                            Field(
                                "partitions",
                                Array(Struct("PartitionData", partition_fields)),
                                "0+",
                            ),
                        ],
                    )
                ),
                "0+",
            ),
        ],
    )


def _response(key: ApiKey, result_struct: str, extra_fields: list[Field]) -> type[Message]:
    return message(
        key,
        "response",
        [
            Field(
                "results",
                Array(
                    Struct(
                        result_struct,
                        [
                            Field("topic_id", UUID, "0+"),
                            Field(
                                "partitions",
                                Array(
                                    Struct(
                                        "PartitionResult",
                                        [
                                            Field("partition", INT32, "0+"),
                                            Field("error_code", INT16, "0+"),
                                            Field(
                                                "error_message",
                                                STRING,
                                                "0+",
                                                nullable="0+",
                                                default=None,
                                            ),
                                            *extra_fields,
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


InitializeShareGroupStateRequest = _request(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    "InitializeStateData",
    [
        Field("partition", INT32, "0+"),
        Field("state_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
    ],
)
InitializeShareGroupStateResponse = _response(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, "InitializeStateResult", []
)

ReadShareGroupStateRequest = _request(
    ApiKey.READ_SHARE_GROUP_STATE,
    "ReadStateData",
    [Field("partition", INT32, "0+"), Field("leader_epoch", INT32, "0+")],
)
ReadShareGroupStateResponse = _response(
    ApiKey.READ_SHARE_GROUP_STATE,
    "ReadStateResult",
    [
        Field("state_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
        _state_batches(),
    ],
)

WriteShareGroupStateRequest = _request(
    ApiKey.WRITE_SHARE_GROUP_STATE,
    "WriteStateData",
    [
        Field("partition", INT32, "0+"),
        Field("state_epoch", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
        _state_batches(),
    ],
)
WriteShareGroupStateResponse = _response(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteStateResult", [])

DeleteShareGroupStateRequest = _request(
    ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteStateData", [Field("partition", INT32, "0+")]
)
DeleteShareGroupStateResponse = _response(ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteStateResult", [])

ReadShareGroupStateSummaryRequest = _request(
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    "ReadStateSummaryData",
    [Field("partition", INT32, "0+"), Field("leader_epoch", INT32, "0+")],
)
ReadShareGroupStateSummaryResponse = _response(
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    "ReadStateSummaryResult",
    [
        Field("state_epoch", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("start_offset", INT64, "0+"),
    ],
)
