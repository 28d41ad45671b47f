"""The advertised ranges keep real clients' feature gates and version guesses working."""

from __future__ import annotations

import pytest

from broker_py.server.handlers import served_api_keys
from logstore.protocol import ApiKey

K = ApiKey

# librdkafka 2.0.2 (Debian's kcat) enables a feature only if each listed
# range overlaps the broker's advertised range.
LIBRDKAFKA_2_0_2_FEATURES = {
    "MsgVer2": [(K.PRODUCE, 3, 3), (K.FETCH, 4, 4)],
    "ApiVersion": [(K.API_VERSIONS, 0, 0)],
    "BrokerGroupCoordinator": [(K.FIND_COORDINATOR, 0, 0)],
    "BrokerBalancedConsumer": [
        (K.FIND_COORDINATOR, 0, 0),
        (K.OFFSET_COMMIT, 1, 2),
        (K.OFFSET_FETCH, 1, 1),
        (K.JOIN_GROUP, 0, 0),
        (K.SYNC_GROUP, 0, 0),
        (K.HEARTBEAT, 0, 0),
        (K.LEAVE_GROUP, 0, 0),
    ],
    "SaslGssapi": [(K.JOIN_GROUP, 0, 0)],
    "SaslHandshake": [(K.SASL_HANDSHAKE, 0, 0)],
    "LZ4": [(K.FIND_COORDINATOR, 0, 0)],
    "OffsetTime": [(K.LIST_OFFSETS, 1, 1)],
    "IdempotentProducer": [(K.INIT_PRODUCER_ID, 0, 0)],
    "ZSTD": [(K.PRODUCE, 7, 7), (K.FETCH, 10, 10)],
    "SaslAuthReq": [(K.SASL_HANDSHAKE, 1, 1), (K.SASL_AUTHENTICATE, 0, 0)],
}


@pytest.mark.parametrize("feature", sorted(LIBRDKAFKA_2_0_2_FEATURES))
def test_old_librdkafka_feature_gates(feature: str) -> None:
    for key, low, high in LIBRDKAFKA_2_0_2_FEATURES[feature]:
        assert key.min_version <= high and low <= key.max_version, (feature, key.name)


# aiokafka 0.14 picks the highest version it implements inside our range and
# fails when there is none.
AIOKAFKA_0_14_VERSIONS = {
    K.API_VERSIONS: {0, 1, 2},
    K.CREATE_TOPICS: {0, 1, 2, 3},
    K.DELETE_TOPICS: {0, 1, 2, 3},
    K.LIST_GROUPS: {0, 1, 2},
    K.DESCRIBE_GROUPS: {0, 1, 2, 3},
    K.SASL_HANDSHAKE: {0, 1},
    K.DESCRIBE_CONFIGS: {0, 1, 2},
    K.ALTER_CONFIGS: {0, 1},
    K.SASL_AUTHENTICATE: {0, 1},
    K.CREATE_PARTITIONS: {0, 1},
    K.DELETE_GROUPS: {0, 1},
    K.DELETE_RECORDS: {0, 1, 2},
    K.OFFSET_COMMIT: {2, 3},
    K.OFFSET_FETCH: {1, 2, 3},
    K.FIND_COORDINATOR: {0, 1},
    K.FETCH: set(range(1, 12)),
    K.JOIN_GROUP: {0, 1, 2, 5},
    K.SYNC_GROUP: {0, 1, 3},
    K.HEARTBEAT: {0, 1},
    K.LEAVE_GROUP: {0, 1},
    K.METADATA: set(range(6)),
    K.LIST_OFFSETS: {0, 1, 2, 3},
    K.PRODUCE: set(range(8)),
    K.INIT_PRODUCER_ID: {0},
    K.ADD_PARTITIONS_TO_TXN: {0},
    K.ADD_OFFSETS_TO_TXN: {0},
    K.END_TXN: {0},
    K.TXN_OFFSET_COMMIT: {0},
}


@pytest.mark.parametrize("key", sorted(AIOKAFKA_0_14_VERSIONS))
def test_aiokafka_finds_a_version(key: ApiKey) -> None:
    assert any(key.supports(v) for v in AIOKAFKA_0_14_VERSIONS[key])


# kafka-python 3.0 takes the first release, newest first, whose marker
# version lies inside the broker's advertised range.
KAFKA_PYTHON_3_0_MARKERS = [
    ((4, 3), 35, 5),  # DescribeLogDirs
    ((4, 2), K.LIST_OFFSETS, 11),
    ((4, 1), K.PRODUCE, 13),
    ((4, 0), K.LIST_OFFSETS, 10),
    ((3, 9), K.FETCH, 17),
    ((3, 8), K.PRODUCE, 11),
    ((3, 7), K.FETCH, 16),
    ((3, 6), K.ADD_PARTITIONS_TO_TXN, 4),
    ((3, 5), K.FETCH, 15),
    ((3, 4), 4, 7),  # LeaderAndIsr
    ((3, 3), 29, 3),  # DescribeAcls
    ((3, 2), K.JOIN_GROUP, 9),
    ((3, 1), K.FETCH, 13),
    ((3, 0), K.LIST_OFFSETS, 7),
]


