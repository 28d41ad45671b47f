"""Kafka's transactions_test: a consume-transform-produce loop copies a topic exactly
once while brokers are hard-bounced. Real ZooKeeper, three broker processes,
confluent-kafka clients; ``CHAOS_CLIENT_DEBUG`` (see tests/cluster/chaos/scenario.py)
logs the clients' librdkafka debug contexts next to the brokers' logs.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.cluster.chaos.scenario import _client_debug
from tests.cluster.test_coordinators import _read_committed, _txn_producer, cluster  # noqa: F401 - the fixture

# What OffsetFetch answers while the group's coordinator moves (a bounce): asked again.
_COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
}


def _committed(consumer: Consumer) -> list[TopicPartition]:
    """The group's committed offsets of the consumer's partitions, asked again (for up to
    60 s) while its coordinator moves."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return consumer.committed(consumer.assignment(), 30)
        except KafkaException as e:
            if (
                e.args[0].code() not in _COORDINATOR_MOVING and not e.args[0].retriable()
            ) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_an_exactly_once_copy_survives_hard_bounces(cluster):  # noqa: F811
    """Kafka's transactions_test: a consume-transform-produce loop (read_committed input,
    send_offsets_to_transaction) copies a topic while brokers are hard-bounced; the output
    holds each input message exactly once."""
    import threading

    from tests.cluster.harness import faults

    c = cluster
    n = 2000
    c.create_topic(
        "eos-in", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    c.create_topic(
        "eos-out", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    p = Producer(
        {"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    for i in range(n):
        p.produce("eos-in", b"%d" % i, partition=i % 3)
    assert p.flush(60) == 0

    bounced: list[int] = []
    bounce_errors: list[BaseException] = []

    def bounce(stop: threading.Event) -> None:
        try:
            for victim in (1, 2):
                if stop.wait(0.5):
                    return
                c.broker(victim).kill()
                c.broker(victim).start()
                faults.wait_full_isr(c, "eos-in", 60)
                bounced.append(victim)
        except BaseException as e:  # noqa: BLE001 - reported after the copy
            bounce_errors.append(e)

    stop = threading.Event()
    bouncer = threading.Thread(target=bounce, args=(stop,), daemon=True)
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "group.id": "copier",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            **_client_debug(c, "consumer").get("confluent", {}),
        }
    )
    producer = _txn_producer(c, "copier-tx", **_client_debug(c, "producer").get("confluent", {}))
    copied = 0
    transactions: list[int] = []
    bouncer.start()
    try:
        consumer.subscribe(["eos-in"])
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            msgs = [
                m for m in consumer.consume(20, 0.5) if not m.error()
            ]  # many small transactions
            if not msgs:
                if copied >= n and not bouncer.is_alive():
                    break
                continue
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce("eos-out", m.value(), partition=m.partition())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
                )
                producer.commit_transaction(30)
                copied += len(msgs)
                transactions.append(len(msgs))
            except KafkaException as e:
                if e.args[0].fatal():
                    raise
                if e.args[0].txn_requires_abort():
                    producer.abort_transaction(30)
                # rewind to what the group committed: the batch is copied again
                committed = _committed(consumer)
                for tp in committed:
                    consumer.seek(
                        TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0)
                    )
        # What the loop reached, for a failure report: a copy that made no progress shows
        # whether records came in (copied) and where the consumer stood.
        progress = f"copied {copied} in {len(transactions)} transactions, positions " + str(
            [(tp.partition, tp.offset) for tp in consumer.position(consumer.assignment())]
        )
    finally:
        stop.set()
        bouncer.join(90)
        consumer.close()
    assert not bounce_errors and bounced == [1, 2], (bounced, bounce_errors)
    out = _read_committed(c, "eos-out", 3)
    assert sorted(out) == sorted(b"%d" % i for i in range(n)), (
        f"{len(out)} records, {len(set(out))} distinct; {progress}"
    )
    assert len(transactions) >= 10  # many small transactions, some across the bounces
