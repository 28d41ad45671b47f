"""Finding 5: partition count limited by file descriptors.

With the descriptor limit at 1,024, a broker takes 3,000 partitions (three descriptors
each before segment files were cached and index files closed after mapping, so 9,000):
it creates them, writes to every one, starts again (cleanly and after a SIGKILL), serves
them, and still accepts connections, its descriptors below the limit throughout.
"""

from __future__ import annotations

import resource
import socket

from tests.integration.clients import create_topic
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
    open_fds,
)

LIMIT = 1024
TOPICS = 3
PER_TOPIC = 1000


def _leos(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(0, partitions, 97)
        ]
    finally:
        c.close()


def test_thousands_of_partitions_on_a_small_descriptor_limit(broker_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    b = broker_factory(
        {"max.broker.partitions": "5000", "max.connections.per.ip.overrides": "127.0.0.1:2000"},
        start=False,
    )
    b.preexec_fn = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for i in range(TOPICS):
        admin.create_topics(
            [NewTopic(f"s{i}", PER_TOPIC, 1)], operation_timeout=120, request_timeout=120
        )[f"s{i}"].result(180)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(TOPICS):
        for part in range(PER_TOPIC):
            p.produce(f"s{i}", b"x", partition=part)
        assert p.flush(120) == 0
    assert open_fds(b.proc.pid) < LIMIT
    b.restart()
    assert open_fds(b.proc.pid) < LIMIT
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    socks = [socket.create_connection(("127.0.0.1", b.port), timeout=5) for _ in range(100)]
    for i in range(TOPICS):
        assert _leos(b.bootstrap, f"s{i}", PER_TOPIC) == [1] * len(range(0, PER_TOPIC, 97))
    for s in socks:
        s.close()
    well.stop()
    well.assert_responsive()
    assert open_fds(b.proc.pid) < LIMIT
    kill_restart_and_check(b, well.acked)
    assert _leos(b.bootstrap, "s2", PER_TOPIC) == [1] * len(range(0, PER_TOPIC, 97))
    assert open_fds(b.proc.pid) < LIMIT
