"""RecordBatch v2 encoding and decoding: round trips, header fields, golden bytes, codecs."""

from __future__ import annotations

import gzip
import random
import struct

import pytest

from logstore import _native as ls

from .helpers import (
    CODEC_IDS,
    HEADER_SIZE,
    OFF_ATTRIBUTES,
    build_batch,
    crc32c,
    encode_record,
    fix_crc,
    norm_headers,
    parse_raw_batches,
    with_base_offset,
    zigzag_varint,
)

T0 = 1_700_000_000_000

ALL_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_compression_types_constant():
    assert tuple(ls.COMPRESSION_TYPES) == ALL_CODECS


def test_crc32c_helper_known_vectors():
    # Sanity of the test's own CRC-32C (RFC 3720 / iSCSI check values).
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"\x00" * 32) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43


def test_native_crc32c():
    assert ls.crc32c(b"123456789") == 0xE3069283
    assert ls.crc32c(b"") == 0
    data = random.Random(2).randbytes(1000)
    assert ls.crc32c(data) == crc32c(data)
    # continuing from a previous value
    assert ls.crc32c(data[300:], ls.crc32c(data[:300])) == crc32c(data)
    batch = ls.encode_batch([(b"k", b"v", [], T0)])
    assert ls.crc32c(batch[OFF_ATTRIBUTES:]) == struct.unpack_from(">I", batch, 17)[0]


def _varied_records():
    return [
        (b"key-0", b"value-0", [("h1", b"v1"), (b"h2", b"\x00\x01")], T0),
        (None, b"null key", [], T0 + 1),
        (b"null value", None, [("h", None)], T0 + 2),
        (b"", b"", [], T0 + 3),  # empty, not null
        (None, None),  # no headers, no timestamp: gets timestamp_ms
        (b"k" * 64, b"v" * 64, [("x" * 64, b"y" * 64)], T0 + 5),  # 2-byte varints
        (b"big", bytes(range(256)) * 40, [], T0 + 6),
        (
            "ключ".encode(),
            "значение".encode(),
            [("заголовок", "ü".encode())],
            T0 - 1000,
        ),  # ts < base
        (b"last", b"x", [("a", b"1"), ("b", b"2"), ("c", None)], T0 + 9),
    ]


def _expected(records, default_ts):
    out = []
    for r in records:
        key, value = r[0], r[1]
        headers = norm_headers(r[2]) if len(r) > 2 else []
        ts = r[3] if len(r) > 3 else default_ts
        out.append((key, value, headers, ts))
    return out


def _got(batch):
    return [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in batch.records]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_every_codec(codec):
    records = _varied_records()
    data = ls.encode_batch(records, codec, timestamp_ms=T0 + 4)
    assert isinstance(data, bytes)
    batches = ls.decode_batches(data)
    assert len(batches) == 1
    b = batches[0]
    assert b.compression == codec
    assert b.attributes & 0x7 == CODEC_IDS[codec]
    assert b.magic == 2
    assert b.crc_valid is True
    assert b.crc == crc32c(data[OFF_ATTRIBUTES:])
    assert b.size == len(data) == b.batch_length + 12
    assert b.position == 0
    assert b.records_count == len(records)
    assert b.last_offset_delta == len(records) - 1
    assert b.base_offset == 0 and b.last_offset == len(records) - 1
    assert b.timestamp_type == "CreateTime"
    assert b.max_timestamp == T0 + 9
    assert b.is_transactional is False and b.is_control is False
    assert b.control_type is None
    assert [r.offset for r in b.records] == list(range(len(records)))
    assert _got(b) == _expected(records, T0 + 4)
    # the raw header agrees with the decoded view
    raw = parse_raw_batches(data)[0]
    assert raw.records_count == len(records) and raw.max_timestamp == b.max_timestamp
    assert raw.base_timestamp == b.base_timestamp


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_compression_actually_compresses(codec):
    records = [(None, b"abcdefgh" * 512, [], T0 + i) for i in range(8)]
    plain = ls.encode_batch(records, "none")
    data = ls.encode_batch(records, codec)
    if codec == "none":
        assert data == plain
    else:
        assert len(data) < len(plain) // 4, (codec, len(data), len(plain))
    assert _got(ls.decode_batches(data)[0]) == _got(ls.decode_batches(plain)[0])


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_records_false_skips_records(codec):
    data = ls.encode_batch([(b"k", b"v", [], T0), (b"k2", b"v2", [], T0 + 3)], codec)
    (b,) = ls.decode_batches(data, records=False)
    assert b.records == []
    assert b.records_count == 2
    assert b.max_timestamp == T0 + 3
    assert b.compression == codec


