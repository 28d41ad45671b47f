"""Clients held to old protocol versions, against a real broker: message formats v0/v1
written and read back (converted on append and on fetch), consumer groups that commit
through OffsetCommit v0-v2 and resume after a restart.

- kafka-python with ``api_version`` (0, 8, 2), (0, 9), (0, 10) and (0, 11): Produce
  v0/v1/v2/v3 and Fetch v0/v1/v2/v4 (only (0, 11) speaks message format v2);
- librdkafka (confluent-kafka and kcat) with ``api.version.request=false`` and
  ``broker.version.fallback`` 0.8.2, 0.9.0 and 0.10.0: Produce v0/v0/v2, Fetch v0/v0/v2.

kafka-python writes lz4 in message format v0 only with the ``xxhash`` package, which
is not a dependency here; magic 0 lz4 is covered by librdkafka (and by the Rust
fixtures).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration.clients import create_topic, kcat, topic_name

KAFKA_PYTHON_VERSIONS = [(0, 8, 2), (0, 9), (0, 10), (0, 11)]
FALLBACKS = ["0.8.2", "0.9.0", "0.10.0"]
# Message format v1 (timestamps) from 0.10 on.
MAGIC_1_FROM = (0, 10)


def _codecs(version: tuple) -> list[str | None]:
    return [None, "gzip", "snappy", *(["lz4"] if version >= MAGIC_1_FROM else [])]


def _records(n: int) -> list[tuple[bytes | None, bytes | None]]:
    out: list[tuple[bytes | None, bytes | None]] = [
        (b"k%d" % i, b"value-%d-" % i + b"x" * (i * 37 % 300)) for i in range(n)
    ]
    out[1] = (None, out[1][1])  # a null key
    out[2] = (out[2][0], None)  # a tombstone
    return out


def _old_producer(bootstrap: str, version: tuple, codec: str | None) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=version,
        compression_type=codec,
        linger_ms=5,
        request_timeout_ms=15000,
    )


def _read_old(
    bootstrap: str, version: tuple, topic: str, count: int, timeout: float = 20.0
) -> list:
    """(offset, key, value, timestamp) of ``topic``-0 from the start, by kafka-python at
    ``version``."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=version,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(500).values():
                got.extend((m.offset, m.key, m.value, m.timestamp) for m in msgs)
    finally:
        c.close()
    return got


def _conf(bootstrap: str, fallback: str | None = None) -> dict:
    conf = {"bootstrap.servers": bootstrap, "log_level": 3}
    if fallback is not None:
        conf.update({"api.version.request": False, "broker.version.fallback": fallback})
    return conf


