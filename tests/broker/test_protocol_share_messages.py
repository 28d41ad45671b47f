"""The share-group schemas (KIP-932) against bytes built by hand as Kafka 4.1 and
librdkafka 2.16 lay them out (round trips of every version are in
test_protocol_roundtrip.py)."""

from __future__ import annotations

import struct
import uuid

from logstore.protocol import ApiKey
from logstore.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from logstore.protocol.messages.share_group import (
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from logstore.protocol.messages.share_group_offsets import (
    AlterShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
)
from logstore.protocol.messages.share_state import (
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
)

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def cstr(text: str | None) -> bytes:
    """A compact (nullable) string: length + 1 as an unsigned varint, 0 for null."""
    if text is None:
        return b"\x00"
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def carray(n: int) -> bytes:
    return bytes([n + 1])


TAGS = b"\x00"


def test_versions_are_kafka_4_1s() -> None:
    assert (ApiKey.SHARE_GROUP_HEARTBEAT.min_version, ApiKey.SHARE_GROUP_HEARTBEAT.max_version) == (
        1,
        1,
    )
    assert ApiKey.SHARE_FETCH.supports(1) and not ApiKey.SHARE_FETCH.supports(0)
    assert ApiKey.SHARE_ACKNOWLEDGE.supports(1) and not ApiKey.SHARE_ACKNOWLEDGE.supports(2)
    for key in range(83, 88):
        member = ApiKey.lookup(key)
        assert member is not None and (member.min_version, member.max_version) == (0, 0)
    assert ApiKey.lookup(88) is None and ApiKey.lookup(89) is None


def test_share_group_heartbeat_v1_request_as_librdkafka_writes_it() -> None:
    # group id, member id, member epoch, rack id (null), subscribed topic names.
    body = cstr("g") + cstr("m-1") + i32(0) + cstr(None) + carray(1) + cstr("t") + TAGS
    request = ShareGroupHeartbeatRequest.decode(body, 1)
    assert request.group_id == "g" and request.member_id == "m-1"
    assert request.member_epoch == 0 and request.rack_id is None
    assert request.subscribed_topic_names == ["t"]
    assert request.encode(1) == body
    # A steady heartbeat sends a null subscription.
    steady = cstr("g") + cstr("m-1") + i32(3) + cstr(None) + b"\x00" + TAGS
    assert ShareGroupHeartbeatRequest.decode(steady, 1).subscribed_topic_names is None


def test_share_group_heartbeat_v1_response_assignment() -> None:
    response = ShareGroupHeartbeatResponse(
        error_code=0,
        member_id="m-1",
        member_epoch=2,
        heartbeat_interval_ms=5000,
        assignment=ShareGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ShareGroupHeartbeatResponse.TopicPartitions(topic_id=TOPIC, partitions=[0, 1])
            ]
        ),
    )
    expected = (
        i32(0)
        + i16(0)
        + cstr(None)
        + cstr("m-1")
        + i32(2)
        + i32(5000)
        + i8(1)  # the nullable struct is present
        + carray(1)
        + TOPIC.bytes
        + carray(2)
        + i32(0)
        + i32(1)
        + TAGS  # TopicPartitions
        + TAGS  # Assignment
        + TAGS
    )
    assert response.encode(1) == expected
    unchanged = ShareGroupHeartbeatResponse(member_epoch=2, heartbeat_interval_ms=5000)
    assert unchanged.encode(1).endswith(i32(5000) + i8(-1) + TAGS)


def test_share_group_describe_v1_member_has_no_target_assignment() -> None:
    member = ShareGroupDescribeResponse.Member(
        member_id="m",
        member_epoch=1,
        client_id="c",
        client_host="/h",
        subscribed_topic_names=["t"],
    )
    assert [f.name for f in ShareGroupDescribeResponse.Member.SCHEMA.fields] == [
        "member_id",
        "rack_id",
        "member_epoch",
        "client_id",
        "client_host",
        "subscribed_topic_names",
        "assignment",
    ]
    assert member.assignment.topic_partitions == []
    response = ShareGroupDescribeResponse(
        groups=[ShareGroupDescribeResponse.DescribedGroup(group_id="g", members=[member])]
    )
    assert ShareGroupDescribeResponse.decode(response.encode(1), 1) == response


