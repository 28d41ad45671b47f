"""Golden bytes of the versions Kafka 3.9 serves and Kafka 4.0 removed (KIP-896): each
request is assembled by hand from Kafka's message definitions, decoded, checked field by
field and written back byte for byte; each response is built, written and compared
with its hand-assembled bytes, then read back.

Produce v0-v2 and Fetch v0-v3 carry message format v0/v1; their record bytes here are
hand-checked message sets (CRC-32 values from zlib, equal to what kafka-python's
LegacyRecordBatchBuilder writes).
"""

from __future__ import annotations

import pytest

from logstore.protocol import (
    ApiKey,
    RequestDecoder,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
)
from logstore.protocol.frame import Request
from logstore.protocol.messages import request_class, response_class
from logstore.protocol.produce_frame import ProduceFrame

from .fixtures import array, frame, i8, i16, i32, i64, nbytes, request_header_v1, string

# One magic 0 entry at offset 5: key "k", value "vv"; crc 0x89e88014.
V0_MESSAGE = (
    i64(5) + i32(17) + bytes.fromhex("89e88014") + b"\x00\x00" + nbytes(b"k") + nbytes(b"vv")
)
# One magic 1 entry at offset 0: timestamp 1000, LogAppendTime, null key, value "x"; crc 0xf95fefa1.
V1_MESSAGE = (
    i64(0)
    + i32(23)
    + bytes.fromhex("f95fefa1")
    + b"\x01\x08"
    + i64(1000)
    + nbytes(None)
    + nbytes(b"x")
)


def _decode(
    key: ApiKey, version: int, body: bytes, client_id: str | None = "old"
) -> Request | ProduceFrame:
    data = frame(request_header_v1(key, version, 11, client_id) + body)
    decoder = RequestDecoder()
    decoder.receive_data(data)
    event = decoder.next_request()
    assert isinstance(event, (Request, ProduceFrame)), event
    assert (event.api_version, event.correlation_id) == (version, 11)
    header = RequestHeader(
        api_key=int(key), api_version=version, correlation_id=11, client_id=client_id
    )
    assert encode_request(header, event.body) == data  # written back byte for byte
    return event


def _respond(key: ApiKey, version: int, body, expected: bytes) -> None:
    data = encode_response(11, key, version, body)
    assert data == frame(i32(11) + expected)
    assert decode_response(data[4:], key, version) == (11, body), "read back as written"


# --- Produce v0-v2 / Fetch v0-v3 (message format v0/v1) ---------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_request(version: int) -> None:
    records = V0_MESSAGE if version < 2 else V1_MESSAGE
    body = i16(-1) + i32(1500) + array([string("t") + array([i32(3) + nbytes(records)])])
    event = _decode(ApiKey.PRODUCE, version, body)
    assert isinstance(event, ProduceFrame)  # the in-place reader takes every version
    ((name, ((index, start, end, _),)),) = event.topics
    assert (name, index, event.acks, event.timeout_ms, event.transactional_id) == (
        "t",
        3,
        -1,
        1500,
        None,
    )
    assert event.records(start, end) == records
    decoded = event.body
    assert bytes(decoded.topic_data[0].partition_data[0].records) == records


