"""confluent-kafka 2.16's ShareConsumer (KIP-932) reading through ShareFetch and
ShareAcknowledge from a broker alone, with group.share.enable=true and a one-partition
topic: one consumer reads every record (implicit acknowledgement); three consumers share
the records, each delivered to one of them; in explicit mode a RELEASE is redelivered and a
REJECT is not; a SIGKILLed consumer's records are redelivered once their lock expires; a
record released every time stops at the delivery-count limit."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import incremental_alter_configs
from tests.integration.conftest import BrokerProcess
from tests.support.processes import kill
from tests.support.waiting import wait_until

GROUP_CONFIG = 32  # IncrementalAlterConfigs resource type GROUP
LOCK_MS = 2000
DELIVERY_LIMIT = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share-consumer")),
        {
            "group.share.enable": "true",
            "group.share.min.session.timeout.ms": "2000",
            "group.share.session.timeout.ms": "3000",
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "500",
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
            "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        },
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_with(bootstrap: str, count: int) -> str:
    """A new one-partition topic holding values b'0'..b'count-1'."""
    topic = _name("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, str(i).encode())
    assert producer.flush(15) == 0
    return topic


def _group(bootstrap: str, lock_ms: int = 30000) -> str:
    group = _name("share-g")
    ops = [("share.auto.offset.reset", 0, "earliest")]
    if lock_ms != 30000:
        ops.append(("share.record.lock.duration.ms", 0, str(lock_ms)))
    assert incremental_alter_configs(bootstrap, GROUP_CONFIG, group, *ops) == (0, None)
    return group


def _consumer(bootstrap: str, group: str, topic: str, mode: str = "implicit") -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": mode,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _values(messages) -> list[int]:
    out = []
    for m in messages:
        assert m.error() is None, m.error()
        out.append(int(m.value()))
    return out


def test_one_consumer_reads_every_record(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 50)
    group = _group(bootstrap)
    consumer = _consumer(bootstrap, group, topic)
    seen: list[int] = []
    try:

        def all_read() -> bool:
            seen.extend(_values(consumer.poll(0.5)))
            return len(seen) >= 50

        wait_until(all_read, timeout=30, message="the share consumer to read 50 records")
    finally:
        consumer.close()
    assert sorted(seen) == list(range(50))


def test_three_consumers_share_the_records(broker) -> None:
    """Each record goes to exactly one of three consumers on one partition."""
    bootstrap = broker.bootstrap
    count = 60
    topic = _topic_with(bootstrap, count)
    group = _group(bootstrap)
    consumers = [_consumer(bootstrap, group, topic) for _ in range(3)]
    seen: list[list[int]] = [[], [], []]
    try:

        def all_read() -> bool:
            for i, consumer in enumerate(consumers):
                seen[i].extend(_values(consumer.poll(0.2)))
            return sum(map(len, seen)) >= count

        wait_until(all_read, timeout=40, message="three share consumers to read the records")
        for i, consumer in enumerate(consumers):  # nothing comes twice
            seen[i].extend(_values(consumer.poll(0.3)))
    finally:
        for consumer in consumers:
            consumer.close()
    everything = [v for values in seen for v in values]
    assert sorted(everything) == list(range(count))


def test_explicit_release_reject_and_the_delivery_limit(broker) -> None:
    """Offset 0 released once then accepted comes twice; offset 1 rejected comes once;
    offset 2 released every time comes group.share.delivery.count.limit times."""
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 3)
    group = _group(bootstrap)
    consumer = _consumer(bootstrap, group, topic, "explicit")
    deliveries: dict[int, list[int]] = {0: [], 1: [], 2: []}
    try:

        def handle(wait_s: float) -> None:
            for m in consumer.poll(wait_s):
                assert m.error() is None, m.error()
                offset = m.offset()
                deliveries[offset].append(m.delivery_count())
                if offset == 1:
                    kind = AcknowledgeType.REJECT
                elif offset == 0 and len(deliveries[0]) == 1 or offset == 2:
                    kind = AcknowledgeType.RELEASE
                else:
                    kind = AcknowledgeType.ACCEPT
                consumer.acknowledge(m, kind)

        def done() -> bool:
            handle(0.3)
            return len(deliveries[0]) == 2 and len(deliveries[2]) == DELIVERY_LIMIT

        wait_until(done, timeout=30, message="the released records to come back")
        for _ in range(4):  # nothing more comes
            handle(0.3)
        consumer.commit_sync(10)
    finally:
        consumer.close()
    assert deliveries == {0: [1, 2], 1: [1], 2: list(range(1, DELIVERY_LIMIT + 1))}


_HOLDER = """
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    got = [m.offset() for m in c.poll(0.5) if m.error() is None]
    if got:
        print(" ".join(map(str, got)), flush=True)
        break
sys.stdin.read()
"""


def test_a_killed_consumers_records_come_back_after_the_lock(broker) -> None:
    """A consumer SIGKILLed holding records: they go to another consumer once their
    acquisition lock (the group's share.record.lock.duration.ms) expires."""
    bootstrap = broker.bootstrap
    count = 20
    topic = _topic_with(bootstrap, count)
    group = _group(bootstrap, lock_ms=LOCK_MS)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, bootstrap, group, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        held = sorted(map(int, line.split()))
        assert held, "the holder acquired nothing"
    finally:
        kill(holder)
    consumer = _consumer(bootstrap, group, topic)
    counts: dict[int, int] = {}
    try:

        def all_read() -> bool:
            for m in consumer.poll(0.3):
                assert m.error() is None, m.error()
                counts[m.offset()] = m.delivery_count()
            return len(counts) >= count

        wait_until(all_read, timeout=30, message="the killed consumer's records to come back")
    finally:
        consumer.close()
    assert sorted(counts) == list(range(count))
    assert {o for o, c in counts.items() if c == 2} == set(held)
