"""Decoding is bounded by what a request can honestly carry: an array count is checked
against the bytes left times the fewest bytes one element takes, before anything is
allocated, and a decoded element costs a bounded number of objects (shared empty
tagged-field maps, one zero uuid)."""

from __future__ import annotations

import tracemalloc
import uuid

import pytest

from logstore.protocol import ApiKey
from logstore.protocol.errors import MalformedMessageError
from logstore.protocol.frame import decode_request
from logstore.protocol.messages import request_class
from logstore.protocol.schema import NO_TAGS
from logstore.protocol.types import ZERO_UUID

from .fixtures import i16, i32, request_header_v1, request_header_v2, uvarint


def _peak_mb(fn) -> tuple[object, float]:
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak / 1e6


def test_a_count_the_bytes_left_cannot_hold_is_refused_before_allocating() -> None:
    # Metadata v12: each topic takes at least 18 bytes (uuid 16, null name 1, tags 1).
    body = uvarint(1000 + 1) + b"\x00" * (18 * 999) + b"\x01\x00\x00"
    with pytest.raises(MalformedMessageError, match="1000 elements of at least 18 bytes"):
        decode_request(request_header_v2(ApiKey.METADATA, 12, 1, "c") + body)
    # 2**31 - 1 empty strings in a non-flexible array need 2 bytes each
    body = i32(2**31 - 1) + i16(0) * 10
    with pytest.raises(MalformedMessageError):
        decode_request(request_header_v1(ApiKey.DESCRIBE_GROUPS, 0, 1, "c") + body)


def test_the_minimum_sizes_follow_the_version() -> None:
    Metadata = request_class(ApiKey.METADATA)
    topic = Metadata.SCHEMA.fields[0].type.element
    assert topic.codec(12, True).min_size == 18  # uuid, compact nullable name, tags
    assert topic.codec(1, False).min_size == 2  # an int16 string length
    Fetch = request_class(ApiKey.FETCH)
    partition = Fetch.FetchTopic.SCHEMA.fields[2].type.element
    assert partition.codec(0, False).min_size == 4 + 8 + 4  # partition, fetch_offset, max bytes


def test_a_million_empty_group_ids_cost_a_bounded_number_of_bytes() -> None:
    n = 1_000_000
    frame = (
        request_header_v2(ApiKey.DESCRIBE_GROUPS, 5, 1, "c")
        + uvarint(n + 1)
        + b"\x01" * n
        + b"\x00\x00"
    )
    request, peak = _peak_mb(lambda: decode_request(frame))
    assert len(request.body.groups) == n
    assert peak < 10 * len(frame) / 1e6  # a list of references to one empty string


def test_a_million_topic_ids_stay_within_a_few_times_the_request() -> None:
    n = 1_000_000
    element = bytes(16) + b"\x00\x00"  # the zero uuid, null name, no tags
    frame = (
        request_header_v2(ApiKey.METADATA, 12, 1, "c")
        + uvarint(n + 1)
        + element * n
        + b"\x01\x00\x00"
    )
    request, peak = _peak_mb(lambda: decode_request(frame))
    topics = request.body.topics
    assert len(topics) == n
    assert topics[0].topic_id is ZERO_UUID and topics[-1].unknown_tagged_fields is NO_TAGS
    assert peak < 5 * len(frame) / 1e6  # 18 MB in; about 65 MB of objects (was 184 MB)


def test_the_shared_empty_tag_map_cannot_be_changed() -> None:
    frame = (
        request_header_v2(ApiKey.METADATA, 12, 1, "c")
        + uvarint(2)
        + bytes(16)
        + b"\x00\x00"
        + b"\x01\x00\x00"
    )
    topic = decode_request(frame).body.topics[0]
    with pytest.raises(TypeError):
        topic.unknown_tagged_fields[1] = b"x"
    topic.unknown_tagged_fields = {1: b"x"}  # a new dict is the way to add one
    assert NO_TAGS == {}
    assert uuid.UUID(int=0) == topic.topic_id
