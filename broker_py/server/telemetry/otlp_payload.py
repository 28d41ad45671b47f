"""A PushTelemetry payload: decompressed, then read as an OpenTelemetry ``MetricsData``
protobuf (the ``opentelemetry-proto`` package) into data points.

Compression ids are the record batch ones: 0 none, 1 gzip, 2 snappy (xerial-framed, as
Kafka's Java client writes it, or a bare snappy block, as librdkafka does), 3 lz4 (the
LZ4 frame format), 4 zstd. Decompression stops past ``limit`` bytes
(:class:`PayloadTooLarge`), so a small payload cannot make the broker allocate more.

Points kept: gauges and sums, int or double, with their attributes (string, bool, int
and double values, as text). A sum with delta temporality is a change since the
client's previous push; :class:`Point` says which. Histograms and summaries are
skipped (librdkafka's and the Java client's KIP-714 metrics are gauges and sums).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import lz4.frame
import snappy
import zstandard
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    MetricsData,
    NumberDataPoint,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, then version and compatible version (int32 each)


class PayloadTooLarge(Exception):
    """The payload decompresses to more than the limit."""


class BadPayload(Exception):
    """The payload does not decompress or does not decode."""


@dataclass(frozen=True)
class Point:
    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    delta: bool  # a delta sum: add to the previous total


def decompress(data: bytes, compression_type: int, limit: int) -> bytes:
    try:
        if compression_type == NONE:
            out = data
        elif compression_type == GZIP:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(data, limit + 1)
            if len(out) <= limit and not d.eof:
                raise BadPayload("truncated gzip data")
        elif compression_type == SNAPPY:
            out = _snappy(data, limit)
        elif compression_type == LZ4:
            frame = lz4.frame.LZ4FrameDecompressor()
            out = frame.decompress(data, max_length=limit + 1)
            if len(out) <= limit and not frame.eof:
                raise BadPayload("truncated lz4 frame")
        elif compression_type == ZSTD:
            out = _zstd(data, limit)
        else:
            raise BadPayload(f"unknown compression type {compression_type}")
    except (PayloadTooLarge, BadPayload):
        raise
    except Exception as e:  # each library's own error for corrupt input
        raise BadPayload(f"cannot decompress the payload: {e}") from None
    if len(out) > limit:
        raise PayloadTooLarge(f"the payload decompresses to more than {limit} bytes")
    return out


def _zstd(data: bytes, limit: int) -> bytes:
    """The first zstd frame of ``data``, read to ``limit + 1`` bytes at most; only once
    that is within the limit is the frame decoded whole, to learn that it is complete."""
    with zstandard.ZstdDecompressor().stream_reader(data) as reader:
        out = reader.read(limit + 1)
    if len(out) > limit:
        return out
    whole = zstandard.ZstdDecompressor().decompressobj()
    out = whole.decompress(data)
    if not whole.eof:
        raise BadPayload("truncated zstd frame")
    return out


def _snappy_block(block: bytes, limit: int) -> bytes:
    size, shift = 0, 0
    for i, byte in enumerate(block[:5]):
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
        if i == 4:
            raise BadPayload("bad snappy length")
    if size > limit:
        raise PayloadTooLarge(f"the payload decompresses to more than {limit} bytes")
    return bytes(snappy.uncompress(block))


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, limit)
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(data):
        if pos + 4 > len(data):
            raise BadPayload("truncated xerial snappy block")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise BadPayload("truncated xerial snappy block")
        out += _snappy_block(data[pos : pos + length], limit - len(out))
        pos += length
    return bytes(out)


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return repr(value.double_value)
    return ""


def _number(point: NumberDataPoint) -> float:
    return float(point.as_int if point.WhichOneof("value") == "as_int" else point.as_double)


def decode(data: bytes) -> list[Point]:
    """The gauge and sum points of a serialized ``MetricsData``; BadPayload if it is not
    one."""
    message = MetricsData()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise BadPayload(f"not an OpenTelemetry MetricsData message: {e}") from None
    out = []
    for resource in message.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points, delta = metric.gauge.data_points, False
                elif kind == "sum":
                    points = metric.sum.data_points
                    delta = metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA
                else:
                    continue
                for p in points:
                    attributes = tuple(sorted((a.key, _text(a.value)) for a in p.attributes))
                    out.append(Point(metric.name, attributes, _number(p), delta))
    return out
