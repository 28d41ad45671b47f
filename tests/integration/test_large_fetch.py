"""Fetch responses far larger than the socket buffer: sendfile must resume on EAGAIN."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def test_large_fetches_complete(module_broker):
    broker = module_broker
    value = os.urandom(1000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    n = 60_000  # ~60 MB: each fetch response is many times the loopback socket buffer
    for i in range(n):
        p.produce("big", value=value, key=b"%d" % i)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "big",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 32 << 20,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition("big", 0, 0)])
    got, last_offset, deadline = 0, -1, time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        for m in c.consume(num_messages=min(10_000, n - got), timeout=1.0):
            assert m.error() is None, m.error()
            assert m.offset() == last_offset + 1
            last_offset = m.offset()
            got += 1
    c.close()
    assert got == n
    assert "Traceback" not in broker.log_text()


def _fetch_frame(bootstrap: str, topic: str, partitions: int, slow: bool) -> bytes:
    """One Fetch v12 of every partition from offset 0 over a raw socket, its response
    frame read whole; ``slow``: a 4 KiB receive buffer, read only after a pause, so the
    broker's first, immediate send stops short and the rest follows asynchronously."""
    import socket

    from logstore.protocol.frame import encode_request
    from logstore.protocol.headers import RequestHeader
    from logstore.protocol.messages.fetch import FetchRequest

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=16 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=i,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=8 << 20,
                    )
                    for i in range(partitions)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    header = RequestHeader(api_key=1, api_version=12, correlation_id=7, client_id="t")
    with socket.socket() as s:
        if slow:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(30)
        s.connect((host, int(port)))
        s.sendall(encode_request(header, request))
        if slow:
            time.sleep(0.3)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = s.recv(1 << 16)
            assert chunk, "connection closed mid-response"
            data += chunk
    return data


def test_small_and_large_slices_in_one_response(module_broker):
    broker = module_broker
    """A response mixing record slices read into the frame (small) and sent by sendfile
    (large) arrives whole and in order, read at once or slowly."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from logstore.protocol.api_keys import ApiKey
    from logstore.protocol.frame import decode_response

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("mixed", num_partitions=3)])["mixed"].result(30)
    sizes = {0: (200, 5), 1: (1000, 400), 2: (300, 3)}  # partition: (value size, count)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for part, (size, count) in sizes.items():
        for i in range(count):
            p.produce("mixed", value=bytes([65 + part]) * (size - 6) + b"%06d" % i, partition=part)
    assert p.flush(30) == 0
    fast = _fetch_frame(broker.bootstrap, "mixed", 3, slow=False)
    slow = _fetch_frame(broker.bootstrap, "mixed", 3, slow=True)
    assert fast == slow
    _, body = decode_response(fast[4:], ApiKey.FETCH, 12)
    (topic,) = body.responses
    for pd in topic.partitions:
        size, count = sizes[pd.partition_index]
        assert pd.error_code == 0
        records = bytes(pd.records)
        for i in range(count):
            assert bytes([65 + pd.partition_index]) * 10 in records
            assert b"%06d" % i in records
    assert len(bytes(topic.partitions[1].records)) > 64 << 10  # the sendfile path
    assert len(bytes(topic.partitions[0].records)) < 64 << 10  # read into the frame
