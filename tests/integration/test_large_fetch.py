"""Fetch responses far larger than the socket buffer: sendfile must resume on EAGAIN."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def test_large_fetches_complete(broker):
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
