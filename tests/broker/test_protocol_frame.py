"""The sans-IO connection codec: framing, size limits, unsupported requests."""

from __future__ import annotations

import pytest

from logstore.protocol import (
    DEFAULT_MAX_REQUEST_SIZE,
    ApiKey,
    CorruptFrameError,
    DeferredRecords,
    EncodeError,
    FrameTooLargeError,
    MalformedMessageError,
    ProduceFrame,
    ProtocolError,
    Request,
    RequestDecoder,
    RequestHeader,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)
from logstore.protocol.errors import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsResponse, api_versions_response
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.messages.group import HeartbeatRequest, HeartbeatResponse

from . import fixtures as fx


def test_byte_by_byte_feeding() -> None:
    frame = fx.fetch_v12()
    decoder = RequestDecoder()
    events = []
    for i in range(len(frame)):
        decoder.receive_data(frame[i : i + 1])
        event = decoder.next_request()
        if event is not None:
            events.append((i, event))
    assert len(events) == 1
    assert events[0][0] == len(frame) - 1
    assert events[0][1].body.cluster_id == "my-cluster"


def test_several_frames_in_one_read() -> None:
    frames = [fx.api_versions_v3_librdkafka(), fx.produce_v3(), fx.join_group_v0()]
    decoder = RequestDecoder()
    decoder.receive_data(b"".join(frames) + frames[0][:7])
    keys = []
    while (event := decoder.next_request()) is not None:
        keys.append(event.api_key)
    assert keys == [ApiKey.API_VERSIONS, ApiKey.PRODUCE, ApiKey.JOIN_GROUP]
    assert decoder.buffered == 7


def test_oversize_frame_refused_before_body_is_buffered() -> None:
    decoder = RequestDecoder()
    decoder.receive_data(fx.i32(DEFAULT_MAX_REQUEST_SIZE + 1))
    with pytest.raises(FrameTooLargeError) as info:
        decoder.next_request()
    assert info.value.size == DEFAULT_MAX_REQUEST_SIZE + 1
    assert info.value.max_size == DEFAULT_MAX_REQUEST_SIZE
    assert isinstance(info.value, CorruptFrameError)
    # The decoder stays failed: the stream is out of sync.
    decoder.receive_data(fx.api_versions_v3_librdkafka())
    with pytest.raises(FrameTooLargeError):
        decoder.next_request()


def test_configured_max_request_size() -> None:
    frame = fx.produce_v3()
    size = len(frame) - 4
    exact = RequestDecoder(max_request_size=size)
    exact.receive_data(frame)
    assert isinstance(exact.next_request(), ProduceFrame)
    smaller = RequestDecoder(max_request_size=size - 1)
    smaller.receive_data(frame[:4])
    with pytest.raises(FrameTooLargeError):
        smaller.next_request()


def test_frame_at_the_limit_waits_for_its_body() -> None:
    decoder = RequestDecoder()
    decoder.receive_data(fx.i32(DEFAULT_MAX_REQUEST_SIZE) + b"\0" * 100)
    assert decoder.next_request() is None


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 9])
def test_negative_or_tiny_sizes_are_corrupt(size: int) -> None:
    decoder = RequestDecoder()
    decoder.receive_data(fx.i32(size))
    with pytest.raises(CorruptFrameError):
        decoder.next_request()


def test_unknown_api_key_is_an_event_with_the_header() -> None:
    frame = fx.frame(fx.request_header_v1(9999, 0, 42, "weird-client") + b"\x01\x02")
    decoder = RequestDecoder()
    decoder.receive_data(frame + fx.join_group_v0())
    event = decoder.next_request()
    assert isinstance(event, UnsupportedRequest)
    assert (event.api_key, event.api_version, event.correlation_id) == (9999, 0, 42)
    assert event.header.client_id == "weird-client"
    assert not event.known_api
    assert isinstance(decoder.next_request(), Request)


@pytest.mark.parametrize(
    ("api_key", "version"), [(ApiKey.PRODUCE, 12), (ApiKey.LIST_OFFSETS, 10), (ApiKey.FETCH, 18)]
)
def test_unsupported_version_is_an_event(api_key: ApiKey, version: int) -> None:
    decoder = RequestDecoder()
    decoder.receive_data(fx.frame(fx.request_header_v1(api_key, version, 9, "c") + b"\xff" * 5))
    event = decoder.next_request()
    assert isinstance(event, UnsupportedRequest)
    assert event.known_api
    assert (event.api_key, event.api_version, event.correlation_id) == (api_key, version, 9)