def test_base_timestamp_is_first_record_and_max_is_max():
    data = ls.encode_batch(
        [(None, b"a", [], T0 + 50), (None, b"b", [], T0 + 10), (None, b"c", [], T0 + 70)]
    )
    (b,) = ls.decode_batches(data)
    assert b.base_timestamp == T0 + 50
    assert b.max_timestamp == T0 + 70
    assert [r.timestamp for r in b.records] == [T0 + 50, T0 + 10, T0 + 70]


def test_timestamp_ms_default_and_now():
    import time

    (b,) = ls.decode_batches(ls.encode_batch([(None, b"x")], timestamp_ms=12345))
    assert b.records[0].timestamp == 12345
    before = int(time.time() * 1000)
    (b,) = ls.decode_batches(ls.encode_batch([(None, b"x")]))
    after = int(time.time() * 1000)
    assert before - 5 <= b.records[0].timestamp <= after + 5


def test_header_fields_producer_and_offsets():
    data = ls.encode_batch(
        [(None, b"a", [], T0), (None, b"b", [], T0), (None, b"c", [], T0)],
        "none",
        base_offset=1000,
        partition_leader_epoch=7,
        producer_id=123456789012,
        producer_epoch=3,
        base_sequence=42,
        transactional=True,
    )
    (b,) = ls.decode_batches(data)
    assert b.base_offset == 1000
    assert b.last_offset_delta == 2
    assert b.last_offset == 1002
    assert [r.offset for r in b.records] == [1000, 1001, 1002]
    assert b.partition_leader_epoch == 7
    assert b.producer_id == 123456789012
    assert b.producer_epoch == 3
    assert b.base_sequence == 42
    assert b.last_sequence == 44
    assert b.is_transactional is True
    assert b.attributes & 0x10
    assert b.is_control is False
    raw = parse_raw_batches(data)[0]
    assert (
        raw.base_offset,
        raw.partition_leader_epoch,
        raw.producer_id,
        raw.producer_epoch,
        raw.base_sequence,
    ) == (
        1000,
        7,
        123456789012,
        3,
        42,
    )


def test_no_producer_defaults():
    (b,) = ls.decode_batches(ls.encode_batch([(None, b"a")], timestamp_ms=T0))
    assert b.producer_id == -1
    assert b.producer_epoch == -1
    assert b.base_sequence == -1
    assert b.last_sequence == -1
    assert b.partition_leader_epoch == -1
    assert b.has_delete_horizon is False


def test_last_sequence_wraps_like_kafka():
    # Kafka's DefaultRecordBatch.incrementSequence wraps at Integer.MAX_VALUE.
    data = ls.encode_batch(
        [(None, b"a", [], T0)] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    (b,) = ls.decode_batches(data)
    assert b.base_sequence == 2**31 - 2
    assert b.last_sequence == 0


def test_log_append_time_flag():
    data = ls.encode_batch([(None, b"a", [], T0)], log_append_time=True)
    (b,) = ls.decode_batches(data)
    assert b.timestamp_type == "LogAppendTime"
    assert b.attributes & 0x08


@pytest.mark.parametrize("control_type", [0, 1])
def test_control_batch(control_type):
    data = ls.encode_control_batch(
        control_type,
        producer_id=99,
        producer_epoch=4,
        base_offset=500,
        coordinator_epoch=12,
        partition_leader_epoch=3,
        timestamp_ms=T0,
    )
    (b,) = ls.decode_batches(data)
    assert b.is_control is True
    assert b.is_transactional is True
    assert b.attributes & 0x30 == 0x30
    assert b.control_type == control_type
    assert b.producer_id == 99 and b.producer_epoch == 4
    assert b.base_offset == 500 and b.last_offset == 500
    assert b.partition_leader_epoch == 3
    assert b.records_count == 1
    assert b.max_timestamp == T0
    (r,) = b.records
    # ControlRecordType key: version int16, type int16; EndTransactionMarker value:
    # version int16, coordinatorEpoch int32.
    assert r.key == struct.pack(">hh", 0, control_type)
    assert r.value == struct.pack(">hi", 0, 12)
    assert r.offset == 500 and r.timestamp == T0


@pytest.mark.parametrize("control_type", [0, 1])
def test_control_type_without_records(control_type):
    data = ls.encode_control_batch(control_type, producer_id=1, producer_epoch=0, timestamp_ms=T0)
    data += ls.encode_batch([(b"k", b"v", [], T0)], "zstd", base_offset=1)
    ctrl, normal = ls.decode_batches(data, records=False)
    assert ctrl.records == [] and normal.records == []
    assert ctrl.control_type == control_type
    assert normal.control_type is None


def test_control_batch_golden_bytes():
    record = encode_record(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 9))
    expected = build_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0x30,
        last_offset_delta=0,
        base_timestamp=T0,
        max_timestamp=T0,
        producer_id=7,
        producer_epoch=3,
        base_sequence=-1,
        records_count=1,
        records_blob=record,
    )
    got = ls.encode_control_batch(
        1, producer_id=7, producer_epoch=3, coordinator_epoch=9, timestamp_ms=T0
    )
    assert got == expected


