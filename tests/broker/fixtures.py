"""Golden request frames, assembled byte by byte with ``struct``.

Each builder writes the wire format directly from the protocol's layout,
independently of the codec under test, in the shape real clients send:
librdkafka (client id "rdkafka"), kafka-python ("kafka-python-3.0.12").
"""

from __future__ import annotations

import struct


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def string(s: str | None) -> bytes:
    """int16 length + UTF-8; -1 for null."""
    if s is None:
        return i16(-1)
    data = s.encode()
    return i16(len(data)) + data


def compact_string(s: str | None) -> bytes:
    """unsigned varint length+1 + UTF-8; 0 for null."""
    if s is None:
        return b"\x00"
    data = s.encode()
    return uvarint(len(data) + 1) + data


def nbytes(b: bytes | None) -> bytes:
    """int32 length + bytes; -1 for null."""
    return i32(-1) if b is None else i32(len(b)) + b


def compact_bytes(b: bytes | None) -> bytes:
    return b"\x00" if b is None else uvarint(len(b) + 1) + b


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def tags(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def request_header_v1(
    api_key: int, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    return i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)


def request_header_v2(
    api_key: int, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    # client_id keeps its int16 length in header v2.
    return request_header_v1(api_key, version, correlation_id, client_id) + NO_TAGS


# --------------------------------------------------------------------------
# A RecordBatch v2 as producers build it (one record, no compression).


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def record_batch(key: bytes, value: bytes, timestamp: int = 1700000000000) -> bytes:
    body = i8(0) + zigzag(0) + zigzag(0)  # attributes, timestampDelta, offsetDelta
    body += zigzag(len(key)) + key + zigzag(len(value)) + value + zigzag(0)  # no headers
    record = zigzag(len(body)) + body
    after_crc = (
        i16(0)  # attributes: no codec, CreateTime
        + i32(0)  # lastOffsetDelta
        + i64(timestamp)  # baseTimestamp
        + i64(timestamp)  # maxTimestamp
        + i64(-1)  # producerId
        + i16(-1)  # producerEpoch
        + i32(-1)  # baseSequence
        + i32(1)  # recordsCount
        + record
    )
    crc = struct.pack(">I", crc32c(after_crc))
    tail = i32(-1) + i8(2) + crc + after_crc  # partitionLeaderEpoch, magic, crc
    return i64(0) + i32(len(tail)) + tail  # baseOffset, batchLength


# --------------------------------------------------------------------------
# Requests


def api_versions_v3_librdkafka() -> bytes:
    """librdkafka's first request on a connection (KIP-511 software name)."""
    body = compact_string("librdkafka") + compact_string("2.0.2") + NO_TAGS
    return frame(request_header_v2(18, 3, 1, "rdkafka") + body)


def metadata_v1_kafka_python(topics: list[str] | None) -> bytes:
    """kafka-python's Metadata v1 (used against a 0.10-era broker profile)."""
    topic_array = i32(-1) if topics is None else array([string(t) for t in topics])
    return frame(request_header_v1(3, 1, 2, "kafka-python-3.0.12") + topic_array)


PRODUCE_BATCH = record_batch(b"key-1", b"hello logstore")


def produce_v3() -> bytes:
    body = (
        string(None)  # transactional_id
        + i16(-1)  # acks = all
        + i32(30000)  # timeout_ms
        + array([string("test") + array([i32(0) + nbytes(PRODUCE_BATCH)])])
    )
    return frame(request_header_v1(0, 3, 3, "rdkafka") + body)


def fetch_v4() -> bytes:
    body = (
        i32(-1)  # replica_id
        + i32(500)  # max_wait_ms
        + i32(1)  # min_bytes
        + i32(52428800)  # max_bytes
        + i8(0)  # isolation_level
        + array([string("test") + array([i32(0) + i64(42) + i32(1048576)])])
    )
    return frame(request_header_v1(1, 4, 4, "rdkafka") + body)


def fetch_v11() -> bytes:
    partition = (
        i32(0)  # partition
        + i32(5)  # current_leader_epoch
        + i64(42)  # fetch_offset
        + i64(-1)  # log_start_offset
        + i32(1048576)  # partition_max_bytes
    )
    body = (
        i32(-1)
        + i32(500)
        + i32(1)
        + i32(52428800)
        + i8(1)  # read_committed
        + i32(0)  # session_id
        + i32(-1)  # session_epoch
        + array([string("test") + array([partition])])
        + array([])  # forgotten_topics_data
        + string("rack-a")  # rack_id
    )
    return frame(request_header_v1(1, 11, 5, "rdkafka") + body)


def fetch_v12() -> bytes:
    """The first flexible Fetch, with the tagged cluster_id set."""
    partition = (
        i32(0)
        + i32(5)
        + i64(42)
        + i32(4)  # last_fetched_epoch
        + i64(-1)
        + i32(1048576)
        + NO_TAGS
    )
    body = (
        i32(-1)
        + i32(500)
        + i32(1)
        + i32(52428800)
        + i8(0)
        + i32(0)
        + i32(-1)
        + compact_array([compact_string("test") + compact_array([partition]) + NO_TAGS])
        + compact_array([])
        + compact_string("")
        + tags({0: compact_string("my-cluster")})
    )
    return frame(request_header_v2(1, 12, 6, "rdkafka") + body)


def consumer_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the JoinGroup ``metadata`` bytes."""
    return i16(0) + array([string(t) for t in topics]) + nbytes(None)


def join_group_v0() -> bytes:
    body = (
        string("my-group")
        + i32(10000)  # session_timeout_ms
        + string("")  # member_id
        + string("consumer")
        + array([string("range") + nbytes(consumer_subscription(["test"]))])
    )
    return frame(request_header_v1(11, 0, 7, "rdkafka") + body)


def join_group_v5() -> bytes:
    body = (
        string("my-group")
        + i32(10000)  # session_timeout_ms
        + i32(300000)  # rebalance_timeout_ms
        + string("")  # member_id
        + string("instance-1")  # group_instance_id
        + string("consumer")
        + array(
            [
                string("range") + nbytes(consumer_subscription(["test"])),
                string("roundrobin") + nbytes(consumer_subscription(["test"])),
            ]
        )
    )
    return frame(request_header_v1(11, 5, 8, "aiokafka-0.14.0") + body)


GOLDEN_REQUESTS = {
    "api_versions_v3": api_versions_v3_librdkafka,
    "metadata_v1": lambda: metadata_v1_kafka_python(["my-topic", "other"]),
    "metadata_v1_all": lambda: metadata_v1_kafka_python(None),
    "produce_v3": produce_v3,
    "fetch_v4": fetch_v4,
    "fetch_v11": fetch_v11,
    "fetch_v12": fetch_v12,
    "join_group_v0": join_group_v0,
    "join_group_v5": join_group_v5,
}
