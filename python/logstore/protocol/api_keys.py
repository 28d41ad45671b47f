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

**Minimum: Kafka 4.x's baseline (KIP-896) where it keeps old clients
working, lower where they need it.**  librdkafka before 2.11 enables a
feature only when each of its "depends" ranges overlaps ours: message
format v2 needs Produce 3 and Fetch 4; zstd Produce 7 and Fetch 10;
consumer groups FindCoordinator 0, OffsetCommit 1..2, OffsetFetch 1,
JoinGroup/SyncGroup/Heartbeat/LeaveGroup 0; time-based offsets
ListOffsets 1; idempotence InitProducerId 0; SASL SaslHandshake 0 and 1
and SaslAuthenticate 0.  aiokafka 0.14 only has some old versions
(CreateTopics 0-3, DeleteTopics 0-3, DescribeConfigs 0-2, OffsetCommit 2-3,
OffsetFetch 1-3, ListOffsets 0-3, Metadata 0-5, InitProducerId and the
transaction APIs 0 only), and fails when our range misses all of them.
Hence:

* Produce 3, Fetch 4: the broker stores only RecordBatch v2 (magic 2), the
  format of Produce 3+ and Fetch 4+; older versions would need message
  format v0/v1 conversion.
* ListOffsets 1 (v0 has the legacy ``max_num_offsets`` list), OffsetCommit
  2 (v0-1 carry ZooKeeper-era semantics and a per-partition timestamp),
  OffsetFetch 1, CreateTopics 2, DeleteTopics 1, DescribeConfigs 1,
  OffsetForLeaderEpoch 2: Kafka 4.0's minima, each still inside every
  client's range above.
* JoinGroup 0 (Kafka 4.0 raised it to 2; 4.1 restored 0, which librdkafka
  before 2.11 needs for consumer groups), and 0 for every other API.
* WriteTxnMarkers 1 only: it is broker-to-broker, and 1 is its only
  flexible version.
* DescribeLogDirs 1 and AlterReplicaLogDirs 1: Kafka 4.0's minima; no client
  above sends 0. DescribeLogDirs stops at 4: kafka-python takes 5 for Kafka 4.3.

**Inter-broker APIs: Kafka 3.9's whole range**: LeaderAndIsr 0-7,
StopReplica 0-4, UpdateMetadata 0-8, AlterPartition 0-3.  Kafka's ZooKeeper
controller picks the version from ``inter.broker.protocol.version`` (3.4+
sends LeaderAndIsr 7, UpdateMetadata 8, StopReplica 4), so every version
stays receivable.  ControlledShutdown is 1-3, not 0-3: its v0 request
travels with request header v0, which has no client id (Kafka's
``requestHeaderVersion`` returns 0 for ControlledShutdown v0 only), and
``headers`` reads and writes header v1 and v2 only.  Only brokers with an
inter-broker protocol older than 0.9.0 send v0 (2.4+ send v3); the v0 body
equals v1's, so the schema declares it all the same.
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

    PRODUCE = 0, "Produce", 3, 11, 9
    FETCH = 1, "Fetch", 4, 17, 12
    LIST_OFFSETS = 2, "ListOffsets", 1, 9, 6
    METADATA = 3, "Metadata", 0, 12, 9
    LEADER_AND_ISR = 4, "LeaderAndIsr", 0, 7, 4
    STOP_REPLICA = 5, "StopReplica", 0, 4, 2
    UPDATE_METADATA = 6, "UpdateMetadata", 0, 8, 6
    CONTROLLED_SHUTDOWN = 7, "ControlledShutdown", 1, 3, 3
    OFFSET_COMMIT = 8, "OffsetCommit", 2, 9, 8
    OFFSET_FETCH = 9, "OffsetFetch", 1, 9, 6
    FIND_COORDINATOR = 10, "FindCoordinator", 0, 6, 3
    JOIN_GROUP = 11, "JoinGroup", 0, 9, 6
    HEARTBEAT = 12, "Heartbeat", 0, 4, 4
    LEAVE_GROUP = 13, "LeaveGroup", 0, 5, 4
    SYNC_GROUP = 14, "SyncGroup", 0, 5, 4
    DESCRIBE_GROUPS = 15, "DescribeGroups", 0, 5, 5
    LIST_GROUPS = 16, "ListGroups", 0, 5, 3
    SASL_HANDSHAKE = 17, "SaslHandshake", 0, 1, None
    API_VERSIONS = 18, "ApiVersions", 0, 4, 3
    CREATE_TOPICS = 19, "CreateTopics", 2, 7, 5
    DELETE_TOPICS = 20, "DeleteTopics", 1, 6, 4
    DELETE_RECORDS = 21, "DeleteRecords", 0, 2, 2
    INIT_PRODUCER_ID = 22, "InitProducerId", 0, 5, 2
    OFFSET_FOR_LEADER_EPOCH = 23, "OffsetForLeaderEpoch", 2, 4, 4
    ADD_PARTITIONS_TO_TXN = 24, "AddPartitionsToTxn", 0, 5, 3
    ADD_OFFSETS_TO_TXN = 25, "AddOffsetsToTxn", 0, 4, 3
    END_TXN = 26, "EndTxn", 0, 4, 3
    WRITE_TXN_MARKERS = 27, "WriteTxnMarkers", 1, 1, 1
    TXN_OFFSET_COMMIT = 28, "TxnOffsetCommit", 0, 4, 3
    DESCRIBE_ACLS = 29, "DescribeAcls", 0, 3, 2
    CREATE_ACLS = 30, "CreateAcls", 0, 3, 2
    DELETE_ACLS = 31, "DeleteAcls", 0, 3, 2
    DESCRIBE_CONFIGS = 32, "DescribeConfigs", 1, 4, 4
    ALTER_CONFIGS = 33, "AlterConfigs", 0, 2, 2
    ALTER_REPLICA_LOG_DIRS = 34, "AlterReplicaLogDirs", 1, 2, 2
    DESCRIBE_LOG_DIRS = 35, "DescribeLogDirs", 1, 4, 2
    SASL_AUTHENTICATE = 36, "SaslAuthenticate", 0, 2, 2
    CREATE_PARTITIONS = 37, "CreatePartitions", 0, 3, 2
    DELETE_GROUPS = 42, "DeleteGroups", 0, 2, 2
    ELECT_LEADERS = 43, "ElectLeaders", 0, 2, 2
    INCREMENTAL_ALTER_CONFIGS = 44, "IncrementalAlterConfigs", 0, 1, 1
    ALTER_PARTITION_REASSIGNMENTS = 45, "AlterPartitionReassignments", 0, 0, 0
    LIST_PARTITION_REASSIGNMENTS = 46, "ListPartitionReassignments", 0, 0, 0
    OFFSET_DELETE = 47, "OffsetDelete", 0, 0, None
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50, "DescribeUserScramCredentials", 0, 0, 0
    ALTER_USER_SCRAM_CREDENTIALS = 51, "AlterUserScramCredentials", 0, 0, 0
    ALTER_PARTITION = 56, "AlterPartition", 0, 3, 0
    DESCRIBE_CLUSTER = 60, "DescribeCluster", 0, 1, 0
    DESCRIBE_PRODUCERS = 61, "DescribeProducers", 0, 0, 0
    DESCRIBE_TRANSACTIONS = 65, "DescribeTransactions", 0, 0, 0
    LIST_TRANSACTIONS = 66, "ListTransactions", 0, 1, 0

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible

    def request_header_version(self, version: int) -> int:
        """Request header v2 (with tagged fields) for flexible versions, else v1."""
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