def test_unreadable_client_id_of_unsupported_request() -> None:
    frame = fx.frame(fx.i16(18) + fx.i16(99) + fx.i32(3) + fx.i16(50) + b"abc")
    decoder = RequestDecoder()
    decoder.receive_data(frame)
    event = decoder.next_request()
    assert isinstance(event, UnsupportedRequest)
    assert event.correlation_id == 3 and event.header.client_id is None


def test_unsupported_api_versions_is_answered_in_v0_with_error_35() -> None:
    # A client newer than us asks ApiVersions v127 with a flexible header.
    request = fx.frame(fx.request_header_v2(18, 127, 11, "future") + b"\x05stuff\x00")
    decoder = RequestDecoder()
    decoder.receive_data(request)
    event = decoder.next_request()
    assert isinstance(event, UnsupportedRequest)
    assert event.api_key == ApiKey.API_VERSIONS and event.header.client_id == "future"

    response = api_versions_response(error_code=ErrorCode.UNSUPPORTED_VERSION)
    encoded = encode_response(event.correlation_id, ApiKey.API_VERSIONS, 0, response)
    entries = [fx.i16(k) + fx.i16(k.min_version) + fx.i16(k.max_version) for k in ApiKey]
    assert encoded == fx.frame(fx.i32(11) + fx.i16(35) + fx.array(entries))
    assert decode_response(encoded[4:], ApiKey.API_VERSIONS, 0) == (11, response)


def test_api_versions_error_response_is_always_the_v0_body() -> None:
    # kafka-python reads any ApiVersions error response as v0.
    response = api_versions_response(error_code=ErrorCode.INVALID_REQUEST)
    assert encode_response(4, ApiKey.API_VERSIONS, 3, response) == encode_response(
        4, ApiKey.API_VERSIONS, 0, response
    )


def test_api_versions_error_response_is_decoded_as_the_v0_body_at_any_version() -> None:
    # A client asked ApiVersions v3; the broker does not serve it and answers in
    # v0 (header and body).  The client decodes at the version it asked for.
    entries = [fx.i16(18) + fx.i16(0) + fx.i16(2)]
    golden = fx.frame(fx.i32(9) + fx.i16(35) + fx.array(entries))
    expected = ApiVersionsResponse(
        error_code=35,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)],
    )
    for version in range(5):
        assert decode_response(golden[4:], ApiKey.API_VERSIONS, version) == (9, expected)
    response = api_versions_response(error_code=ErrorCode.UNSUPPORTED_VERSION)
    encoded = encode_response(9, ApiKey.API_VERSIONS, 3, response)
    assert decode_response(encoded[4:], ApiKey.API_VERSIONS, 3) == (9, response)


def test_api_versions_lists_every_served_api() -> None:
    response = api_versions_response()
    ranges = {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}
    assert ranges == {int(k): (k.min_version, k.max_version) for k in ApiKey}
    for version in range(5):
        encoded = encode_response(1, ApiKey.API_VERSIONS, version, response)
        _, decoded = decode_response(encoded[4:], ApiKey.API_VERSIONS, version)
        assert isinstance(decoded, ApiVersionsResponse)
        assert decoded.api_keys == response.api_keys


def test_malformed_body_carries_the_header_and_decoding_goes_on() -> None:
    good = fx.join_group_v0()
    bad = fx.frame(fx.request_header_v1(12, 0, 21, "c") + fx.string("grp") + b"\x00")
    decoder = RequestDecoder()
    decoder.receive_data(bad + good)
    with pytest.raises(MalformedMessageError) as info:
        decoder.next_request()
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (12, 0, 21)
    assert isinstance(decoder.next_request(), Request)


def test_request_round_trip_through_the_decoder() -> None:
    body = HeartbeatRequest(group_id="g", generation_id=3, member_id="m-1", group_instance_id="i")
    for version in range(ApiKey.HEARTBEAT.min_version, ApiKey.HEARTBEAT.max_version + 1):
        header = RequestHeader(
            api_key=ApiKey.HEARTBEAT, api_version=version, correlation_id=version, client_id=None
        )
        decoder = RequestDecoder()
        decoder.receive_data(encode_request(header, body))
        event = decoder.next_request()
        assert isinstance(event, Request)
        assert event.header == header
        expected = HeartbeatRequest.decode(body.encode(version), version)
        assert event.body == expected