@pytest.mark.parametrize(("version", "extra"), [(0, b""), (1, i32(0)), (2, i32(0))])
def test_produce_v0_to_v2_response(version: int, extra: bytes) -> None:
    R = response_class(ApiKey.PRODUCE)
    body = R(
        responses=[
            R.TopicProduceResponse(
                name="t",
                partition_responses=[
                    R.PartitionProduceResponse(
                        index=3,
                        error_code=0,
                        base_offset=42,
                        log_append_time_ms=1000 if version >= 2 else -1,
                    ),
                ],
            )
        ],
        throttle_time_ms=0,
    )
    partition = i32(3) + i16(0) + i64(42) + (i64(1000) if version >= 2 else b"")
    _respond(ApiKey.PRODUCE, version, body, array([string("t") + array([partition])]) + extra)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_request(version: int) -> None:
    body = i32(-1) + i32(500) + i32(1) + (i32(1 << 20) if version >= 3 else b"")
    body += array([string("t") + array([i32(0) + i64(7) + i32(65536)])])
    event = _decode(ApiKey.FETCH, version, body)
    b = event.body
    assert (b.replica_id, b.max_wait_ms, b.min_bytes) == (-1, 500, 1)
    assert b.max_bytes == (1 << 20 if version >= 3 else 2147483647)
    p = b.topics[0].partitions[0]
    assert (b.topics[0].topic, p.partition, p.fetch_offset, p.partition_max_bytes) == (
        "t",
        0,
        7,
        65536,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_response(version: int) -> None:
    R = response_class(ApiKey.FETCH)
    records = V0_MESSAGE if version < 2 else V1_MESSAGE
    body = R(
        throttle_time_ms=0,
        responses=[
            R.FetchableTopicResponse(
                topic="t",
                partitions=[
                    R.PartitionData(
                        partition_index=0, error_code=0, high_watermark=9, records=records
                    ),
                ],
            )
        ],
    )
    throttle = i32(0) if version >= 1 else b""
    partition = i32(0) + i16(0) + i64(9) + nbytes(records)  # no last_stable_offset, no aborted list
    _respond(ApiKey.FETCH, version, body, throttle + array([string("t") + array([partition])]))


def test_fetch_v0_response_through_the_native_encoder() -> None:
    import logstore

    head, records_at = logstore.encode_fetch_response(
        11, 0, 0, 0, [("t", 0, [(0, 0, 9, -1, -1, None, len(V0_MESSAGE), -1, None, None)])]
    )
    assert head + V0_MESSAGE == frame(
        i32(11) + array([string("t") + array([i32(0) + i16(0) + i64(9) + nbytes(V0_MESSAGE)])])
    )
    assert records_at == [len(head)]


# --- ListOffsets v0 ------------------------------------------------------------------------


def test_list_offsets_v0_request_and_response() -> None:
    body = i32(-1) + array([string("t") + array([i32(0) + i64(-1) + i32(3)])])
    b = _decode(ApiKey.LIST_OFFSETS, 0, body).body
    p = b.topics[0].partitions[0]
    assert (b.replica_id, p.partition_index, p.timestamp, p.max_num_offsets) == (-1, 0, -1, 3)
    R = response_class(ApiKey.LIST_OFFSETS)
    resp = R(
        topics=[
            R.ListOffsetsTopicResponse(
                name="t",
                partitions=[
                    R.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=0, old_style_offsets=[20, 10, 0]
                    ),
                ],
            )
        ]
    )
    _respond(
        ApiKey.LIST_OFFSETS,
        0,
        resp,
        array([string("t") + array([i32(0) + i16(0) + array([i64(20), i64(10), i64(0)])])]),
    )


# --- OffsetCommit v0-v1, OffsetFetch v0 -----------------------------------------------------


def test_offset_commit_v0_request() -> None:
    body = string("g") + array([string("t") + array([i32(1) + i64(44) + string("meta")])])
    b = _decode(ApiKey.OFFSET_COMMIT, 0, body).body
    p = b.topics[0].partitions[0]
    assert (b.group_id, b.generation_id_or_member_epoch, b.member_id) == ("g", -1, "")
    assert (p.partition_index, p.committed_offset, p.committed_metadata, p.commit_timestamp) == (
        1,
        44,
        "meta",
        -1,
    )


def test_offset_commit_v1_request_carries_a_commit_timestamp() -> None:
    body = (
        string("g")
        + i32(3)
        + string("m-1")
        + array([string("t") + array([i32(1) + i64(44) + i64(1234) + string(None)])])
    )
    b = _decode(ApiKey.OFFSET_COMMIT, 1, body).body
    p = b.topics[0].partitions[0]
    assert (b.generation_id_or_member_epoch, b.member_id, b.retention_time_ms) == (3, "m-1", -1)
    assert (p.committed_offset, p.commit_timestamp, p.committed_metadata) == (44, 1234, None)


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1_response(version: int) -> None:
    R = response_class(ApiKey.OFFSET_COMMIT)
    resp = R(
        topics=[
            R.OffsetCommitResponseTopic(
                name="t",
                partitions=[R.OffsetCommitResponsePartition(partition_index=1, error_code=25)],
            )
        ]
    )
    _respond(ApiKey.OFFSET_COMMIT, version, resp, array([string("t") + array([i32(1) + i16(25)])]))


