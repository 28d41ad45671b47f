"""The Produce fast path agrees with the generic schema codec, both ways, every version."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.frame import decode_request, encode_response_chunks
from broker_py.protocol.headers import RequestHeader
from broker_py.protocol.messages.produce import ProduceRequest, ProduceResponse
from broker_py.protocol.produce_fast_path import decode_produce, encode_produce_response

VERSIONS = st.integers(ApiKey.PRODUCE.min_version, ApiKey.PRODUCE.max_version)
NAMES = st.text(alphabet="abcdefghij._-0123456789", min_size=1, max_size=20)
RECORDS = st.one_of(st.none(), st.binary(max_size=300))


def _request_frame(version, client_id, transactional_id, acks, timeout, topics) -> bytes:
    from broker_py.protocol.frame import encode_request

    body = ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=name, partition_data=[ProduceRequest.PartitionProduceData(index=i, records=r) for i, r in parts]
            )
            for name, parts in topics
        ],
    )
    header = RequestHeader(api_key=int(ApiKey.PRODUCE), api_version=version, correlation_id=7, client_id=client_id)
    return encode_request(header, body)[4:]


@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    client_id=st.one_of(st.none(), NAMES),
    transactional_id=st.one_of(st.none(), NAMES),
    acks=st.sampled_from([0, 1, -1]),
    timeout=st.integers(0, 2**31 - 1),
    topics=st.lists(st.tuples(NAMES, st.lists(st.tuples(st.integers(0, 2**31 - 1), RECORDS), max_size=4)), max_size=4),
)
def test_fast_decode_equals_generic_decode(version, client_id, transactional_id, acks, timeout, topics):
    frame = _request_frame(version, client_id, transactional_id, acks, timeout, topics)
    fast = decode_produce(frame)
    assert fast is not None
    header, body = fast
    # The generic codec, with the fast path bypassed.
    from broker_py.protocol.frame import Reader, read_request_header, request_class

    r = Reader(frame)
    generic_header = read_request_header(r, ApiKey.PRODUCE.request_header_version(version))
    generic_body = request_class(ApiKey.PRODUCE).read(r, version)
    assert header == generic_header
    assert body == generic_body
    assert decode_request(frame).body == generic_body


@given(version=VERSIONS, data=st.binary(max_size=200))
def test_fast_decode_refuses_what_it_does_not_know(version, data):
    # Arbitrary bodies either decode to what the generic codec reads, or fall back.
    frame = struct.pack(">hhih", int(ApiKey.PRODUCE), version, 1, -1) + data
    fast = decode_produce(frame)
    if fast is not None:
        from broker_py.protocol.frame import Reader, read_request_header, request_class

        r = Reader(frame)
        read_request_header(r, ApiKey.PRODUCE.request_header_version(version))
        assert request_class(ApiKey.PRODUCE).read(r, version) == fast[1]
        assert r.remaining() == 0


def test_tagged_fields_fall_back_to_the_generic_codec():
    frame = bytearray(_request_frame(9, "c", None, 1, 100, [("t", [(0, b"x")])]))
    assert decode_produce(bytes(frame)) is not None
    frame[-1] = 1  # one top-level tagged field: not the common shape
    assert decode_produce(bytes(frame + b"\x05\x00")) is None


PARTITION = st.builds(
    lambda i, e, b, t, s, m: ProduceResponse.PartitionProduceResponse(
        index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s, error_message=m
    ),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    st.integers(-1, 2**62),
    st.integers(-1, 2**41),
    st.integers(-1, 2**40),
    st.one_of(st.none(), st.text(max_size=30)),
)


@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(st.tuples(NAMES, st.lists(PARTITION, max_size=4)), max_size=4),
    throttle=st.integers(0, 2**31 - 1),
)
def test_fast_encode_equals_generic_encode(version, correlation_id, topics, throttle):
    response = ProduceResponse(
        responses=[ProduceResponse.TopicProduceResponse(name=n, partition_responses=ps) for n, ps in topics],
        throttle_time_ms=throttle,
    )
    generic = b"".join(encode_response_chunks(correlation_id, ApiKey.PRODUCE, version, response))
    assert encode_produce_response(correlation_id, version, response) == generic


def test_fast_encode_leaves_tagged_leaders_to_the_generic_codec():
    p = ProduceResponse.PartitionProduceResponse(index=0)
    p.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=2)
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[p])])
    assert encode_produce_response(1, 10, response) is None
    assert encode_produce_response(1, 9, response) is not None  # v9 does not carry it
