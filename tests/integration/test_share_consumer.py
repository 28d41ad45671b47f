"""confluent-kafka 2.16's ShareConsumer (KIP-932) reading through ShareFetch and
ShareAcknowledge from a broker alone, with group.share.enable=true and a one-partition
topic: one consumer reads every record (implicit acknowledgement); three consumers share
the records, each delivered to one of them; in explicit mode a RELEASE is redelivered and a
REJECT is not; a SIGKILLed consumer's records are redelivered once their lock expires; a
record released every time stops at the delivery-count limit."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import incremental_alter_configs
from tests.integration.conftest import BrokerProcess
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
