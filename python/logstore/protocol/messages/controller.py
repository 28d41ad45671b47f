"""Controller-to-broker and broker-to-controller APIs, as Kafka 3.9 defines them:
LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7)
and AlterPartition (56).

Field order, version ranges, nullability, defaults and tags follow Kafka 3.9's
message JSON field for field; the attribute names are the snake_case of Kafka's
(``isKRaftController`` becomes ``is_kraft_controller``).  Layout by version:

* LeaderAndIsr request (0-7, flexible 4+): the controller's id and epoch, the
  broker epoch (2+), ``type`` (5+: 0 unknown, 1 incremental, 2 full), then the
  partition states: v0-1 as ``ungrouped_partition_states`` (each carries its
  topic name), v2+ grouped by topic in ``topic_states`` (topic id 5+).  Partition states add
  ``is_new`` (1+), ``adding_replicas``/``removing_replicas`` (3+) and
  ``leader_recovery_state`` (6+); ``partition_epoch`` is the ZooKeeper version of
  the partition's state znode.  v7 adds ``is_kraft_controller`` (KIP-866
  migration), right after ``controller_id``.
* LeaderAndIsr response: per-partition errors with topic names (v0-4), per-topic
  by topic id (5+).  v6 and v7 equal v5.
* StopReplica request (0-4, flexible 2+): v0 lists ``ungrouped_partitions`` and
  one ``delete_partitions`` flag; v1-2 group partition indexes by topic
  (``topics``) with the flag still request-wide (0-2); v3+ carry per-partition
  ``leader_epoch`` (-1: no check) and ``delete_partition`` in ``topic_states``.
  Broker epoch from v1, ``is_kraft_controller`` in v4.
* UpdateMetadata request (0-8, flexible 6+): v0-4 ``ungrouped_partition_states``,
  v5+ ``topic_states`` (topic id 7+); ``live_brokers`` have one host and port in
  v0 (``v0_host``/``v0_port``) and a list of ``endpoints`` from v1 (listener name
  3+); ``rack`` 2+, nullable.  v8 adds ``is_kraft_controller`` and the tagged
  ``type`` (tag 0: 0 unknown, 1 incremental, 2 full).
* ControlledShutdown (0-3, flexible 3+): the broker id, its epoch (2+); the
  answer lists the partitions it still leads.  Version 0 is sent with request
  header v0 (no client id), which this codec does not read, so ``ApiKey``
  accepts 1-3 (see ``api_keys``); the v0 body is declared all the same.
* AlterPartition (0-3, flexible at every version): a partition leader proposes a
  new ISR.  Topics are named up to v1 and identified by id from v2; v1 adds
  ``leader_recovery_state``; v3 replaces ``new_isr`` (0-2) by
  ``new_isr_with_epochs`` (broker id and broker epoch, -1 when unknown).
  ``partition_epoch`` is the epoch (ZooKeeper version) the leader's proposal is
  based on; the answer carries the state the controller settled on.

All of these are inter-broker; a broker advertises them in ApiVersions only once
it has handlers for them.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, INT8, INT16, INT32, INT64, STRING, UUID

__all__ = [
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

# --------------------------------------------------------------------------
# LeaderAndIsr (4)

_LeaderAndIsrPartitionState = Struct(
    "LeaderAndIsrPartitionState",
    [
        Field("topic_name", STRING, "0-1"),
        Field("partition_index", INT32, "0+"),
        Field("controller_epoch", INT32, "0+"),
        Field("leader", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("isr", Array(INT32), "0+"),
        Field("partition_epoch", INT32, "0+"),
        Field("replicas", Array(INT32), "0+"),
        Field("adding_replicas", Array(INT32), "3+"),
        Field("removing_replicas", Array(INT32), "3+"),
        Field("is_new", BOOL, "1+", default=False),
        Field("leader_recovery_state", INT8, "6+", default=0),
    ],
)

LeaderAndIsrRequest = message(
    ApiKey.LEADER_AND_ISR,
    "request",
    [
        Field("controller_id", INT32, "0+"),
        Field("is_kraft_controller", BOOL, "7+", default=False),
        Field("controller_epoch", INT32, "0+"),
        Field("broker_epoch", INT64, "2+", default=-1),
        Field("type", INT8, "5+"),
        Field("ungrouped_partition_states", Array(_LeaderAndIsrPartitionState), "0-1"),
        Field(
            "topic_states",
            Array(
                Struct(
                    "LeaderAndIsrTopicState",
                    [
                        Field("topic_name", STRING, "2+"),
                        Field("topic_id", UUID, "5+"),
                        Field("partition_states", Array(_LeaderAndIsrPartitionState), "2+"),
                    ],
                )
            ),
            "2+",
        ),
        Field(
            "live_leaders",
            Array(
                Struct(
                    "LeaderAndIsrLiveLeader",
                    [
                        Field("broker_id", INT32, "0+"),
                        Field("host_name", STRING, "0+"),
                        Field("port", INT32, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

_LeaderAndIsrPartitionError = Struct(
    "LeaderAndIsrPartitionError",
    [
        Field("topic_name", STRING, "0-4"),
        Field("partition_index", INT32, "0+"),
        Field("error_code", INT16, "0+"),
    ],
)

LeaderAndIsrResponse = message(
    ApiKey.LEADER_AND_ISR,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field("partition_errors", Array(_LeaderAndIsrPartitionError), "0-4"),
        Field(
            "topics",
            Array(
                Struct(
                    "LeaderAndIsrTopicError",
                    [
                        Field("topic_id", UUID, "5+"),
                        Field("partition_errors", Array(_LeaderAndIsrPartitionError), "5+"),
                    ],
                )
            ),
            "5+",
        ),
    ],
)

# --------------------------------------------------------------------------
# StopReplica (5)

StopReplicaRequest = message(
    ApiKey.STOP_REPLICA,
    "request",
    [
        Field("controller_id", INT32, "0+"),
        Field("is_kraft_controller", BOOL, "4+", default=False),
        Field("controller_epoch", INT32, "0+"),
        Field("broker_epoch", INT64, "1+", default=-1),
        Field("delete_partitions", BOOL, "0-2"),
        Field(
            "ungrouped_partitions",
            Array(
                Struct(
                    "StopReplicaPartitionV0",
                    [
                        Field("topic_name", STRING, "0"),
                        Field("partition_index", INT32, "0"),
                    ],
                )
            ),
            "0",
        ),
        Field(
            "topics",
            Array(
                Struct(
                    "StopReplicaTopicV1",
                    [
                        Field("name", STRING, "1-2"),
                        Field("partition_indexes", Array(INT32), "1-2"),
                    ],
                )
            ),
            "1-2",
        ),
        Field(
            "topic_states",
            Array(
                Struct(
                    "StopReplicaTopicState",
                    [
                        Field("topic_name", STRING, "3+"),
                        Field(
                            "partition_states",
                            Array(
                                Struct(
                                    "StopReplicaPartitionState",
                                    [
                                        Field("partition_index", INT32, "3+"),
                                        Field("leader_epoch", INT32, "3+", default=-1),
                                        Field("delete_partition", BOOL, "3+"),
                                    ],
                                )
                            ),
                            "3+",
                        ),
                    ],
                )
            ),
            "3+",
        ),
    ],
)

StopReplicaResponse = message(
    ApiKey.STOP_REPLICA,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field(
            "partition_errors",
            Array(
                Struct(
                    "StopReplicaPartitionError",
                    [
                        Field("topic_name", STRING, "0+"),
                        Field("partition_index", INT32, "0+"),
                        Field("error_code", INT16, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

# --------------------------------------------------------------------------
# UpdateMetadata (6)

_UpdateMetadataPartitionState = Struct(
    "UpdateMetadataPartitionState",
    [
        Field("topic_name", STRING, "0-4"),
        Field("partition_index", INT32, "0+"),
        Field("controller_epoch", INT32, "0+"),
        Field("leader", INT32, "0+"),
        Field("leader_epoch", INT32, "0+"),
        Field("isr", Array(INT32), "0+"),
        Field("zk_version", INT32, "0+"),
        Field("replicas", Array(INT32), "0+"),
        Field("offline_replicas", Array(INT32), "4+"),
    ],
)

UpdateMetadataRequest = message(
    ApiKey.UPDATE_METADATA,
    "request",
    [
        Field("controller_id", INT32, "0+"),
        Field("is_kraft_controller", BOOL, "8+", default=False),
        Field("type", INT8, "8+", default=0, tag=0),
        Field("controller_epoch", INT32, "0+"),
        Field("broker_epoch", INT64, "5+", default=-1),
        Field("ungrouped_partition_states", Array(_UpdateMetadataPartitionState), "0-4"),
        Field(
            "topic_states",
            Array(
                Struct(
                    "UpdateMetadataTopicState",
                    [
                        Field("topic_name", STRING, "5+"),
                        Field("topic_id", UUID, "7+"),
                        Field("partition_states", Array(_UpdateMetadataPartitionState), "5+"),
                    ],
                )
            ),
            "5+",
        ),
        Field(
            "live_brokers",
            Array(
                Struct(
                    "UpdateMetadataBroker",
                    [
                        Field("id", INT32, "0+"),
                        Field("v0_host", STRING, "0"),
                        Field("v0_port", INT32, "0"),
                        Field(
                            "endpoints",
                            Array(
                                Struct(
                                    "UpdateMetadataEndpoint",
                                    [
                                        Field("port", INT32, "1+"),
                                        Field("host", STRING, "1+"),
                                        Field("listener", STRING, "3+"),
                                        Field("security_protocol", INT16, "1+"),
                                    ],
                                )
                            ),
                            "1+",
                        ),
                        Field("rack", STRING, "2+", nullable="0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

UpdateMetadataResponse = message(
    ApiKey.UPDATE_METADATA,
    "response",
    [
        Field("error_code", INT16, "0+"),
    ],
)

# --------------------------------------------------------------------------
# ControlledShutdown (7)

ControlledShutdownRequest = message(
    ApiKey.CONTROLLED_SHUTDOWN,
    "request",
    [
        Field("broker_id", INT32, "0+"),
        Field("broker_epoch", INT64, "2+", default=-1),
    ],
)

ControlledShutdownResponse = message(
    ApiKey.CONTROLLED_SHUTDOWN,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field(
            "remaining_partitions",
            Array(
                Struct(
                    "RemainingPartition",
                    [
                        Field("topic_name", STRING, "0+"),
                        Field("partition_index", INT32, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

# --------------------------------------------------------------------------
# AlterPartition (56)

AlterPartitionRequest = message(
    ApiKey.ALTER_PARTITION,
    "request",
    [
        Field("broker_id", INT32, "0+"),
        Field("broker_epoch", INT64, "0+", default=-1),
        Field(
            "topics",
            Array(
                Struct(
                    "TopicData",
                    [
                        Field("topic_name", STRING, "0-1"),
                        Field("topic_id", UUID, "2+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionData",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("leader_epoch", INT32, "0+"),
                                        Field("new_isr", Array(INT32), "0-2"),
                                        Field(
                                            "new_isr_with_epochs",
                                            Array(
                                                Struct(
                                                    "BrokerState",
                                                    [
                                                        Field("broker_id", INT32, "3+"),
                                                        Field(
                                                            "broker_epoch", INT64, "3+", default=-1
                                                        ),
                                                    ],
                                                )
                                            ),
                                            "3+",
                                        ),
                                        Field("leader_recovery_state", INT8, "1+", default=0),
                                        Field("partition_epoch", INT32, "0+"),
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

AlterPartitionResponse = message(
    ApiKey.ALTER_PARTITION,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field(
            "topics",
            Array(
                Struct(
                    "TopicData",
                    [
                        Field("topic_name", STRING, "0-1"),
                        Field("topic_id", UUID, "2+"),
                        Field(
                            "partitions",
                            Array(
                                Struct(
                                    "PartitionData",
                                    [
                                        Field("partition_index", INT32, "0+"),
                                        Field("error_code", INT16, "0+"),
                                        Field("leader_id", INT32, "0+"),
                                        Field("leader_epoch", INT32, "0+"),
                                        Field("isr", Array(INT32), "0+"),
                                        Field("leader_recovery_state", INT8, "1+", default=0),
                                        Field("partition_epoch", INT32, "0+"),
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
