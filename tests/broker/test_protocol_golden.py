"""Golden frames: requests as real clients send them, responses as they read them."""

from __future__ import annotations

import uuid

import pytest

from logstore.protocol import (
    ApiKey,
    ProduceFrame,
    Request,
    RequestDecoder,
    decode_response,
    encode_request,
    encode_response,
)
from logstore.protocol.messages.api_versions import ApiVersionsResponse
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.messages.metadata import MetadataResponse

from . import fixtures as fx


def decode_one(frame: bytes) -> Request | ProduceFrame:
    decoder = RequestDecoder()
    decoder.receive_data(frame)
    event = decoder.next_request()
    assert isinstance(event, (Request, ProduceFrame))
    assert decoder.next_request() is None
    assert decoder.buffered == 0
    return event


@pytest.mark.parametrize("name", sorted(fx.GOLDEN_REQUESTS))
def test_golden_request_reencodes_identically(name: str) -> None:
    frame = fx.GOLDEN_REQUESTS[name]()
    event = decode_one(frame)
    assert event.size == len(frame) - 4
    assert encode_request(event.header, event.body) == frame


def test_api_versions_v3_as_librdkafka_sends() -> None:
    event = decode_one(fx.api_versions_v3_librdkafka())
    assert event.api_key is ApiKey.API_VERSIONS
    assert (event.api_version, event.correlation_id) == (3, 1)
    assert event.header.client_id == "rdkafka"
    assert event.body.client_software_name == "librdkafka"
    assert event.body.client_software_version == "2.0.2"


def test_metadata_v1_topics_and_null_for_all_topics() -> None:
    event = decode_one(fx.metadata_v1_kafka_python(["my-topic", "other"]))
    assert event.header.client_id == "kafka-python-3.0.12"
    assert [t.name for t in event.body.topics] == ["my-topic", "other"]
    # Fields Metadata v1 does not carry take their defaults.
    assert event.body.allow_auto_topic_creation is True
    assert decode_one(fx.metadata_v1_kafka_python(None)).body.topics is None


def test_produce_v3_keeps_records_as_raw_slice() -> None:
    frame = fx.produce_v3()
    event = decode_one(frame)
    body = event.body
    assert body.transactional_id is None
    assert (body.acks, body.timeout_ms) == (-1, 30000)
    [topic] = body.topic_data
    [partition] = topic.partition_data
    assert (topic.name, partition.index) == ("test", 0)
    records = partition.records
    assert isinstance(records, memoryview)
    assert records == fx.PRODUCE_BATCH
    assert records[16] == 2  # magic byte of RecordBatch v2


def test_fetch_v4() -> None:
    body = decode_one(fx.fetch_v4()).body
    assert (body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes) == (
        -1,
        500,
        1,
        52428800,
    )
    assert body.isolation_level == 0
    [topic] = body.topics
    [partition] = topic.partitions
    assert topic.topic == "test"
    assert (partition.partition, partition.fetch_offset, partition.partition_max_bytes) == (
        0,
        42,
        1048576,
    )
    assert partition.current_leader_epoch == -1  # v9+ field, default here
    assert body.session_epoch == -1 and body.forgotten_topics_data == []


def test_fetch_v11() -> None:
    body = decode_one(fx.fetch_v11()).body
    assert body.isolation_level == 1
    assert (body.session_id, body.session_epoch, body.rack_id) == (0, -1, "rack-a")
    partition = body.topics[0].partitions[0]
    assert (partition.current_leader_epoch, partition.log_start_offset) == (5, -1)


def test_fetch_v12_flexible_with_tagged_cluster_id() -> None:
    event = decode_one(fx.fetch_v12())
    assert event.header.client_id == "rdkafka"
    body = event.body
    assert body.cluster_id == "my-cluster"
    assert body.rack_id == ""
    partition = body.topics[0].partitions[0]
    assert (partition.last_fetched_epoch, partition.fetch_offset) == (4, 42)
    assert body.unknown_tagged_fields == {}


