"""Truncated and mutated input never raises anything but ProtocolError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.protocol import (
    RESPONSES,
    ApiKey,
    CorruptFrameError,
    MalformedMessageError,
    ProduceFrame,
    ProtocolError,
    Request,
    RequestDecoder,
    UnsupportedRequest,
    decode_response,
    encode_response,
)

from . import fixtures as fx
from .strategies import message_strategy

GOLDEN = {name: build() for name, build in fx.GOLDEN_REQUESTS.items()}
_FUZZ = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def drain(data: bytes) -> list[Request | UnsupportedRequest]:
    """Feed ``data`` and pull every event; only ProtocolError may escape."""
    decoder = RequestDecoder()
    decoder.receive_data(data)
    events = []
    while (event := decoder.next_request()) is not None:
        events.append(event)
    return events


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_prefix_waits_for_more_data(name: str) -> None:
    frame = GOLDEN[name]
    decoder = RequestDecoder()
    for i in range(len(frame)):
        decoder.receive_data(frame[i : i + 1])
        if i < len(frame) - 1:
            assert decoder.next_request() is None
    assert isinstance(decoder.next_request(), (Request, ProduceFrame))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_truncated_frame_raises(name: str) -> None:
    """A frame whose size prefix matches a cut-off payload does not parse."""
    payload = GOLDEN[name][4:]
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError) as info:
            drain(fx.frame(payload[:cut]))
        if cut < 10:
            assert isinstance(info.value, CorruptFrameError)
        else:
            assert isinstance(info.value, MalformedMessageError)
            assert info.value.correlation_id is not None


def _check_decoded(events: list[Request | UnsupportedRequest]) -> None:
    for event in events:
        if isinstance(event, (Request, ProduceFrame)):
            # Whatever decoded must encode again and decode to the same object.
            encoded = event.body.encode(event.api_version)
            assert type(event.body).decode(encoded, event.api_version) == event.body


@_FUZZ
@given(
    name=st.sampled_from(sorted(GOLDEN)),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    fix_size=st.booleans(),
)
def test_byte_mutations(name: str, edits: list[tuple[int, int]], fix_size: bool) -> None:
    frame = bytearray(GOLDEN[name])
    for pos, value in edits:
        frame[pos % len(frame)] = value
    if fix_size:
        frame[:4] = fx.i32(len(frame) - 4)
    try:
        _check_decoded(drain(bytes(frame)))
    except ProtocolError:
        pass


@_FUZZ
@given(
    name=st.sampled_from(sorted(GOLDEN)),
    start=st.integers(4, 10**6),
    length=st.integers(0, 8),
    insert=st.binary(max_size=8),
)
def test_splices(name: str, start: int, length: int, insert: bytes) -> None:
    """Deleting and inserting bytes inside the payload (size prefix kept right)."""
    payload = GOLDEN[name][4:]
    start %= len(payload)
    mutated = payload[:start] + insert + payload[start + length :]
    try:
        _check_decoded(drain(fx.frame(mutated)))
    except ProtocolError:
        pass


@_FUZZ
@given(st.binary(max_size=200))
def test_random_streams(data: bytes) -> None:
    try:
        _check_decoded(drain(data))
    except ProtocolError:
        pass


_RESPONSE_CASES = [
    (ApiKey.API_VERSIONS, 3),
    (ApiKey.METADATA, 1),
    (ApiKey.METADATA, 12),
    (ApiKey.FETCH, 4),
    (ApiKey.FETCH, 16),
    (ApiKey.PRODUCE, 9),
    (ApiKey.JOIN_GROUP, 5),
    (ApiKey.OFFSET_FETCH, 8),
    (ApiKey.DESCRIBE_CONFIGS, 4),
]


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data(), case=st.sampled_from(_RESPONSE_CASES))
def test_mutated_responses(data: st.DataObject, case: tuple[ApiKey, int]) -> None:
    key, version = case
    body = data.draw(message_strategy(RESPONSES[key], version))
    frame = bytearray(encode_response(1, key, version, body)[4:])
    cut = data.draw(st.integers(0, len(frame)))
    edits = data.draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
    for pos, value in edits:
        if frame:
            frame[pos % len(frame)] = value
    try:
        decode_response(bytes(frame[:cut]), key, version)
    except ProtocolError:
        pass
