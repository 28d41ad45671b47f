"""The APIs the codec speaks and the version ranges it accepts.

Each :class:`ApiKey` member carries the Kafka api key id, Kafka's name for
the API, the lowest and highest version the codec accepts (decodes and
encodes; a request outside it is an ``UnsupportedRequest``), and the first
flexible version (compact encodings, tagged fields, request header v2 /
response header v1), or ``None`` when no accepted version is flexible.

A member is not by itself advertised: the broker's ApiVersions lists only
the api keys that have a handler
(``broker_py.server.handlers.served_api_keys``), with these ranges.  The
controller-to-broker and broker-to-controller APIs (LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition) are here
so that brokers can talk to each other with the same codec.

How the ranges were chosen
--------------------------

**Maximum: exactly Apache Kafka 3.9's.**  kafka-python 3.0 does not ask the
broker its release; it walks a table from newest to oldest and takes the
first release whose marker version lies inside our advertised range
(ListOffsets 10 means 4.0, Fetch 17 means 3.9, Produce 11 means 3.8,
Fetch 16 means 3.7, ...).  Advertising Kafka 3.9's maxima (Fetch 17,
ListOffsets 9) makes it identify the broker as 3.9, and every other range
matches what that guess implies.  3.9 is also the last release with
ZooKeeper-based clustering, which is the cluster model logstore follows.
Versions newer than 3.9's (Produce 12-13, Fetch 18, ListOffsets 10-11,
Metadata 13, OffsetCommit/OffsetFetch 10, DescribeGroups 6, DescribeCluster
2, InitProducerId 6) belong to 4.x features (transactions v2, rebootstrap,
the new group protocol), and advertising ListOffsets 10 alone would make
kafka-python take us for 4.0.

What the clients send with these maxima (client's highest → version used
when we cap it):

=================  ===============  ============  =================
API                librdkafka 2.1x  kafka-python  aiokafka 0.14
=================  ===============  ============  =================
Produce            10               9             7
Fetch              16               12            11
ListOffsets        7                11 → 9        3
Metadata           13 → 12          13 → 12       5
OffsetCommit       9                8             3
OffsetFetch        9                8             3
JoinGroup          5                7             5
ApiVersions        3                4             0
=================  ===============  ============  =================

Only Metadata (v13 adds just a top-level error code, for 4.0's rebootstrap)
and ListOffsets (v10 async remote-storage lookups, v11 tiered-storage
offsets) are capped, both by 4.x-only additions.  Every advertised version
is one a broker with topic ids can implement: Fetch 13+ and Metadata 10+
carry topic ids, Fetch 7+ fetch sessions may always be answered
sessionless (session id 0), and the 15+/16+/17 additions are tagged or
follower-only fields.

The one exception: ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848's
consumer protocol) exist at Kafka 4.1's ranges (0-1 each); a client uses the
consumer protocol (``group.protocol=consumer``) only when the broker advertises them.
So do the share-group APIs (KIP-932, 4.x only): ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch and ShareAcknowledge at 1 (4.0's early-access version 0 is gone in 4.1; it is
what librdkafka 2.16 sends), the share coordinator's state APIs (83-87) and the share
group offset APIs (90-92) at 0.

**Minimum: exactly Apache Kafka 3.9's (0 for every API).**  Kafka 4.0
removed the versions older clients still send (KIP-896); 3.9 serves them
all, and so does logstore:

* Produce 0-2 and Fetch 0-3 carry message format v0/v1 ("message sets").
  The log stores only RecordBatch v2: old messages are converted on append
  and stored batches are converted down on fetch (``rust/src/legacy_records.rs``).
* ListOffsets 0 (``max_num_offsets`` in, ``old_style_offsets`` out),
  OffsetCommit 0-1 (v1 with a per-partition ``commit_timestamp``),
  OffsetFetch 0, CreateTopics 0-1, DeleteTopics 0, DescribeConfigs 0
  (``is_default``), OffsetForLeaderEpoch 0-1, DescribeLogDirs 0,
  AlterReplicaLogDirs 0, WriteTxnMarkers 0.
* ControlledShutdown 0 travels with request header v0, which has no client
  id (Kafka's ``requestHeaderVersion`` returns 0 for it alone).

librdkafka before 2.11 enables a feature only when each of its "depends"
ranges overlaps ours (message format v2 needs Produce 3 and Fetch 4; zstd
Produce 7 and Fetch 10; consumer groups FindCoordinator 0, OffsetCommit
1..2, OffsetFetch 1, JoinGroup/SyncGroup/Heartbeat/LeaveGroup 0; ...); with
every minimum at 0 each range overlaps.  Clients pick the highest version
both sides serve, so lowering a minimum changes nothing for a client that
asks ApiVersions first.

**Inter-broker APIs: Kafka 3.9's whole range**: LeaderAndIsr 0-7,
StopReplica 0-4, UpdateMetadata 0-8, AlterPartition 0-3, ControlledShutdown
0-3.  Kafka's ZooKeeper controller picks the version from
``inter.broker.protocol.version`` (3.4+ sends LeaderAndIsr 7, UpdateMetadata
8, StopReplica 4), so every version stays receivable.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    """``NAME = id, kafka name, min version, max version, first flexible version``."""

    api_name: str
    min_version: int
    max_version: int
    first_flexible: int | None

    def __new__(
        cls, key: int, api_name: str, min_version: int, max_version: int, first_flexible: int | None
    ) -> ApiKey:
        member = int.__new__(cls, key)
        member._value_ = key
        member.api_name = api_name
        member.min_version = min_version
        member.max_version = max_version
        member.first_flexible = first_flexible
        return member

    PRODUCE = 0, "Produce", 0, 11, 9
    FETCH = 1, "Fetch", 0, 17, 12
    LIST_OFFSETS = 2, "ListOffsets", 0, 9, 6
    METADATA = 3, "Metadata", 0, 12, 9
    LEADER_AND_ISR = 4, "LeaderAndIsr", 0, 7, 4
    STOP_REPLICA = 5, "StopReplica", 0, 4, 2
    UPDATE_METADATA = 6, "UpdateMetadata", 0, 8, 6
    CONTROLLED_SHUTDOWN = 7, "ControlledShutdown", 0, 3, 3
    OFFSET_COMMIT = 8, "OffsetCommit", 0, 9, 8
    OFFSET_FETCH = 9, "OffsetFetch", 0, 9, 6
    FIND_COORDINATOR = 10, "FindCoordinator", 0, 6, 3
    JOIN_GROUP = 11, "JoinGroup", 0, 9, 6
    HEARTBEAT = 12, "Heartbeat", 0, 4, 4
    LEAVE_GROUP = 13, "LeaveGroup", 0, 5, 4
    SYNC_GROUP = 14, "SyncGroup", 0, 5, 4
    DESCRIBE_GROUPS = 15, "DescribeGroups", 0, 5, 5
    LIST_GROUPS = 16, "ListGroups", 0, 5, 3
    SASL_HANDSHAKE = 17, "SaslHandshake", 0, 1, None
    API_VERSIONS = 18, "ApiVersions", 0, 4, 3
    CREATE_TOPICS = 19, "CreateTopics", 0, 7, 5
    DELETE_TOPICS = 20, "DeleteTopics", 0, 6, 4
    DELETE_RECORDS = 21, "DeleteRecords", 0, 2, 2
    INIT_PRODUCER_ID = 22, "InitProducerId", 0, 5, 2
    OFFSET_FOR_LEADER_EPOCH = 23, "OffsetForLeaderEpoch", 0, 4, 4
    ADD_PARTITIONS_TO_TXN = 24, "AddPartitionsToTxn", 0, 5, 3
    ADD_OFFSETS_TO_TXN = 25, "AddOffsetsToTxn", 0, 4, 3
    END_TXN = 26, "EndTxn", 0, 4, 3
    WRITE_TXN_MARKERS = 27, "WriteTxnMarkers", 0, 1, 1
    TXN_OFFSET_COMMIT = 28, "TxnOffsetCommit", 0, 4, 3
    DESCRIBE_ACLS = 29, "DescribeAcls", 0, 3, 2
    CREATE_ACLS = 30, "CreateAcls", 0, 3, 2
    DELETE_ACLS = 31, "DeleteAcls", 0, 3, 2
    DESCRIBE_CONFIGS = 32, "DescribeConfigs", 0, 4, 4
    ALTER_CONFIGS = 33, "AlterConfigs", 0, 2, 2
    ALTER_REPLICA_LOG_DIRS = 34, "AlterReplicaLogDirs", 0, 2, 2
    DESCRIBE_LOG_DIRS = 35, "DescribeLogDirs", 0, 4, 2
    SASL_AUTHENTICATE = 36, "SaslAuthenticate", 0, 2, 2
    CREATE_PARTITIONS = 37, "CreatePartitions", 0, 3, 2
    DELETE_GROUPS = 42, "DeleteGroups", 0, 2, 2
    ELECT_LEADERS = 43, "ElectLeaders", 0, 2, 2
    INCREMENTAL_ALTER_CONFIGS = 44, "IncrementalAlterConfigs", 0, 1, 1
    ALTER_PARTITION_REASSIGNMENTS = 45, "AlterPartitionReassignments", 0, 0, 0
    LIST_PARTITION_REASSIGNMENTS = 46, "ListPartitionReassignments", 0, 0, 0
    OFFSET_DELETE = 47, "OffsetDelete", 0, 0, None
    DESCRIBE_CLIENT_QUOTAS = 48, "DescribeClientQuotas", 0, 1, 1
    ALTER_CLIENT_QUOTAS = 49, "AlterClientQuotas", 0, 1, 1
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50, "DescribeUserScramCredentials", 0, 0, 0
    ALTER_USER_SCRAM_CREDENTIALS = 51, "AlterUserScramCredentials", 0, 0, 0
    ALTER_PARTITION = 56, "AlterPartition", 0, 3, 0
    DESCRIBE_CLUSTER = 60, "DescribeCluster", 0, 1, 0
    DESCRIBE_PRODUCERS = 61, "DescribeProducers", 0, 0, 0
    DESCRIBE_TRANSACTIONS = 65, "DescribeTransactions", 0, 0, 0
    LIST_TRANSACTIONS = 66, "ListTransactions", 0, 1, 0
    CONSUMER_GROUP_HEARTBEAT = 68, "ConsumerGroupHeartbeat", 0, 1, 0
    CONSUMER_GROUP_DESCRIBE = 69, "ConsumerGroupDescribe", 0, 1, 0
    GET_TELEMETRY_SUBSCRIPTIONS = 71, "GetTelemetrySubscriptions", 0, 0, 0
    PUSH_TELEMETRY = 72, "PushTelemetry", 0, 0, 0
    LIST_CLIENT_METRICS_RESOURCES = 74, "ListClientMetricsResources", 0, 0, 0
    DESCRIBE_TOPIC_PARTITIONS = 75, "DescribeTopicPartitions", 0, 0, 0
    SHARE_GROUP_HEARTBEAT = 76, "ShareGroupHeartbeat", 1, 1, 1
    SHARE_GROUP_DESCRIBE = 77, "ShareGroupDescribe", 1, 1, 1
    SHARE_FETCH = 78, "ShareFetch", 1, 1, 0
    SHARE_ACKNOWLEDGE = 79, "ShareAcknowledge", 1, 1, 0
    INITIALIZE_SHARE_GROUP_STATE = 83, "InitializeShareGroupState", 0, 0, 0
    READ_SHARE_GROUP_STATE = 84, "ReadShareGroupState", 0, 0, 0
    WRITE_SHARE_GROUP_STATE = 85, "WriteShareGroupState", 0, 0, 0
    DELETE_SHARE_GROUP_STATE = 86, "DeleteShareGroupState", 0, 0, 0
    READ_SHARE_GROUP_STATE_SUMMARY = 87, "ReadShareGroupStateSummary", 0, 0, 0
    DESCRIBE_SHARE_GROUP_OFFSETS = 90, "DescribeShareGroupOffsets", 0, 0, 0
    ALTER_SHARE_GROUP_OFFSETS = 91, "AlterShareGroupOffsets", 0, 0, 0
    DELETE_SHARE_GROUP_OFFSETS = 92, "DeleteShareGroupOffsets", 0, 0, 0

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible

    def request_header_version(self, version: int) -> int:
        """Request header v2 (with tagged fields) for flexible versions, else v1;
        v0 (no client id) for ControlledShutdown v0 alone, as in Kafka."""
        if self is ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Response header v1 for flexible versions, else v0.

        ApiVersions always answers with header v0: a client that does not
        yet know which versions the broker speaks must be able to read the
        response (and its error code) whatever version it asked for.
        """
        if self is ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0

    @classmethod
    def lookup(cls, key: int) -> ApiKey | None:
        """The member for an api key id, or ``None`` if the codec does not know it
        (whether the broker serves it is ``served_api_keys``' business)."""
        return _BY_ID.get(key)


_BY_ID = {int(k): k for k in ApiKey}