def test_offset_fetch_v0_request_and_response() -> None:
    b = _decode(
        ApiKey.OFFSET_FETCH, 0, string("g") + array([string("t") + array([i32(0), i32(2)])])
    ).body
    assert (b.group_id, b.topics[0].name, b.topics[0].partition_indexes) == ("g", "t", [0, 2])
    R = response_class(ApiKey.OFFSET_FETCH)
    resp = R(
        topics=[
            R.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    R.OffsetFetchResponsePartition(
                        partition_index=0, committed_offset=44, metadata="", error_code=0
                    ),
                ],
            )
        ]
    )
    # v0 has no throttle time and no top-level error code.
    _respond(
        ApiKey.OFFSET_FETCH,
        0,
        resp,
        array([string("t") + array([i32(0) + i64(44) + string("") + i16(0)])]),
    )


# --- CreateTopics v0-v1, DeleteTopics v0 ---------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_create_topics_v0_v1(version: int) -> None:
    topic = (
        string("t")
        + i32(2)
        + i16(1)
        + array([])
        + array([string("cleanup.policy") + string("compact")])
    )
    body = array([topic]) + i32(5000) + (i8(1) if version == 1 else b"")
    b = _decode(ApiKey.CREATE_TOPICS, version, body).body
    t = b.topics[0]
    assert (t.name, t.num_partitions, t.replication_factor, b.timeout_ms) == ("t", 2, 1, 5000)
    assert [(c.name, c.value) for c in t.configs] == [("cleanup.policy", "compact")]
    assert b.validate_only is (version == 1)
    R = response_class(ApiKey.CREATE_TOPICS)
    # v0 has no error message: it reads back as the field's default, "".
    resp = R(
        topics=[
            R.CreatableTopicResult(
                name="t", error_code=36, error_message="exists" if version else ""
            )
        ]
    )
    _respond(
        ApiKey.CREATE_TOPICS,
        version,
        resp,
        array([string("t") + i16(36) + (string("exists") if version else b"")]),
    )


def test_delete_topics_v0() -> None:
    b = _decode(ApiKey.DELETE_TOPICS, 0, array([string("a"), string("__events")]) + i32(3000)).body
    assert (b.topic_names, b.timeout_ms) == (["a", "__events"], 3000)
    R = response_class(ApiKey.DELETE_TOPICS)
    resp = R(
        responses=[
            R.DeletableTopicResult(name="a", error_code=0),
            R.DeletableTopicResult(name="__events", error_code=3),
        ]
    )
    _respond(
        ApiKey.DELETE_TOPICS, 0, resp, array([string("a") + i16(0), string("__events") + i16(3)])
    )


# --- DescribeConfigs v0 ----------------------------------------------------------------------


def test_describe_configs_v0() -> None:
    b = _decode(ApiKey.DESCRIBE_CONFIGS, 0, array([i8(2) + string("t") + i32(-1)])).body
    r = b.resources[0]
    assert (r.resource_type, r.resource_name, r.configuration_keys) == (2, "t", None)
    R = response_class(ApiKey.DESCRIBE_CONFIGS)
    resp = R(
        throttle_time_ms=0,
        results=[
            R.DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=2,
                resource_name="t",
                configs=[
                    R.DescribeConfigsResourceResult(
                        name="retention.ms",
                        value="604800000",
                        read_only=False,
                        is_default=True,
                        is_sensitive=False,
                    ),
                ],
            )
        ],
    )
    config = (
        string("retention.ms") + string("604800000") + i8(0) + i8(1) + i8(0)
    )  # read_only, is_default, is_sensitive
    _respond(
        ApiKey.DESCRIBE_CONFIGS,
        0,
        resp,
        i32(0) + array([i16(0) + string(None) + i8(2) + string("t") + array([config])]),
    )


