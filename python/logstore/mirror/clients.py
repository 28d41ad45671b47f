"""confluent-kafka clients for a flow's two clusters, and reading a topic to its end.

Every client gets its cluster's ``<alias>.*`` properties (then the ``consumer.``,
``producer.`` or ``admin.`` ones) over the mirror's own defaults, so a user setting wins
except where the delivery guarantees depend on it (``enable.auto.commit``,
``enable.idempotence``, ``transactional.id``, ``isolation.level``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.mirror.config import ClientConfig


def admin(client: ClientConfig, name: str) -> AdminClient:
    return AdminClient({"client.id": name, **client.for_admin()})


def producer(client: ClientConfig, name: str, **forced: Any) -> Producer:
    conf: dict[str, Any] = {
        "client.id": name,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "partitioner": "murmur2_random",
        # a bounded queue: a full one blocks the copy (back-pressure) rather than piling
        # up hundreds of MB the target is slow to take
        "queue.buffering.max.kbytes": 65536,
        **client.for_producer(),
        **forced,
    }
    return Producer(conf)


def consumer(client: ClientConfig, group: str, name: str, **forced: Any) -> Consumer:
    conf: dict[str, Any] = {
        "client.id": name,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "session.timeout.ms": 10000,
        **client.for_consumer(),
        "enable.auto.commit": False,
        **forced,
    }
    return Consumer(conf)


def ensure_topic(
    adm: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
) -> None:
    """Creates ``name`` unless it exists (a race with another process is fine)."""
    meta = adm.list_topics(topic=name, timeout=30)
    t = meta.topics.get(name)
    if t is not None and t.error is None and t.partitions:
        return
    futures = adm.create_topics(
        [NewTopic(name, partitions, replication_factor, config=dict(configs))],
        operation_timeout=30,
        request_timeout=30,
    )
    for f in futures.values():
        try:
            f.result()
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise


class TopicReader:
    """Reads every partition of one topic from the beginning, incrementally: each
    :meth:`read_to_end` returns the records appended since the last call, up to the end
    offsets seen at the call's start (read_committed: an open transaction's records wait
    until it ends)."""

    def __init__(self, client: ClientConfig, topic: str, name: str) -> None:
        self.topic = topic
        self._consumer = consumer(
            client, f"{name}-unused", name, **{"isolation.level": "read_committed"}
        )
        self._assigned: set[int] = set()

    def _assign_new(self) -> list[int]:
        meta = self._consumer.list_topics(self.topic, timeout=30)
        t = meta.topics.get(self.topic)
        parts = sorted(t.partitions) if t is not None and t.error is None else []
        new = [p for p in parts if p not in self._assigned]
        if new:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new]
            )
            self._assigned.update(new)
        return sorted(self._assigned)

    def read_to_end(self, timeout: float = 60.0) -> list[Any]:
        """The new messages (confluent Message objects, errors dropped)."""
        parts = self._assign_new()
        wanted: dict[int, int] = {}
        for p in parts:
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), 30)
            if high > low:
                wanted[p] = high
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            if wanted:
                positions = self._consumer.position([TopicPartition(self.topic, p) for p in wanted])
                for tp in positions:
                    if tp.offset >= wanted[tp.partition]:
                        del wanted[tp.partition]
            if not wanted:
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {self.topic} to its end took over {timeout}s")
            for m in self._consumer.consume(1000, 0.2):
                if m.error() is None:
                    out.append(m)

    def close(self) -> None:
        self._consumer.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
