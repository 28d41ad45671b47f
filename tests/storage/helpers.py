"""Test helpers for the storage suite, independent of the implementation under test.

Everything here is written from Kafka's byte layouts (see shared/DESIGN.md), not
from logstore's code, so the tests can check the implementation against them.
"""

from __future__ import annotations

import os
import pathlib
import random
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# A base timestamp an hour in the past: recent enough that neither segment.ms nor
# retention.ms (7 days by default) acts on its own when tests use the real clock.
RECENT_T0 = (int(time.time() * 1000) // 1000) * 1000 - 3_600_000

# ---------------------------------------------------------------------------
# CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, pure python.
# ---------------------------------------------------------------------------


def _make_crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---------------------------------------------------------------------------
# Varints (zigzag, as Kafka's ByteUtils.writeVarint / writeVarlong)
# ---------------------------------------------------------------------------


def zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # 64-bit zigzag works for 32-bit values too
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    z = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (z >> 1) ^ -(z & 1), pos


# ---------------------------------------------------------------------------
# RecordBatch v2 layout
# ---------------------------------------------------------------------------

HEADER_SIZE = 61
# offsets of the header fields
OFF_BASE_OFFSET = 0
OFF_LENGTH = 8
OFF_PLE = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_BASE_TS = 27
OFF_MAX_TS = 35
OFF_PRODUCER_ID = 43
OFF_PRODUCER_EPOCH = 51
OFF_BASE_SEQUENCE = 53
OFF_RECORDS_COUNT = 57

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    attributes: int = 0,
) -> bytes:
    body = bytearray()
    body += struct.pack(">b", attributes)
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    if key is None:
        body += zigzag_varint(-1)
    else:
        body += zigzag_varint(len(key)) + key
    if value is None:
        body += zigzag_varint(-1)
    else:
        body += zigzag_varint(len(value)) + value
    body += zigzag_varint(len(headers))
    for hk, hv in headers:
        body += zigzag_varint(len(hk)) + hk
        if hv is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(hv)) + hv
    return zigzag_varint(len(body)) + bytes(body)


def build_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    records_blob: bytes,
) -> bytes:
    """Assemble a RecordBatch v2 with a correct batchLength and CRC-32C."""
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        + records_blob
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # ple + magic + crc + rest
    return (
        struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc) + after_crc
    )


def fix_crc(batch: bytearray | bytes, start: int = 0) -> bytearray:
    """Recompute the CRC of the batch starting at ``start`` (in place for a bytearray)."""
    b = batch if isinstance(batch, bytearray) else bytearray(batch)
    (length,) = struct.unpack_from(">i", b, start + OFF_LENGTH)
    end = start + 12 + length
    struct.pack_into(">I", b, start + OFF_CRC, crc32c(bytes(b[start + OFF_ATTRIBUTES : end])))
    return b


@dataclass
class RawBatch:
    """A batch header parsed straight from the bytes (no implementation involved)."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    data: bytes

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def crc_ok(self) -> bool:
        return crc32c(self.data[OFF_ATTRIBUTES:]) == self.crc


def parse_raw_batches(data: bytes) -> list[RawBatch]:
    """Split ``data`` into whole batches; a trailing partial batch is ignored."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + OFF_LENGTH)
        size = length + 12
        if length < HEADER_SIZE - 12 or pos + size > len(data):
            break
        fields = struct.unpack_from(">qiibIhiqqqhii", data, pos)
        out.append(
            RawBatch(
                position=pos,
                size=size,
                base_offset=fields[0],
                partition_leader_epoch=fields[2],
                magic=fields[3],
                crc=fields[4],
                attributes=fields[5],
                last_offset_delta=fields[6],
                base_timestamp=fields[7],
                max_timestamp=fields[8],
                producer_id=fields[9],
                producer_epoch=fields[10],
                base_sequence=fields[11],
                records_count=fields[12],
                data=bytes(data[pos : pos + size]),
            )
        )
        pos += size
    return out


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """baseOffset is not covered by the CRC: rewriting it keeps the batch valid."""
    return struct.pack(">q", base_offset) + bytes(batch[8:])


# ---------------------------------------------------------------------------
# Record generation and comparison
# ---------------------------------------------------------------------------


def record_tuples(batches) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record of decoded batches."""
    out = []
    for b in batches:
        for r in b.records:
            out.append((r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]))
    return out


def norm_headers(
    headers: Iterable[tuple[str | bytes, bytes | None]],
) -> list[tuple[str, bytes | None]]:
    return [(k.decode() if isinstance(k, bytes) else k, v) for k, v in headers]


def random_records(
    rng: random.Random, n: int, ts: int, *, max_value: int = 40, tag: str = ""
) -> list[tuple]:
    recs = []
    for i in range(n):
        key = None if rng.random() < 0.2 else f"k{tag}{i}".encode()
        value = None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, max_value))
        headers = [("h", rng.randbytes(3))] if rng.random() < 0.3 else []
        recs.append((key, value, headers, ts + i))
    return recs


def dir_snapshot(path: str | os.PathLike) -> dict[str, bytes]:
    """Name -> content of every regular file in a directory."""
    out = {}
    for name in sorted(os.listdir(path)):
        p = os.path.join(path, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                out[name] = f.read()
    return out


def log_files(path: str | os.PathLike, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(suffix) and not n.startswith("."))


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def linear_offset_for_timestamp(decoded_batches, target: int, log_start: int = 0):
    """Kafka's ListOffsets by timestamp: first record (by offset) with ts >= target."""
    for b in decoded_batches:
        for r in b.records:
            if r.offset >= log_start and r.timestamp >= target:
                return (r.offset, r.timestamp)
    return None


def check_index_files(partition_dir, base_offset):
    """Check one segment's .index / .timeindex against its .log (after a clean close)."""
    partition_dir = pathlib.Path(partition_dir)
    log_bytes = (partition_dir / segment_name(base_offset, ".log")).read_bytes()
    raws = parse_raw_batches(log_bytes)
    assert sum(r.size for r in raws) == len(log_bytes)
    by_pos = {r.position: r for r in raws}
    idx = (partition_dir / segment_name(base_offset, ".index")).read_bytes()
    assert len(idx) % 8 == 0
    entries = [struct.unpack_from(">II", idx, i) for i in range(0, len(idx), 8)]
    prev = (-1, -1)
    for rel, pos in entries:
        assert pos in by_pos, ("index entry points inside a batch", rel, pos)
        r = by_pos[pos]
        assert r.base_offset <= base_offset + rel <= r.last_offset
        assert (rel, pos) > prev and rel > prev[0] and pos > prev[1]
        prev = (rel, pos)
    tidx = (partition_dir / segment_name(base_offset, ".timeindex")).read_bytes()
    assert len(tidx) % 12 == 0
    tentries = [struct.unpack_from(">qI", tidx, i) for i in range(0, len(tidx), 12)]
    prev_ts, prev_off = -(2**63), -1
    for ts, rel in tentries:
        off = base_offset + rel
        holder = [r for r in raws if r.base_offset <= off <= r.last_offset]
        assert len(holder) == 1, ("time index entry points past the segment", ts, rel)
        r = holder[0]
        assert ts == r.max_timestamp
        assert ts >= max(x.max_timestamp for x in raws if x.position <= r.position)
        assert ts > prev_ts and off >= prev_off
        prev_ts, prev_off = ts, off
    return entries, tentries
