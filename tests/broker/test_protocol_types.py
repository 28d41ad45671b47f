"""Primitive encodings and the bounded reader."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.protocol import EncodeError, MalformedMessageError, TruncatedMessageError
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.types import (
    BYTES,
    FLOAT64,
    INT16,
    INT32,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Reader,
    Writer,
)

from . import fixtures as fx


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varint(value: int, encoded: bytes) -> None:
    w = Writer()
    w.unsigned_varint(value)
    assert w.getvalue() == encoded
    r = Reader(encoded)
    assert r.unsigned_varint() == value and r.remaining() == 0


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_zigzag_varint(value: int, encoded: bytes) -> None:
    w = Writer()
    w.varint(value)
    assert w.getvalue() == encoded
    assert Reader(encoded).varint() == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    w = Writer()
    w.varlong(value)
    data = w.getvalue()
    assert len(data) <= 10
    assert data == fx.zigzag(value)
    assert Reader(data).varlong() == value


def test_varint_limits() -> None:
    with pytest.raises(MalformedMessageError):
        Reader(b"\x80\x80\x80\x80\x80\x01").unsigned_varint()  # 6 bytes
    with pytest.raises(MalformedMessageError):
        Reader(b"\xff\xff\xff\xff\x1f").unsigned_varint()  # 5 bytes, > 32 bits
    with pytest.raises(TruncatedMessageError):
        Reader(b"\x80\x80").unsigned_varint()
    for bad in (-1, 2**32):
        with pytest.raises(EncodeError):
            Writer().unsigned_varint(bad)
    with pytest.raises(EncodeError):
        Writer().varint(2**31)


@pytest.mark.parametrize(
    ("typ", "value"),
    [
        (UINT16, 65535),
        (UINT32, 2**32 - 1),
        (FLOAT64, -1.5e300),
        (UUID, uuid.uuid4()),
        (INT16, -32768),
    ],
)
def test_fixed_width_round_trip(typ, value) -> None:
    w = Writer()
    typ.writer(False, False)(w, value)
    assert typ.reader(False, False)(Reader(w.getvalue())) == value


@pytest.mark.parametrize("flexible", [False, True])
def test_strings(flexible: bool) -> None:
    for value in ["", "héllo", None]:
        w = Writer()
        STRING.writer(flexible, True)(w, value)
        expected = fx.compact_string(value) if flexible else fx.string(value)
        assert w.getvalue() == expected
        assert STRING.reader(flexible, True)(Reader(expected)) == value
    with pytest.raises(MalformedMessageError, match="non-nullable"):
        STRING.reader(flexible, False)(
            Reader(fx.compact_string(None) if flexible else fx.string(None))
        )
    with pytest.raises(EncodeError):
        STRING.writer(flexible, False)(Writer(), None)


def test_string_errors() -> None:
    with pytest.raises(MalformedMessageError):
        STRING.reader(False, True)(Reader(fx.i16(-2)))
    with pytest.raises(TruncatedMessageError):
        STRING.reader(False, False)(Reader(fx.i16(10) + b"abc"))
    with pytest.raises(MalformedMessageError, match="UTF-8"):
        STRING.reader(False, False)(Reader(fx.i16(2) + b"\xff\xfe"))
    with pytest.raises(EncodeError):
        STRING.writer(False, False)(Writer(), "x" * 32768)


@pytest.mark.parametrize("flexible", [False, True])
def test_bytes_and_records(flexible: bool) -> None:
    for value in [b"", b"\x00\x01\x02", None]:
        expected = fx.compact_bytes(value) if flexible else fx.nbytes(value)
        w = Writer()
        BYTES.writer(flexible, True)(w, value)
        assert w.getvalue() == expected
        got = BYTES.reader(flexible, True)(Reader(expected))
        assert got == value and (value is None or isinstance(got, bytes))
        records = RECORDS.reader(flexible, True)(Reader(expected))
        assert records == value and (value is None or isinstance(records, memoryview))


def test_absurd_lengths_fail_without_allocating() -> None:
    huge = fx.i32(0x7FFFFFFF)
    with pytest.raises(TruncatedMessageError):
        BYTES.reader(False, False)(Reader(huge + b"abc"))
    with pytest.raises(TruncatedMessageError):
        RECORDS.reader(True, True)(Reader(b"\xff\xff\xff\xff\x0f"))
    # An array count larger than the bytes left is refused before any element is read.
    body = fx.i32(-1) + fx.i32(1) + fx.i32(1) + fx.i32(1) + fx.i8(0) + fx.i32(0x7FFFFFFF)
    with pytest.raises(TruncatedMessageError, match="array"):
        FetchRequest.decode(body, 4)
    with pytest.raises(MalformedMessageError):
        INT32.reader(False, False)(Reader(b"\x00"))


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    body = (
        fx.compact_string("librdkafka")
        + fx.compact_string("2.0.2")
        + fx.tags({1: b"\x07", 9: b"xyz"})
    )
    request = ApiVersionsRequest.decode(body, 3)
    assert request.unknown_tagged_fields == {1: b"\x07", 9: b"xyz"}
    assert request.encode(3) == body


def test_known_tagged_field_must_fill_its_slot() -> None:
    body = fx.tags({0: fx.compact_string("c") + b"\x00"})  # one byte too many
    fetch = fx.i32(-1) + fx.i32(1) + fx.i32(1) + fx.i32(1) + fx.i8(0) + fx.i32(0) + fx.i32(-1)
    fetch += fx.compact_array([]) + fx.compact_array([]) + fx.compact_string("") + body
    with pytest.raises(MalformedMessageError, match="trailing"):
        FetchRequest.decode(fetch, 12)


def test_tagged_fields_written_only_when_not_default() -> None:
    request = FetchRequest()
    plain = request.encode(12)
    assert plain.endswith(b"\x00")
    request.cluster_id = "c"
    assert request.encode(12).endswith(fx.tags({0: fx.compact_string("c")}))
    request.replica_state = FetchRequest.ReplicaState(replica_id=3, replica_epoch=1)
    tagged = fx.tags({0: fx.compact_string("c"), 1: fx.i32(3) + fx.i64(1) + fx.NO_TAGS})
    assert request.encode(15).endswith(tagged)


def test_reader_bounds_are_respected() -> None:
    r = Reader(b"\x00\x01\x02\x03\x04\x05", 1, 3)
    assert r.int16() == 0x0102
    with pytest.raises(TruncatedMessageError):
        r.int16()
    sub = Reader(b"\x00\x00\x00\x05abcdef").sub(4)
    assert sub.int32() == 5 and sub.remaining() == 0
