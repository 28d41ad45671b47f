"""Finding 4: small requests that cost large memory and stalled everyone.

A DescribeGroups v5 naming a million (empty) groups and a Metadata v12 naming a million
distinct topic ids: each is answered in full, as Kafka answers it, while a well-behaved
producer and a probe connection see no pause over a second (the frame is decoded and its
answer encoded on a worker thread, and the per-element work yields the event loop every
few thousand elements), and the broker's peak memory stays within a bound proportional
to the request. Each ends with a SIGKILL at a random moment and every acknowledged
message found again.
"""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import decode_response, encode_request
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.group_admin import DescribeGroupsRequest
from logstore.protocol.messages.metadata import MetadataRequest
from tests.integration.clients import create_topic
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
)

N = 1_000_000


def _peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _ask(port: int, api_key: ApiKey, version: int, body):
    frame = encode_request(
        RequestHeader(api_key=int(api_key), api_version=version, correlation_id=7, client_id="big"),
        body,
    )
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        return len(frame), decode_response(_recv(s, size), api_key, version)[1]


def _recv(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(n - len(out), 1 << 20))
        assert chunk, "the broker closed the connection"
        out += chunk
    return bytes(out)


@pytest.mark.parametrize("case", ["describe_groups", "metadata_by_ids"])
def test_a_million_element_request_is_answered_without_stalling_anyone(broker, case):
    create_topic(broker.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(broker.bootstrap).start()
    if case == "describe_groups":
        size, answer = _ask(
            broker.port,
            ApiKey.DESCRIBE_GROUPS,
            5,
            DescribeGroupsRequest(groups=[""] * N, include_authorized_operations=False),
        )
        assert (
            len(answer.groups) == N
            and len({(g.group_id, g.error_code) for g in answer.groups}) == 1
        )  # one group, described once
    else:
        ids = [uuid.uuid4() for _ in range(N)]
        body = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=i, name=None) for i in ids],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        size, answer = _ask(broker.port, ApiKey.METADATA, 12, body)
        assert len(answer.topics) == N and {t.error_code for t in answer.topics} == {
            100
        }  # UNKNOWN_TOPIC_ID
        assert answer.topics[12345].topic_id == ids[12345]
    well.stop()
    well.assert_responsive()
    # peak memory within 40 times the request (before: 283 MB for 1 MB of DescribeGroups)
    assert _peak_mb(broker.proc.pid) < 80 + 40 * size / 2**20, (
        f"peak {_peak_mb(broker.proc.pid):.0f} MB for a {size / 2**20:.1f} MB request"
    )
    kill_restart_and_check(broker, well.acked)
