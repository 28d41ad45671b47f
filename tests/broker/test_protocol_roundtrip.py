"""Encode -> decode is the identity, for every API, direction and version."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.protocol import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    ProduceFrame,
    Request,
    RequestDecoder,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
)
from logstore.protocol.schema import Message
from logstore.protocol.types import Reader, Writer

from .strategies import message_strategy

CASES = [
    pytest.param(table[key], version, id=f"{table[key].__name__}-v{version}")
    for key in ApiKey
    for table in (REQUESTS, RESPONSES)
    for version in range(key.min_version, key.max_version + 1)
]

_SETTINGS = settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("cls", "version"), CASES)
@_SETTINGS
@given(data=st.data())
def test_body_round_trip(cls: type[Message], version: int, data: st.DataObject) -> None:
    message = data.draw(message_strategy(cls, version))
    encoded = message.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == message
    assert decoded.encode(version) == encoded
    # The generated codec agrees with the field-by-field reference path.
    codec = cls.SCHEMA.codec(version, cls.is_flexible(version))
    reference = Writer()
    codec._write_slow(reference, message)
    assert reference.getvalue() == encoded
    assert codec._read_slow(Reader(encoded)) == message


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_frame_round_trip_of_defaults(cls: type[Message], version: int) -> None:
    """A default-built message survives a whole frame, header included."""
    key = cls.API_KEY
    body = cls()
    if cls.KIND == "request":
        client_id = None if key.request_header_version(version) == 0 else "t"
        header = RequestHeader(
            api_key=key, api_version=version, correlation_id=version + 1, client_id=client_id
        )
        decoder = RequestDecoder()
        decoder.receive_data(encode_request(header, body))
        event = decoder.next_request()
        assert isinstance(event, (Request, ProduceFrame))
        assert event.header == header and event.body == body
    else:
        frame = encode_response(version + 1, key, version, body)
        assert decode_response(frame[4:], key, version) == (version + 1, body)


def test_every_api_has_both_schemas_and_all_versions_encode() -> None:
    assert set(REQUESTS) == set(RESPONSES) == set(ApiKey)
    for key in ApiKey:
        for version in range(key.min_version, key.max_version + 1):
            for table in (REQUESTS, RESPONSES):
                assert table[key].is_flexible(version) == (
                    key.first_flexible is not None and version >= key.first_flexible
                )
