"""The native Produce codec agrees with the generic schema codec, both ways, every version,
the response's tagged fields (current_leader, node_endpoints) included."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logstore
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import (
    Reader,
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response_chunks,
    read_request_header,
    request_class,
)
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.produce import ProduceRequest, ProduceResponse
from logstore.protocol.produce_frame import ProduceFrame, parse_produce_frame

VERSIONS = st.integers(ApiKey.PRODUCE.min_version, ApiKey.PRODUCE.max_version)
NAMES = st.text(alphabet="abcdefghij._-0123456789é", min_size=1, max_size=20)
RECORDS = st.one_of(st.none(), st.binary(max_size=300))


def _request_frame(version, client_id, transactional_id, acks, timeout, topics) -> bytes:
    body = ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=name,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=r) for i, r in parts
                ],
            )
            for name, parts in topics
        ],
    )
    header = RequestHeader(
        api_key=int(ApiKey.PRODUCE), api_version=version, correlation_id=7, client_id=client_id
    )
    return encode_request(header, body)[4:]


def _generic(frame: bytes, version: int) -> tuple[RequestHeader, ProduceRequest, int]:
    r = Reader(frame)
    header = read_request_header(r, ApiKey.PRODUCE.request_header_version(version))
    body = request_class(ApiKey.PRODUCE).read(r, version)
    return header, body, r.remaining()


def _as_message(p: ProduceFrame) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=p.transactional_id,
        acks=p.acks,
        timeout_ms=p.timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=name,
                partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=i, records=None if s < 0 else p.frame[s:e]
                    )
                    for i, s, e, _ in parts
                ],
            )
            for name, parts in p.topics
        ],
    )


@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    client_id=st.one_of(st.none(), NAMES),
    transactional_id=st.one_of(st.none(), NAMES),
    acks=st.sampled_from([0, 1, -1]),
    timeout=st.integers(0, 2**31 - 1),
    topics=st.lists(
        st.tuples(NAMES, st.lists(st.tuples(st.integers(0, 2**31 - 1), RECORDS), max_size=4)),
        max_size=4,
    ),
)
def test_native_parse_equals_generic_decode(
    version, client_id, transactional_id, acks, timeout, topics
):
    frame = _request_frame(version, client_id, transactional_id, acks, timeout, topics)
    fast = parse_produce_frame(frame)
    assert fast is not None
    header, body, _ = _generic(frame, version)
    assert fast.header == header
    assert _as_message(fast) == body
    assert isinstance(decode_request(frame), ProduceFrame)


@given(version=VERSIONS, data=st.binary(max_size=200))
def test_native_parse_refuses_what_the_generic_codec_would_not_read_whole(version, data):
    # Arbitrary bodies either parse to what the generic codec reads, or fall back.
    frame = struct.pack(">hhih", int(ApiKey.PRODUCE), version, 1, -1) + data
    fast = parse_produce_frame(frame)
    if fast is not None:
        _, body, remaining = _generic(frame, version)
        assert _as_message(fast) == body
        assert remaining == 0


def test_tagged_fields_fall_back_to_the_generic_codec():
    frame = _request_frame(9, "c", None, 1, 100, [("t", [(0, b"x")])])
    assert parse_produce_frame(frame) is not None
    tagged = frame[:-1] + b"\x01\x05\x00"  # one top-level tagged field: not the common shape
    assert parse_produce_frame(tagged) is None
    event = decode_request(tagged)
    assert isinstance(event, Request) and event.body.topic_data[0].partition_data[0].records == b"x"


def test_has_producer_id_is_reported_per_partition():
    plain = logstore.encode_batch([(None, b"v")])
    idempotent = logstore.encode_batch(
        [(None, b"v")], producer_id=5, producer_epoch=0, base_sequence=0
    )
    frame = _request_frame(9, "c", None, -1, 100, [("t", [(0, plain), (1, idempotent)])])
    fast = parse_produce_frame(frame)
    assert [p[3] for p in fast.topics[0][1]] == [False, True]
    assert not logstore.has_producer_id(plain) and logstore.has_producer_id(idempotent)


PARTITION_FIELDS = (
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    st.integers(-1, 2**62),
    st.integers(-1, 2**41),
    st.integers(-1, 2**40),
    st.one_of(st.none(), st.text(max_size=30)),
    st.lists(
        st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.text(max_size=30))), max_size=3
    ),
)
PARTITION = st.tuples(*PARTITION_FIELDS)
INT32 = st.integers(-1, 2**31 - 1)
# The 7-tuple, or the 8-tuple ending in current_leader (leader_id, leader_epoch) or None.
PARTITIONS = st.one_of(
    PARTITION, st.tuples(*PARTITION_FIELDS, st.one_of(st.none(), st.tuples(INT32, INT32)))
)
ENDPOINTS = st.one_of(
    st.none(), st.lists(st.tuples(INT32, NAMES, INT32, st.one_of(st.none(), NAMES)), max_size=3)
)


def _leader(leader) -> dict:
    if not leader or leader[0] is None:
        return {}
    return {
        "current_leader": ProduceResponse.LeaderIdAndEpoch(
            leader_id=leader[0][0], leader_epoch=leader[0][1]
        )
    }


@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(st.tuples(NAMES, st.lists(PARTITIONS, max_size=4)), max_size=4),
    throttle=st.integers(0, 2**31 - 1),
    endpoints=ENDPOINTS,
)
def test_native_encode_equals_generic_encode(version, correlation_id, topics, throttle, endpoints):
    response = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=n,
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(
                        index=i,
                        error_code=e,
                        base_offset=b,
                        log_append_time_ms=t,
                        log_start_offset=s,
                        error_message=m,
                        record_errors=[
                            ProduceResponse.BatchIndexAndErrorMessage(
                                batch_index=bi, batch_index_error_message=bm
                            )
                            for bi, bm in errors
                        ],
                        **_leader(leader),
                    )
                    for i, e, b, t, s, m, errors, *leader in ps
                ],
            )
            for n, ps in topics
        ],
        throttle_time_ms=throttle,
        node_endpoints=[
            ProduceResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r)
            for n, h, p, r in endpoints or []
        ],
    )
    generic = b"".join(encode_response_chunks(correlation_id, ApiKey.PRODUCE, version, response))
    assert (
        logstore.encode_produce_response(correlation_id, version, topics, throttle, endpoints)
        == generic
    )
    if not endpoints:
        assert (
            logstore.encode_produce_response(correlation_id, version, topics, throttle) == generic
        )


def test_current_leader_and_node_endpoints_decode_from_v10():
    endpoints = [(1, "broker-1", 9092, "rack-a")]
    topics = [
        (
            "t",
            [
                (0, 6, -1, -1, -1, "not leader", [], (1, 4)),
                (1, 0, 5, -1, 0, None, []),
                (2, 6, -1, -1, -1, None, [], None),
            ],
        )
    ]
    for version in range(ApiKey.PRODUCE.min_version, ApiKey.PRODUCE.max_version + 1):
        frame = logstore.encode_produce_response(8, version, topics, 0, node_endpoints=endpoints)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, body = decode_response(frame[4:], ApiKey.PRODUCE, version)
        assert correlation_id == 8
        leaders = [
            (p.current_leader.leader_id, p.current_leader.leader_epoch)
            for p in body.responses[0].partition_responses
        ]
        assert leaders == ([(1, 4), (-1, -1), (-1, -1)] if version >= 10 else [(-1, -1)] * 3)
        assert [(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints] == (
            endpoints if version >= 10 else []
        )


def test_a_partition_of_another_length_is_refused():
    with pytest.raises(TypeError):
        logstore.encode_produce_response(1, 10, [("t", [(0, 0, 0, -1, 0, None, [], None, None)])])
