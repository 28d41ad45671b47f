"""A compacted topic served by the broker's background cleaner, read by a real client."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _consume_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.monotonic_ns()}", "enable.auto.commit": False})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, low)])
    out, deadline = [], time.monotonic() + timeout
    while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
        for m in c.consume(num_messages=1000, timeout=0.5):
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def test_compacted_topic_keeps_the_latest_value_per_key(broker_factory):
    b = broker_factory({"log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "200"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01", "retention.ms": "1"}
    for f in admin.create_topics([NewTopic("compacted", 1, 1, config=configs)]).values():
        f.result()
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    latest = {}
    for round_ in range(40):
        for k in range(25):
            key, value = b"key-%d" % k, b"value-%d-%d" % (k, round_)
            p.produce("compacted", key=key, value=value)
            latest[key] = value
        p.flush(10)
    produced = 40 * 25
    deadline = time.monotonic() + 30
    while "cleaned compacted-0" not in b.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "cleaned compacted-0" in b.log_text()
    records = _consume_all(b.bootstrap, "compacted")
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert len(records) < produced  # compaction removed overwritten values
    last_seen = {}
    for _, key, value in records:
        last_seen[key] = value
    assert last_seen == latest  # nothing retained was lost; retention.ms=1 does not apply to compact
    assert "Traceback" not in b.log_text()