def test_encode_batch_control_flag():
    data = ls.encode_batch(
        [(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0), [], T0)],
        producer_id=5,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    (b,) = ls.decode_batches(data)
    assert b.is_control and b.is_transactional
    assert b.control_type == 0


# ---------------------------------------------------------------------------
# Golden bytes: a RecordBatch v2 built byte by byte from Kafka's layout.
# ---------------------------------------------------------------------------

GOLDEN_RECORDS = [
    (b"k1", b"v1", [("h", b"x")], T0),
    (None, b"v2", [], T0 + 5),
    (b"k3", None, [(b"hb", None), ("e", b"")], T0 + 10),
]


def _golden_bytes() -> bytes:
    recs = b"".join(
        [
            encode_record(0, 0, b"k1", b"v1", [(b"h", b"x")]),
            encode_record(1, 5, None, b"v2"),
            encode_record(2, 10, b"k3", None, [(b"hb", None), (b"e", b"")]),
        ]
    )
    return build_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=2,
        base_timestamp=T0,
        max_timestamp=T0 + 10,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=3,
        records_blob=recs,
    )


def test_golden_bytes_layout_sanity():
    g = _golden_bytes()
    # spot-check the hand-built layout itself
    assert struct.unpack_from(">q", g, 0)[0] == 0
    assert struct.unpack_from(">i", g, 8)[0] == len(g) - 12
    assert g[16] == 2
    assert struct.unpack_from(">I", g, 17)[0] == crc32c(g[21:])
    # first record: length varint then attributes 0, tsDelta 0, offsetDelta 0, keyLen 2 ("\x04")
    assert g[HEADER_SIZE + 1 : HEADER_SIZE + 5] == b"\x00\x00\x00\x04"
    assert zigzag_varint(-1) == b"\x01"
    assert zigzag_varint(300) == b"\xd8\x04"