def _read_librdkafka(conf: dict, topic: str, count: int, timeout: float = 20.0) -> list:
    """(offset, key, value, timestamp) of ``topic``-0 from offset 0 (every error fails)."""
    c = Consumer({**conf, "group.id": f"read-{time.monotonic_ns()}", "enable.auto.commit": False})
    c.assign([CTopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        c.close()
    return got


def _produce_librdkafka(conf: dict, topic: str, records, codec: str = "none", headers=None) -> None:
    p = Producer({**conf, "compression.codec": codec, "linger.ms": 5})
    errors = []
    for k, v in records:
        p.produce(
            topic,
            key=k,
            value=v,
            headers=headers,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    assert p.flush(20) == 0
    assert errors == []


# --- written in v0/v1, read back by a new client -----------------------------------------


@pytest.mark.parametrize("version", KAFKA_PYTHON_VERSIONS, ids=lambda v: ".".join(map(str, v)))
def test_kafka_python_old_versions_write_what_new_clients_read(module_broker, version) -> None:
    records = _records(12)
    for codec in _codecs(version):
        topic = topic_name(f"kp-{'-'.join(map(str, version))}-{codec}")
        p = _old_producer(module_broker.bootstrap, version, codec)
        sent = [p.send(topic, key=k, value=v) for k, v in records]
        metas = [f.get(15) for f in sent]
        p.close()
        assert [m.offset for m in metas] == list(range(len(records)))
        got = _read_librdkafka(_conf(module_broker.bootstrap), topic, len(records))
        assert [(o, k, v) for o, k, v, _ in got] == [
            (i, k, v) for i, (k, v) in enumerate(records)
        ], codec
        if version >= MAGIC_1_FROM:  # the producer's timestamps are kept
            assert [ts for *_, ts in got] == [m.timestamp for m in metas], codec
        # ... and by the old client itself
        old = _read_old(module_broker.bootstrap, version, topic, len(records))
        assert [(o, k, v) for o, k, v, _ in old] == [
            (i, k, v) for i, (k, v) in enumerate(records)
        ], codec


@pytest.mark.parametrize("fallback", FALLBACKS)
def test_librdkafka_fallback_writes_what_new_clients_read(module_broker, fallback) -> None:
    records = _records(9)
    for codec in ["none", "gzip", "snappy", "lz4"]:
        topic = topic_name(f"rd-{fallback}-{codec}")
        _produce_librdkafka(_conf(module_broker.bootstrap, fallback), topic, records, codec)
        got = _read_librdkafka(_conf(module_broker.bootstrap), topic, len(records))
        assert [(o, k, v) for o, k, v, _ in got] == [
            (i, k, v) for i, (k, v) in enumerate(records)
        ], codec
        old = _read_librdkafka(_conf(module_broker.bootstrap, fallback), topic, len(records))
        assert [(o, k, v) for o, k, v, _ in old] == [
            (i, k, v) for i, (k, v) in enumerate(records)
        ], codec


# --- written by a new client, read through old fetch versions -------------------------------


def test_new_client_records_read_through_every_old_fetch_version(module_broker) -> None:
    records = _records(15)
    topics = {}
    for codec in ["none", "gzip", "snappy", "lz4"]:
        topic = topics[codec] = topic_name(f"new-{codec}")
        # Headers cannot be expressed in v0/v1: down-conversion drops them.
        _produce_librdkafka(
            _conf(module_broker.bootstrap), topic, records, codec, headers=[("h", b"dropped")]
        )
    want = [(i, k, v) for i, (k, v) in enumerate(records)]
    new = _read_librdkafka(_conf(module_broker.bootstrap), topics["none"], len(records))
    for version in KAFKA_PYTHON_VERSIONS:
        for codec, topic in topics.items():
            if codec not in [c or "none" for c in _codecs(version)]:
                continue  # kafka-python reads magic 0 lz4 only with xxhash
            got = _read_old(module_broker.bootstrap, version, topic, len(records))
            assert [(o, k, v) for o, k, v, _ in got] == want, (version, codec)
            if (0, 10) <= version < (0, 11) and codec == "none":
                assert [ts for *_, ts in got] == [
                    ts for *_, ts in new
                ]  # message format v1 carries them
    for fallback in FALLBACKS:
        for codec, topic in topics.items():
            got = _read_librdkafka(_conf(module_broker.bootstrap, fallback), topic, len(records))
            assert [(o, k, v) for o, k, v, _ in got] == want, (fallback, codec)


def test_old_fetch_from_the_middle_of_a_batch(module_broker) -> None:
    topic = topic_name("mid")
    records = _records(10)
    _produce_librdkafka(_conf(module_broker.bootstrap), topic, records, "none")  # one batch
    c = KafkaConsumer(
        bootstrap_servers=module_broker.bootstrap, api_version=(0, 9), enable_auto_commit=False
    )
    c.assign([TopicPartition(topic, 0)])
    c.seek(TopicPartition(topic, 0), 6)
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 4 and time.monotonic() < deadline:
        for msgs in c.poll(500).values():
            got.extend((m.offset, m.value) for m in msgs)
    c.close()
    assert got == [(i, records[i][1]) for i in range(6, 10)]


def test_kcat_with_old_fallbacks(module_broker) -> None:
    for fallback in FALLBACKS:
        topic = topic_name(f"kcat-{fallback}")
        old = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"]
        lines = [f"line-{i}" for i in range(20)]
        kcat(
            module_broker.bootstrap,
            *old,
            "-P",
            "-t",
            topic,
            "-z",
            "gzip",
            input="\n".join(lines).encode() + b"\n",
        )
        out = kcat(
            module_broker.bootstrap,
            *old,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-c",
            "20",
            "-f",
            "%o %s\\n",
        )
        assert out.stdout.decode().splitlines() == [f"{i} line-{i}" for i in range(20)]
        new = kcat(
            module_broker.bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-c",
            "20",
            "-f",
            "%s\\n",
        )
        assert new.stdout.decode().splitlines() == lines


# --- consumer groups held to old versions ------------------------------------------------


def _group_consume(
    bootstrap: str, version: tuple, topic: str, group: str, count: int
) -> list[bytes]:
    """Up to ``count`` values read by a kafka-python consumer of ``group`` at ``version``,
    committed, then closed."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=count,
    )
    if version >= (0, 9):
        c.subscribe([topic])
    else:  # 0.8.2 has no group membership: an assigned consumer that commits to Kafka
        c.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    last = None
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(500, max_records=count - len(got)).values():
                got.extend(m.value for m in msgs)
                last = msgs[-1].offset
        if last is not None:
            c.commit({TopicPartition(topic, 0): OffsetAndMetadata(last + 1, "", -1)})
    finally:
        c.close()
    return got


@pytest.mark.parametrize("version", KAFKA_PYTHON_VERSIONS, ids=lambda v: ".".join(map(str, v)))
def test_kafka_python_group_commits_and_resumes_after_a_restart(broker, version) -> None:
    topic = topic_name("grp")
    group = f"g-{'-'.join(map(str, version))}"
    create_topic(broker.bootstrap, topic)
    values = [b"m%d" % i for i in range(30)]
    p = _old_producer(broker.bootstrap, version, None)
    for v in values:
        p.send(topic, value=v)
    p.flush(15)
    p.close()
    assert _group_consume(broker.bootstrap, version, topic, group, 12) == values[:12]
    broker.restart()
    # After the restart the group resumes where it committed: nothing is read twice.
    assert _group_consume(broker.bootstrap, version, topic, group, 18) == values[12:]


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_librdkafka_group_commits_and_resumes_after_a_restart(broker, fallback) -> None:
    topic = topic_name("rgrp")
    create_topic(broker.bootstrap, topic)
    values = [b"r%d" % i for i in range(30)]
    _produce_librdkafka(_conf(broker.bootstrap, fallback), topic, [(None, v) for v in values])

    def consume(count: int) -> list[bytes]:
        c = Consumer(
            {
                **_conf(broker.bootstrap, fallback),
                "group.id": f"rg-{fallback}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < count and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                assert m.error() is None, m.error()
                got.append(m.value())
                if len(got) == count:
                    c.commit(message=m, asynchronous=False)
        finally:
            c.close()
        return got

    assert consume(10) == values[:10]
    broker.restart()
    assert consume(20) == values[10:]
