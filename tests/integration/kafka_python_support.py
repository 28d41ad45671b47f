"""kafka-python clients set up for the tests against a real broker: admin, topics,
producers and consumers with the tests' settings, and draining a consumer."""

from __future__ import annotations

import time

import kafka.codec
from kafka import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
)

from tests.integration.clients import (
    Rec,
    sample_records,
)

CODEC_LIBS = {
    "none": (lambda: True, None),
    "gzip": (kafka.codec.has_gzip, None),
    "snappy": (kafka.codec.has_snappy, "python-snappy"),
    "lz4": (kafka.codec.has_lz4, "lz4"),
    "zstd": (kafka.codec.has_zstd, "zstandard"),
}


# --- helpers ---------------------------------------------------------------------------


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def create(bootstrap: str, name: str, partitions: int, configs: dict | None = None) -> None:
    a = admin(bootstrap)
    try:
        a.create_topics(
            {
                name: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs or {},
                }
            },
            wait_for_metadata=True,
        )
    finally:
        a.close()


def producer(bootstrap: str, **extra) -> KafkaProducer:
    return KafkaProducer(
        **{"bootstrap_servers": bootstrap, "linger_ms": 20, "request_timeout_ms": 15000, **extra}
    )


def produce(
    bootstrap: str,
    topic: str,
    records,
    flush_every: int | None = None,
    p: KafkaProducer | None = None,
    **extra,
) -> list:
    """Sends ``records`` and returns their RecordMetadata in produce order."""
    own = p is None
    p = p or producer(bootstrap, **extra)
    try:
        futures = []
        for n, r in enumerate(records):
            futures.append(
                p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=list(r.headers),
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                )
            )
            if flush_every and (n + 1) % flush_every == 0:
                p.flush(30)
        p.flush(30)
        return [f.get(timeout=30) for f in futures]
    finally:
        if own:
            p.close(timeout=10)


def consumer(bootstrap: str, **extra) -> KafkaConsumer:
    conf = {
        "bootstrap_servers": bootstrap,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 15000,
    }
    conf.update(extra)
    return KafkaConsumer(**conf)


def drain(c: KafkaConsumer, count: int, timeout: float = 30) -> dict:
    """Polls until ``count`` records arrived; partition -> [(offset, key, value, headers, ts)]."""
    out: dict[int, list] = {}
    n = 0
    deadline = time.monotonic() + timeout
    while n < count:
        assert time.monotonic() < deadline, f"consumed {n}/{count}"
        for tp, recs in c.poll(timeout_ms=200).items():
            for r in recs:
                assert r.timestamp_type == 0  # CreateTime
                out.setdefault(tp.partition, []).append(
                    (r.offset, r.key, r.value, list(r.headers or []), r.timestamp)
                )
                n += 1
    # Nothing more arrives.
    assert not c.poll(timeout_ms=300), "more records than produced"
    return out


def consume_partitions(
    bootstrap: str, topic: str, partitions: int, count: int, start: int | None = None, **extra
) -> dict:
    c = consumer(bootstrap, **extra)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        if start is None:
            c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, start)
        return drain(c, count)
    finally:
        c.close()


def kp_records(partitions: int, per_partition: int, base_ts: int) -> list[Rec]:
    # kafka-python refuses null header values and records with neither key nor value.
    return sample_records(
        partitions, per_partition, base_ts, null_header_values=False, null_key_and_value=False
    )