# --- OffsetForLeaderEpoch v0-v1 ------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_v1(version: int) -> None:
    b = _decode(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, version, array([string("t") + array([i32(0) + i32(4)])])
    ).body
    p = b.topics[0].partitions[0]
    assert (b.replica_id, p.partition, p.leader_epoch, p.current_leader_epoch) == (-2, 0, 4, -1)
    R = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    resp = R(
        topics=[
            R.OffsetForLeaderTopicResult(
                topic="t",
                partitions=[
                    R.EpochEndOffset(
                        error_code=0, partition=0, leader_epoch=4 if version else -1, end_offset=100
                    ),
                ],
            )
        ]
    )
    partition = i16(0) + i32(0) + (i32(4) if version else b"") + i64(100)
    _respond(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, version, resp, array([string("t") + array([partition])])
    )


# --- WriteTxnMarkers v0, log dirs v0, ControlledShutdown v0 -----------------------------------


def test_write_txn_markers_v0() -> None:
    marker = i64(9) + i16(1) + i8(1) + array([string("t") + array([i32(0)])]) + i32(2)
    b = _decode(ApiKey.WRITE_TXN_MARKERS, 0, array([marker])).body
    m = b.markers[0]
    assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (
        9,
        1,
        True,
        2,
    )
    R = response_class(ApiKey.WRITE_TXN_MARKERS)
    resp = R(
        markers=[
            R.WritableTxnMarkerResult(
                producer_id=9,
                topics=[
                    R.WritableTxnMarkerTopicResult(
                        name="t",
                        partitions=[
                            R.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
                        ],
                    )
                ],
            )
        ]
    )
    _respond(
        ApiKey.WRITE_TXN_MARKERS,
        0,
        resp,
        array([i64(9) + array([string("t") + array([i32(0) + i16(0)])])]),
    )


def test_describe_log_dirs_v0() -> None:
    b = _decode(ApiKey.DESCRIBE_LOG_DIRS, 0, array([string("t") + array([i32(0)])])).body
    assert (b.topics[0].topic, b.topics[0].partitions) == ("t", [0])
    R = response_class(ApiKey.DESCRIBE_LOG_DIRS)
    resp = R(
        throttle_time_ms=0,
        results=[
            R.DescribeLogDirsResult(
                error_code=0,
                log_dir="/d",
                topics=[
                    R.DescribeLogDirsTopic(
                        name="t",
                        partitions=[
                            R.DescribeLogDirsPartition(
                                partition_index=0,
                                partition_size=77,
                                offset_lag=0,
                                is_future_key=False,
                            ),
                        ],
                    )
                ],
            )
        ],
    )
    partition = i32(0) + i64(77) + i64(0) + i8(0)
    _respond(
        ApiKey.DESCRIBE_LOG_DIRS,
        0,
        resp,
        i32(0) + array([i16(0) + string("/d") + array([string("t") + array([partition])])]),
    )


def test_alter_replica_log_dirs_v0() -> None:
    b = _decode(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        0,
        array([string("/d2") + array([string("t") + array([i32(0), i32(1)])])]),
    ).body
    assert (b.dirs[0].path, b.dirs[0].topics[0].name, b.dirs[0].topics[0].partitions) == (
        "/d2",
        "t",
        [0, 1],
    )
    R = response_class(ApiKey.ALTER_REPLICA_LOG_DIRS)
    resp = R(
        throttle_time_ms=0,
        results=[
            R.AlterReplicaLogDirTopicResult(
                topic_name="t",
                partitions=[
                    R.AlterReplicaLogDirPartitionResult(partition_index=0, error_code=57),
                ],
            )
        ],
    )
    _respond(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        0,
        resp,
        i32(0) + array([string("t") + array([i32(0) + i16(57)])]),
    )


# KIP-932's client APIs start at version 1: Kafka 4.1 removed the early-access version 0.
STARTING_AT_1 = {
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
}


def test_every_version_kafka_3_9_serves_is_decodable() -> None:
    """Every api key's whole range starts at Kafka's minimum: 0, but 1 for the share-group
    client APIs (Kafka 4.1's)."""
    for key in ApiKey:
        first = 1 if key in STARTING_AT_1 else 0
        assert key.min_version == first, key.name
        assert request_class(key).SCHEMA.codec(first, key.is_flexible(first)) is not None