def test_kafka_python_identifies_kafka_3_9() -> None:
    # ApiVersions lists the served api keys only, not every one the codec knows
    # (LeaderAndIsr 7, the 3.4 marker, is known but not served).
    served = {int(k): k for k in served_api_keys()}

    def advertised(key: int, version: int) -> bool:
        member = served.get(key)
        return member is not None and member.supports(version)

    guess = next(
        release for release, key, version in KAFKA_PYTHON_3_0_MARKERS if advertised(key, version)
    )
    assert guess == (3, 9)


# Kafka 3.9's own maxima, which kafka-python's (3, 9) guess stands for.
KAFKA_3_9_MAX = {
    K.PRODUCE: 11,
    K.FETCH: 17,
    K.LIST_OFFSETS: 9,
    K.METADATA: 12,
    K.LEADER_AND_ISR: 7,
    K.STOP_REPLICA: 4,
    K.UPDATE_METADATA: 8,
    K.CONTROLLED_SHUTDOWN: 3,
    K.OFFSET_COMMIT: 9,
    K.OFFSET_FETCH: 9,
    K.FIND_COORDINATOR: 6,
    K.JOIN_GROUP: 9,
    K.HEARTBEAT: 4,
    K.LEAVE_GROUP: 5,
    K.SYNC_GROUP: 5,
    K.DESCRIBE_GROUPS: 5,
    K.LIST_GROUPS: 5,
    K.SASL_HANDSHAKE: 1,
    K.API_VERSIONS: 4,
    K.CREATE_TOPICS: 7,
    K.DELETE_TOPICS: 6,
    K.DELETE_RECORDS: 2,
    K.INIT_PRODUCER_ID: 5,
    K.OFFSET_FOR_LEADER_EPOCH: 4,
    K.ADD_PARTITIONS_TO_TXN: 5,
    K.ADD_OFFSETS_TO_TXN: 4,
    K.END_TXN: 4,
    K.WRITE_TXN_MARKERS: 1,
    K.DESCRIBE_ACLS: 3,
    K.CREATE_ACLS: 3,
    K.DELETE_ACLS: 3,
    K.TXN_OFFSET_COMMIT: 4,
    K.DESCRIBE_CONFIGS: 4,
    K.ALTER_CONFIGS: 2,
    K.ALTER_REPLICA_LOG_DIRS: 2,
    K.DESCRIBE_LOG_DIRS: 4,
    K.SASL_AUTHENTICATE: 2,
    K.CREATE_PARTITIONS: 3,
    K.DELETE_GROUPS: 2,
    K.ELECT_LEADERS: 2,
    K.INCREMENTAL_ALTER_CONFIGS: 1,
    K.ALTER_PARTITION_REASSIGNMENTS: 0,
    K.LIST_PARTITION_REASSIGNMENTS: 0,
    K.OFFSET_DELETE: 0,
    K.DESCRIBE_CLIENT_QUOTAS: 1,
    K.ALTER_CLIENT_QUOTAS: 1,
    K.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    K.ALTER_USER_SCRAM_CREDENTIALS: 0,
    K.ALTER_PARTITION: 3,
    K.DESCRIBE_CLUSTER: 1,
    K.DESCRIBE_PRODUCERS: 0,
    K.DESCRIBE_TRANSACTIONS: 0,
    K.LIST_TRANSACTIONS: 1,
    # Kafka 4.1's: the consumer protocol (KIP-848) is a 4.x API.
    K.CONSUMER_GROUP_HEARTBEAT: 1,
    K.CONSUMER_GROUP_DESCRIBE: 1,
    K.GET_TELEMETRY_SUBSCRIPTIONS: 0,
    K.PUSH_TELEMETRY: 0,
    K.LIST_CLIENT_METRICS_RESOURCES: 0,
    K.DESCRIBE_TOPIC_PARTITIONS: 0,
    # Kafka 4.1's: share groups (KIP-932) are a 4.x feature.
    K.SHARE_GROUP_HEARTBEAT: 1,
    K.SHARE_GROUP_DESCRIBE: 1,
    K.SHARE_FETCH: 1,
    K.SHARE_ACKNOWLEDGE: 1,
    K.INITIALIZE_SHARE_GROUP_STATE: 0,
    K.READ_SHARE_GROUP_STATE: 0,
    K.WRITE_SHARE_GROUP_STATE: 0,
    K.DELETE_SHARE_GROUP_STATE: 0,
    K.READ_SHARE_GROUP_STATE_SUMMARY: 0,
    K.DESCRIBE_SHARE_GROUP_OFFSETS: 0,
    K.ALTER_SHARE_GROUP_OFFSETS: 0,
    K.DELETE_SHARE_GROUP_OFFSETS: 0,
}


def test_maxima_are_kafka_3_9() -> None:
    assert {k: k.max_version for k in ApiKey} == KAFKA_3_9_MAX


def test_header_versions() -> None:
    assert K.FETCH.request_header_version(11) == 1
    assert K.FETCH.request_header_version(12) == 2
    assert K.FETCH.response_header_version(12) == 1
    assert K.SASL_HANDSHAKE.request_header_version(1) == 1
    assert K.DESCRIBE_CLUSTER.response_header_version(0) == 1
    for version in range(5):
        assert K.API_VERSIONS.response_header_version(version) == 0
    assert K.API_VERSIONS.request_header_version(3) == 2


def test_lookup() -> None:
    assert ApiKey.lookup(1) is K.FETCH
    assert ApiKey.lookup(4) is K.LEADER_AND_ISR  # known to the codec, not served
    assert ApiKey.lookup(38) is None  # CreateDelegationToken: unknown
    assert K.FETCH.api_name == "Fetch"