def test_share_fetch_v1_request_with_acknowledgements() -> None:
    body = (
        cstr("g")
        + cstr("m-1")
        + i32(1)  # share session epoch
        + i32(500)
        + i32(1)
        + i32(52428800)
        + i32(500)  # max records
        + i32(500)  # batch size
        + carray(1)
        + TOPIC.bytes
        + carray(1)
        + i32(0)
        + carray(1)
        + i64(10)
        + i64(12)
        + carray(1)
        + i8(1)  # accept
        + TAGS  # batch
        + TAGS  # partition
        + TAGS  # topic
        + carray(0)  # forgotten topics
        + TAGS
    )
    request = ShareFetchRequest.decode(body, 1)
    (topic,) = request.topics
    (partition,) = topic.partitions
    (batch,) = partition.acknowledgement_batches
    assert (batch.first_offset, batch.last_offset, batch.acknowledge_types) == (10, 12, [1])
    assert request.max_records == 500 and request.batch_size == 500
    assert request.encode(1) == body


def test_share_fetch_v1_response_acquired_records() -> None:
    partition = ShareFetchResponse.PartitionData(
        partition_index=0,
        current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=0),
        records=b"",
        acquired_records=[
            ShareFetchResponse.AcquiredRecords(first_offset=0, last_offset=4, delivery_count=1)
        ],
    )
    response = ShareFetchResponse(
        acquisition_lock_timeout_ms=30000,
        responses=[
            ShareFetchResponse.ShareFetchableTopicResponse(topic_id=TOPIC, partitions=[partition])
        ],
    )
    decoded = ShareFetchResponse.decode(response.encode(1), 1)
    assert decoded.acquisition_lock_timeout_ms == 30000
    (acquired,) = decoded.responses[0].partitions[0].acquired_records
    assert (acquired.first_offset, acquired.last_offset, acquired.delivery_count) == (0, 4, 1)


def test_write_share_group_state_v0_layout() -> None:
    body = (
        cstr("g")
        + carray(1)
        + TOPIC.bytes
        + carray(1)
        + i32(2)  # partition
        + i32(1)  # state epoch
        + i32(5)  # leader epoch
        + i64(100)  # start offset
        + carray(1)
        + i64(100)
        + i64(109)
        + i8(2)  # acknowledged
        + i16(1)
        + TAGS
        + TAGS
        + TAGS
        + TAGS
    )
    request = WriteShareGroupStateRequest.decode(body, 0)
    (data,) = request.topics[0].partitions
    assert (data.partition, data.state_epoch, data.leader_epoch, data.start_offset) == (
        2,
        1,
        5,
        100,
    )
    assert data.state_batches[0].delivery_state == 2
    assert request.encode(0) == body


def test_read_share_group_state_summary_v0_has_leader_epoch() -> None:
    names = [f.name for f in ReadShareGroupStateSummaryResponse.PartitionResult.SCHEMA.fields]
    assert names == [
        "partition",
        "error_code",
        "error_message",
        "state_epoch",
        "leader_epoch",
        "start_offset",
    ]


def test_offsets_apis() -> None:
    # A null topic list describes every partition the group has state for.
    body = carray(1) + cstr("g") + b"\x00" + TAGS + TAGS
    request = DescribeShareGroupOffsetsRequest.decode(body, 0)
    assert request.groups[0].topics is None
    assert request.encode(0) == body
    names = [f.name for f in AlterShareGroupOffsetsResponse.SCHEMA.fields]
    assert names == ["throttle_time_ms", "error_code", "error_message", "responses"]