def test_golden_decode():
    g = _golden_bytes()
    (b,) = ls.decode_batches(g)
    assert b.base_offset == 0
    assert b.last_offset == 2
    assert b.batch_length == len(g) - 12
    assert b.size == len(g)
    assert b.partition_leader_epoch == -1
    assert b.magic == 2
    assert b.crc == struct.unpack_from(">I", g, 17)[0]
    assert b.crc_valid
    assert b.attributes == 0
    assert b.compression == "none"
    assert b.timestamp_type == "CreateTime"
    assert b.base_timestamp == T0
    assert b.max_timestamp == T0 + 10
    assert b.producer_id == -1 and b.producer_epoch == -1 and b.base_sequence == -1
    assert b.records_count == 3
    got = [
        (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in b.records
    ]
    assert got == [
        (0, T0, b"k1", b"v1", [("h", b"x")]),
        (1, T0 + 5, None, b"v2", []),
        (2, T0 + 10, b"k3", None, [("hb", None), ("e", b"")]),
    ]
    # baseOffset is outside the CRC: moving the batch moves the record offsets
    (b,) = ls.decode_batches(with_base_offset(g, 100))
    assert [r.offset for r in b.records] == [100, 101, 102]
    assert b.crc_valid


def test_golden_encode_identical_bytes():
    assert ls.encode_batch(GOLDEN_RECORDS, "none") == _golden_bytes()
    assert ls.encode_batch(GOLDEN_RECORDS) == _golden_bytes()


def test_golden_encode_with_base_offset_and_epoch():
    got = ls.encode_batch(GOLDEN_RECORDS, base_offset=77, partition_leader_epoch=5)
    g = bytearray(_golden_bytes())
    struct.pack_into(">q", g, 0, 77)
    struct.pack_into(">i", g, 12, 5)
    assert got == bytes(g)  # neither field is covered by the CRC


# ---------------------------------------------------------------------------
# Several batches in one buffer, partial tails
# ---------------------------------------------------------------------------


def test_decode_many_batches_positions_and_partial_tail():
    rng = random.Random(1)
    bufs = []
    base = 0
    for i, codec in enumerate(ALL_CODECS * 2):
        n = rng.randint(1, 5)
        recs = [(None, rng.randbytes(rng.randint(0, 50)), [], T0 + i) for _ in range(n)]
        bufs.append(ls.encode_batch(recs, codec, base_offset=base))
        base += n
    data = b"".join(bufs)
    batches = ls.decode_batches(data)
    assert len(batches) == len(bufs)
    pos = 0
    for b, raw in zip(batches, bufs):
        assert b.position == pos
        assert b.size == len(raw)
        pos += len(raw)
    assert [b.compression for b in batches] == list(ALL_CODECS * 2)
    # a trailing partial batch (as a fetch may return) is ignored
    for cut in (1, 11, 12, 60, 61, len(bufs[-1]) - 1):
        partial = data[: len(data) - len(bufs[-1]) + cut]
        got = ls.decode_batches(partial)
        assert len(got) == len(bufs) - 1
        with pytest.raises(ls.CorruptRecordError):
            ls.decode_batches(partial, allow_partial=False)
    assert ls.decode_batches(b"") == []


def test_decode_without_crc_check_reports_invalid():
    data = bytearray(ls.encode_batch([(b"k", b"value", [], T0)]))
    data[-1] ^= 0xFF
    (b,) = ls.decode_batches(bytes(data), verify_crc=False, records=False)
    assert b.crc_valid is False
    with pytest.raises(ls.CorruptRecordError):
        ls.decode_batches(bytes(data))


# ---------------------------------------------------------------------------
# Interop: the compressed payload is the standard stream for each codec
# ---------------------------------------------------------------------------


def _records_section(records) -> bytes:
    return ls.encode_batch(records, "none")[HEADER_SIZE:]


def _with_payload(template: bytes, codec: str, payload: bytes) -> bytes:
    """Replace the records section of an uncompressed batch with a compressed payload."""
    b = bytearray(template[:HEADER_SIZE] + payload)
    struct.pack_into(">i", b, 8, len(b) - 12)
    (attrs,) = struct.unpack_from(">h", b, OFF_ATTRIBUTES)
    struct.pack_into(">h", b, OFF_ATTRIBUTES, (attrs & ~7) | CODEC_IDS[codec])
    return bytes(fix_crc(b))


INTEROP_RECORDS = [
    (b"key%d" % i, b"value-%d-" % i * 20, [("h", b"%d" % i)], T0 + i) for i in range(20)
]


def test_gzip_payload_is_a_gzip_stream():
    data = ls.encode_batch(INTEROP_RECORDS, "gzip")
    assert gzip.decompress(data[HEADER_SIZE:]) == _records_section(INTEROP_RECORDS)


def test_decode_foreign_gzip_payload():
    plain = ls.encode_batch(INTEROP_RECORDS, "none")
    foreign = _with_payload(plain, "gzip", gzip.compress(plain[HEADER_SIZE:]))
    (b,) = ls.decode_batches(foreign)
    assert b.compression == "gzip"
    assert _got(b) == _got(ls.decode_batches(plain)[0])


def _xerial_snappy(cramjam, data: bytes) -> bytes:
    # Java Kafka's (xerial snappy-java) framing: magic, version 1, compat 1, then blocks.
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + 32 * 1024]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def _foreign_payloads(cramjam, section: bytes):
    yield "snappy-raw", "snappy", bytes(cramjam.snappy.compress_raw(section))
    yield "snappy-xerial", "snappy", _xerial_snappy(cramjam, section)
    yield "lz4-frame", "lz4", bytes(cramjam.lz4.compress(section))
    yield "zstd", "zstd", bytes(cramjam.zstd.compress(section))
    yield "gzip", "gzip", gzip.compress(section)


def test_decode_foreign_payloads_every_codec():
    cramjam = pytest.importorskip("cramjam")
    plain = ls.encode_batch(INTEROP_RECORDS, "none")
    want = _got(ls.decode_batches(plain)[0])
    for name, codec, payload in _foreign_payloads(cramjam, plain[HEADER_SIZE:]):
        (b,) = ls.decode_batches(_with_payload(plain, codec, payload))
        assert b.compression == codec, name
        assert _got(b) == want, name


def _unxerial(cramjam, payload: bytes) -> bytes:
    out = bytearray()
    pos = 16
    while pos < len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        out += bytes(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return bytes(out)


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_encoded_payload_decodes_with_standard_library(codec):
    cramjam = pytest.importorskip("cramjam")
    data = ls.encode_batch(INTEROP_RECORDS, codec)
    payload = data[HEADER_SIZE:]
    section = _records_section(INTEROP_RECORDS)
    if codec == "snappy":
        if payload.startswith(b"\x82SNAPPY\x00"):
            got = _unxerial(cramjam, payload)
        else:
            got = bytes(cramjam.snappy.decompress_raw(payload))
    elif codec == "lz4":
        assert payload[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
        got = bytes(cramjam.lz4.decompress(payload))
    else:
        assert payload[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
        got = bytes(cramjam.zstd.decompress(payload))
    assert got == section


def test_bad_compression_name_rejected():
    with pytest.raises((ValueError, ls.LogStoreError)):
        ls.encode_batch([(None, b"x")], "brotli")