def _fetch_response(records: object) -> FetchResponse:
    return FetchResponse(
        throttle_time_ms=0,
        session_id=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=p, high_watermark=10, records=records
                    )
                    for p in range(2)
                ],
            )
        ],
    )


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_fetch_response_with_deferred_records(version: int) -> None:
    payload = fx.PRODUCE_BATCH
    inline = encode_response(3, ApiKey.FETCH, version, _fetch_response(payload))
    source = ("00000000000000000000.log", 0)
    chunks = encode_response_chunks(
        3, ApiKey.FETCH, version, _fetch_response(DeferredRecords(len(payload), source))
    )
    placeholders = [c for c in chunks if isinstance(c, DeferredRecords)]
    assert len(placeholders) == 2 and all(c.source == source for c in placeholders)
    assert not isinstance(chunks[0], DeferredRecords)
    # A non-flexible frame ends with the last records; a flexible one with tagged fields.
    assert isinstance(chunks[-1], DeferredRecords) == (version < 12)
    # The size prefix counts the deferred bytes; splicing them in gives the inline frame.
    spliced = b"".join(payload if isinstance(c, DeferredRecords) else bytes(c) for c in chunks)
    assert spliced == inline
    assert int.from_bytes(spliced[:4], "big") == len(spliced) - 4


def test_deferred_records_need_the_chunked_encoder() -> None:
    response = _fetch_response(DeferredRecords(10))
    with pytest.raises(EncodeError):
        encode_response(1, ApiKey.FETCH, 12, response)


def test_response_of_the_wrong_api_is_refused() -> None:
    with pytest.raises(EncodeError):
        encode_response(1, ApiKey.FETCH, 12, HeartbeatResponse())
    header = RequestHeader(api_key=ApiKey.FETCH, api_version=12, correlation_id=1)
    with pytest.raises(EncodeError):
        encode_request(header, HeartbeatRequest())


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(EncodeError, match="generation_id"):
        HeartbeatRequest(group_id="g", generation_id=2**40).encode(1)
    with pytest.raises(EncodeError, match="group_id"):
        HeartbeatRequest(group_id=None).encode(1)
    with pytest.raises(EncodeError, match="group_id"):
        HeartbeatRequest(group_id="x" * 40000).encode(1)
    # Flexible versions have no int16 limit on strings.
    HeartbeatRequest(group_id="x" * 40000).encode(4)


def test_errors_share_one_base() -> None:
    from logstore.protocol.errors import KafkaException

    assert issubclass(ProtocolError, KafkaException)
    for cls in (CorruptFrameError, FrameTooLargeError, MalformedMessageError, EncodeError):
        assert issubclass(cls, ProtocolError)


def test_an_unsupported_version_keeps_the_body_read_at_the_nearest_version() -> None:
    """Produce v13 reads as v11 (the same shape but for topic ids); the broker answers
    UNSUPPORTED_VERSION naming its topics. An unknown api key has neither."""
    from broker_py.server.handlers.api_versions import unsupported_version_answer
    from logstore.protocol.messages.produce import ProduceRequest

    body = ProduceRequest(
        acks=1,
        timeout_ms=5,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=2, records=b"")]
            ),
        ],
    )
    v11 = fx.request_header_v2(ApiKey.PRODUCE, 11, 9, "c") + body.encode(11)
    v13 = v11[:2] + fx.i16(13) + v11[4:]
    event = decode_request(v13)
    assert isinstance(event, UnsupportedRequest)
    assert (event.known_api, event.nearest_version, event.body.topic_data[0].name) == (
        True,
        11,
        "t",
    )
    answer = unsupported_version_answer(event)
    correlation_id, response = decode_response(answer[4:], ApiKey.PRODUCE, 11)
    partition = response.responses[0].partition_responses[0]
    assert (correlation_id, partition.index, partition.error_code) == (
        9,
        2,
        ErrorCode.UNSUPPORTED_VERSION,
    )
    unknown = decode_request(fx.i16(999) + v11[2:])
    assert (unknown.known_api, unknown.body) == (False, None)
    assert unsupported_version_answer(unknown) is None
