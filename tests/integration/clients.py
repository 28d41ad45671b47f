"""Shared helpers for the real-client integration tests.

Record sets with every kind of key, value, header and timestamp the Kafka format
allows; a reader of the broker's segment files that reports the codec of each stored
batch (so a test can prove a client really compressed, instead of silently falling
back); kcat invocation.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass, field

from tests.support.waiting import wait_until

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)  # [(str, bytes | None)]
    timestamp: int = -1

    def as_tuple(self):
        return (self.key, self.value, list(self.headers), self.timestamp)


def sample_records(
    partitions: int,
    per_partition: int,
    base_ts: int,
    *,
    null_values: bool = True,
    null_header_values: bool = True,
    null_key_and_value: bool = True,
) -> list[Rec]:
    """Records for ``partitions`` partitions, in produce order (interleaved partitions).

    Keys: binary, empty and null. Values: large compressible ones, empty, null
    (tombstones) and binary. Headers: none, several with a repeated key and a null value,
    binary, empty value. Timestamps: explicit, increasing per partition except one that
    goes backwards (a negative timestamp delta inside a batch).
    """
    out = []
    for i in range(per_partition):
        for p in range(partitions):
            kind = i % 6
            key: bytes | None = b"k\x00\xff-%d-%d" % (p, i)
            value: bytes | None = (b"value %d/%d " % (p, i)) * 40
            if kind == 0:
                key = None
            elif kind == 1:
                value = b""
            elif kind == 2 and null_values:
                value = None  # a tombstone: key set, value null
            elif kind == 3:
                key = b""
                value = bytes(range(256)) * 2
            elif kind == 4:
                key = None
                if null_values and null_key_and_value:
                    value = None
            h = i % 4
            if h == 0:
                headers = []
            elif h == 1:
                headers = [
                    ("h1", b"a"),
                    ("h2", None if null_header_values else b"not-null"),
                    ("h1", b"b"),
                ]
            elif h == 2:
                headers = [("bin", bytes(range(256))), ("utf8-\u00e9", "\u2603".encode())]
            else:
                headers = [("empty", b"")]
            ts = base_ts + i * 1000 + p
            if i == 7:
                ts = base_ts - 5000 + p  # goes backwards
            out.append(Rec(p, key, value, headers, ts))
    return out


def by_partition(records: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_partition_contents(
    expected: list[Rec], consumed: dict[int, list[tuple]], first_offset: int = 0
) -> None:
    """``consumed``: partition -> [(offset, key, value, headers, timestamp)] in consume order.

    Every partition must hold exactly the expected records, in produce order, at
    consecutive offsets from ``first_offset``.
    """
    want = by_partition(expected)
    assert sorted(consumed) == sorted(want), (
        f"partitions consumed {sorted(consumed)} != produced {sorted(want)}"
    )
    for p, recs in want.items():
        got = consumed[p]
        assert [g[0] for g in got] == list(range(first_offset, first_offset + len(recs))), (
            f"partition {p} offsets"
        )
        for n, (r, g) in enumerate(zip(recs, got)):
            assert (g[1], g[2], list(g[3]), g[4]) == r.as_tuple(), (
                f"partition {p} record {n} (offset {g[0]})"
            )
        assert len(got) == len(recs), (
            f"partition {p}: {len(got)} records consumed, {len(recs)} produced"
        )


# --- the broker's segment files -------------------------------------------------------


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    codec: int
    records: int
    magic: int
    timestamp_type: int


def stored_batches(data_dir: str, topic: str, partition: int) -> list[StoredBatch]:
    """The batch headers in ``<data_dir>/<topic>-<partition>/*.log``, in offset order."""
    d = os.path.join(data_dir, f"{topic}-{partition}")
    out = []
    for name in sorted(f for f in os.listdir(d) if f.endswith(".log")):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0:
                break
            magic = data[pos + 16]
            attrs = struct.unpack_from(">h", data, pos + 21)[0]
            delta = struct.unpack_from(">i", data, pos + 23)[0]
            count = struct.unpack_from(">i", data, pos + 57)[0]
            out.append(StoredBatch(base, base + delta, attrs & 7, count, magic, (attrs >> 3) & 1))
            pos += 12 + length
    return out


def assert_stored_codec(data_dir: str, topic: str, partitions: int, codec: str) -> None:
    """Every stored batch is magic 2 and uses ``codec`` (or none: clients may skip
    compression for a batch that does not shrink), and at least one uses ``codec``."""
    want = CODECS[codec]
    seen = []
    for p in range(partitions):
        for b in stored_batches(data_dir, topic, p):
            assert b.magic == 2
            seen.append(b.codec)
    assert seen, f"no batches stored for {topic}"
    assert set(seen) <= {0, want}, (
        f"stored codecs {sorted(set(seen))}, expected only {want} ({codec}) or 0"
    )
    assert want in seen, f"no batch stored with codec {codec}: {seen}"


# --- kcat ------------------------------------------------------------------------------


def kcat(
    bootstrap: str,
    *args: str,
    input: bytes | None = None,
    timeout: float = 30.0,
    check: bool = True,
) -> subprocess.CompletedProcess:
    r = subprocess.run(
        ["kcat", "-b", bootstrap, *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if check and r.returncode != 0:
        raise AssertionError(
            f"kcat {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')}"
        )
    return r


# --- topic setup through confluent-kafka (used where the client under test has no admin) -


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)
    wait_until(
        lambda: len(admin.list_topics(name, timeout=5).topics[name].partitions) == partitions,
        message=f"metadata of {name}",
    )


def wire_call(bootstrap: str, body, version: int):
    """One request on a fresh connection, encoded and decoded with the broker's own
    codec, for what no client library can send (e.g. the cluster-wide BROKER config
    resource ``""`` that ``kafka-configs.sh --entity-default`` names)."""
    from logstore.protocol import RequestHeader, encode_request

    host, port = bootstrap.rsplit(":", 1)
    header = RequestHeader(
        api_key=int(body.API_KEY), api_version=version, correlation_id=7, client_id="logstore-tests"
    )
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(encode_request(header, body))
        correlation_id, response = read_response(s, body.API_KEY, version)
    assert correlation_id == 7
    return response


def incremental_alter_configs(
    bootstrap: str, resource_type: int, name: str, *ops, validate_only: bool = False
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of one resource, ``ops`` as (key, operation, value):
    the resource's (error code, error message)."""
    from logstore.protocol.messages.configs import IncrementalAlterConfigsRequest as R

    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    (result,) = wire_call(bootstrap, body, 1).responses
    return result.error_code, result.error_message


def describe_configs(bootstrap: str, resource_type: int, name: str, synonyms: bool = False):
    """DescribeConfigs v4 of one resource, every key: its result."""
    from logstore.protocol.messages.configs import DescribeConfigsRequest as R

    body = R(
        resources=[
            R.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )
    (result,) = wire_call(bootstrap, body, 4).results
    return result


def read_frame(s: socket.socket) -> bytes:
    """The next size-prefixed frame on ``s``, without its size."""
    return _read_exactly(s, int.from_bytes(_read_exactly(s, 4), "big"))


def read_response(s: socket.socket, api_key, version: int):
    """(correlation id, response) of the next response frame on ``s``."""
    from logstore.protocol import decode_response

    return decode_response(read_frame(s), api_key, version)


def _read_exactly(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)
