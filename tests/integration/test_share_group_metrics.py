"""Prometheus series of share groups (KIP-932) scraped from a broker alone: records
acquired, in flight and redelivered per group, as a confluent-kafka 2.16 ShareConsumer
in explicit mode acquires, releases and accepts them."""

from __future__ import annotations

import re
import urllib.request
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import incremental_alter_configs
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

GROUP_CONFIG = 32  # IncrementalAlterConfigs resource type GROUP
SERIES = ("acquired_records", "in_flight_records", "redelivered_records_total")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share-metrics")),
        {
            "group.share.enable": "true",
            "metrics.port": str(port),
            "metrics.host": "127.0.0.1",
            "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        },
    )
    b.start()
    b.metrics_port = port
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _scrape(port: int, group: str) -> tuple[float, float, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = []
    for name in SERIES:
        found = re.search(
            rf'^logstore_share_group_{name}\{{group="{re.escape(group)}"\}} (\S+)$', text, re.M
        )
        values.append(float(found.group(1)) if found else -1.0)
    return values[0], values[1], values[2]


def test_acquired_in_flight_and_redelivered(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = f"share-m-{uuid.uuid4().hex[:8]}", f"share-mg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, str(i).encode())
    assert producer.flush(15) == 0
    assert incremental_alter_configs(
        bootstrap, GROUP_CONFIG, group, ("share.auto.offset.reset", 0, "earliest")
    ) == (0, None)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    try:
        # First deliveries: offset 1 accepted, 0 and 2 released.
        first: set[int] = set()

        def first_deliveries() -> bool:
            for m in consumer.poll(0.3):
                assert m.error() is None, m.error()
                if m.delivery_count() == 1:
                    first.add(m.offset())
                kind = AcknowledgeType.ACCEPT if m.offset() == 1 else AcknowledgeType.RELEASE
                consumer.acknowledge(m, kind)
            consumer.commit_sync(10)
            return first == {0, 1, 2}

        wait_until(first_deliveries, timeout=30, message="three first deliveries")

        # The next poll acquires released records again: they stay acquired (not yet
        # acknowledged) while the broker is scraped.
        again = []

        def redelivered() -> bool:
            again.extend(consumer.poll(0.3))
            return bool(again)

        wait_until(redelivered, timeout=30, message="a released record redelivered")
        assert all(m.error() is None and m.delivery_count() == 2 for m in again)
        assert {m.offset() for m in again} <= {0, 2}
        # Both released records are in flight, those redelivered are acquired.
        assert _scrape(broker.metrics_port, group) == (len(again), 2, len(again))

        for m in again:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)
        left = {0, 2} - {m.offset() for m in again}

        def rest_accepted() -> bool:
            for m in consumer.poll(0.3):
                assert m.error() is None, m.error()
                left.discard(m.offset())
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync(10)
            return not left

        wait_until(rest_accepted, timeout=30, message="every record accepted")
        assert _scrape(broker.metrics_port, group) == (0, 0, 2)
    finally:
        consumer.close()
