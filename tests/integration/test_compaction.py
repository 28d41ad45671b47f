"""A compacted topic served by the broker's background cleaner, read by a real client."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _consume_all(
    bootstrap: str, topic: str, timeout: float = 30.0
) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{time.monotonic_ns()}",
            "enable.auto.commit": False,
        }
    )
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
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
        "retention.ms": "1",
    }
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
    assert (
        last_seen == latest
    )  # nothing retained was lost; retention.ms=1 does not apply to compact
    assert "Traceback" not in b.log_text()


def _create(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        f.result()


def _scan(
    bootstrap: str, topic: str, start: int, end: int, reset: str = "earliest", timeout: float = 30.0
):
    """Records of [start, end) read by a fresh consumer assigned at ``start``."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scan-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
        }
    )
    c.assign([TopicPartition(topic, 0, start)])
    out, deadline = [], time.monotonic() + timeout
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error() is not None:
                    return out, m.error()
                out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out, None


def test_a_consumer_sees_a_consistent_view_while_cleaning_runs(broker_factory):
    b = broker_factory({"log.cleaner.backoff.ms": "100", "log.cleaner.threads": "2"})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    _create(b.bootstrap, "busy", configs)
    produced: dict[int, tuple[bytes, bytes]] = {}

    def delivered(err, msg):
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    scans = 0
    for round_ in range(60):
        for k in range(20):
            p.produce(
                "busy", key=b"key-%d" % k, value=b"v-%d-%d" % (k, round_), on_delivery=delivered
            )
        p.flush(10)
        if round_ % 15 == 14:
            # A full read while the cleaner rewrites segments under it.
            high = max(produced) + 1
            got, err = _scan(b.bootstrap, "busy", 0, high)
            assert err is None, err
            scans += 1
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            for offset, key, value in got:
                assert produced[offset] == (key, value), offset  # never moved nor changed
            seen = {key: offset for offset, key, _ in got}
            for offset, (key, _) in produced.items():
                if offset < high:
                    assert seen[key] >= offset, (key, offset)  # the latest is never lost
    assert scans == 4
    deadline = time.monotonic() + 30
    while b.log_text().count("cleaned busy-0") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b.log_text().count("cleaned busy-0") >= 2
    got, _ = _scan(b.bootstrap, "busy", 0, max(produced) + 1)
    assert len(got) < len(produced) / 3
    # A fetch at an offset compaction removed returns the next retained record.
    kept = [o for o, _, _ in got]
    removed = next(o for o in range(kept[-1]) if o not in set(kept))
    after, err = _scan(b.bootstrap, "busy", removed, removed + 1)
    assert err is None
    # The cleaner may have removed more since the scan: never less.
    assert after[0][0] >= min(o for o in kept if o > removed)
    assert produced[after[0][0]] == after[0][1:]
    assert "Traceback" not in b.log_text()


def test_below_the_log_start_offset_is_out_of_range(broker_factory):
    b = broker_factory({"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "100"})
    configs = {
        "cleanup.policy": "compact,delete",
        "segment.bytes": "4096",
        "retention.bytes": "8192",
    }
    _create(b.bootstrap, "trimmed", configs)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(400):
        p.produce("trimmed", key=b"key-%d" % i, value=b"x" * 50)
        if i % 50 == 49:
            p.flush(10)
    p.flush(10)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "wm"})
    deadline = time.monotonic() + 30
    while (
        low := c.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=10)[0]
    ) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    c.close()
    assert low > 0, "retention.bytes deleted no segment"
    got, err = _scan(b.bootstrap, "trimmed", 0, low + 1, reset="earliest")
    assert err is None and got[0][0] >= low
    _, err = _scan(b.bootstrap, "trimmed", 0, low + 1, reset="error", timeout=10)
    assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