def test_join_group_v0() -> None:
    body = decode_one(fx.join_group_v0()).body
    assert (body.group_id, body.session_timeout_ms, body.member_id) == ("my-group", 10000, "")
    assert body.rebalance_timeout_ms == -1  # v1+ field
    assert body.protocol_type == "consumer"
    [protocol] = body.protocols
    assert protocol.name == "range"
    assert protocol.metadata == fx.consumer_subscription(["test"])
    assert isinstance(protocol.metadata, bytes)


def test_join_group_v5_static_member() -> None:
    event = decode_one(fx.join_group_v5())
    body = event.body
    assert event.header.client_id == "aiokafka-0.14.0"
    assert (body.rebalance_timeout_ms, body.group_instance_id) == (300000, "instance-1")
    assert [p.name for p in body.protocols] == ["range", "roundrobin"]


# --------------------------------------------------------------------------
# Responses


def test_api_versions_v3_response_uses_header_v0() -> None:
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
        throttle_time_ms=0,
    )
    expected = fx.frame(
        fx.i32(77)  # correlation id, then no tagged-field byte: header v0
        + fx.i16(0)
        + fx.compact_array([fx.i16(18) + fx.i16(0) + fx.i16(4) + fx.NO_TAGS])
        + fx.i32(0)
        + fx.NO_TAGS
    )
    assert encode_response(77, ApiKey.API_VERSIONS, 3, body) == expected
    assert decode_response(expected[4:], ApiKey.API_VERSIONS, 3) == (77, body)


def test_flexible_response_uses_header_v1() -> None:
    body = MetadataResponse(throttle_time_ms=0, cluster_id="c1", controller_id=1)
    encoded = encode_response(5, ApiKey.METADATA, 9, body)
    assert encoded[4:9] == fx.i32(5) + fx.NO_TAGS
    assert decode_response(encoded[4:], ApiKey.METADATA, 9) == (5, body)


def test_metadata_v12_response_layout() -> None:
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    body = MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=1, host="localhost", port=9092, rack=None
            )
        ],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name="test",
                topic_id=topic_id,
                is_internal=False,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=[1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                ],
                topic_authorized_operations=-2147483648,
            )
        ],
    )
    partition = (
        fx.i16(0)
        + fx.i32(0)
        + fx.i32(1)
        + fx.i32(0)
        + fx.compact_array([fx.i32(1)])
        + fx.compact_array([fx.i32(1)])
        + fx.compact_array([])
        + fx.NO_TAGS
    )
    topic = (
        fx.i16(0)
        + fx.compact_string("test")
        + topic_id.bytes
        + fx.i8(0)
        + fx.compact_array([partition])
        + fx.i32(-2147483648)
        + fx.NO_TAGS
    )
    expected = (
        fx.i32(0)
        + fx.compact_array(
            [
                fx.i32(1)
                + fx.compact_string("localhost")
                + fx.i32(9092)
                + fx.compact_string(None)
                + fx.NO_TAGS
            ]
        )
        + fx.compact_string("cluster")
        + fx.i32(1)
        + fx.compact_array([topic])
        + fx.NO_TAGS
    )
    assert body.encode(12) == expected


def test_fetch_v4_response_layout() -> None:
    batch = fx.PRODUCE_BATCH
    body = FetchResponse(
        throttle_time_ms=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="test",
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=1,
                        last_stable_offset=1,
                        aborted_transactions=None,
                        records=batch,
                    )
                ],
            )
        ],
    )
    expected = fx.i32(0) + fx.array(
        [
            fx.string("test")
            + fx.array(
                [fx.i32(0) + fx.i16(0) + fx.i64(1) + fx.i64(1) + fx.i32(-1) + fx.nbytes(batch)]
            )
        ]
    )
    assert body.encode(4) == expected
