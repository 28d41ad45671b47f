"""Kafka's transactions_test: a consume-transform-produce loop copies a topic exactly
once while brokers are hard-bounced. Real ZooKeeper, three broker processes,
confluent-kafka clients; ``CHAOS_CLIENT_DEBUG`` (see tests/cluster/chaos/scenario.py)
logs the clients' librdkafka debug contexts next to the brokers' logs.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker_py.common.java_string_hash import partition_for
from tests.cluster.chaos.scenario import _client_debug
from tests.cluster.test_coordinators import (  # noqa: F401 - cluster: the fixture
    OVERRIDES,
    _leader_of,
    _read_committed,
    _txn_producer,
    cluster,
)

# What OffsetFetch answers while the group's coordinator moves (a bounce): asked again.
_COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
}

# librdkafka 2.16's send_offsets_to_transaction sends TxnOffsetCommit once the group's
# coordinator is up, re-checking on a change of state of any of its broker connections;
# when the coordinator it knew was killed and left out of a Metadata answer (its handle
# dropped), no such change may come and the call waits for ever, past its timeout
# (confluentinc/librdkafka#5456, #5511). Connections idle this long are closed, which is
# such a change: the call then asks FindCoordinator again and goes on.
_IDLE_MS = 3000


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


def _coordinators(c) -> list[int]:
    """The brokers to bounce, one after the other: the group's coordinator, then the
    transactional id's (when one broker is both, another broker second)."""
    group = _leader_of(
        c,
        "__consumer_offsets",
        partition_for("copier", int(OVERRIDES["offsets.topic.num.partitions"])),
    )
    txn = _leader_of(
        c,
        "__transaction_state",
        partition_for("copier-tx", int(OVERRIDES["transaction.state.log.num.partitions"])),
    )
    if txn == group:
        txn = next(b.id for b in c.brokers if b.id != group)
    return [group, txn]


def test_an_exactly_once_copy_survives_hard_bounces(cluster):  # noqa: F811
    """Kafka's transactions_test: a consume-transform-produce loop (read_committed input,
    send_offsets_to_transaction) copies a topic while brokers are hard-bounced (the
    coordinators of its group and of its transactional id, once the copy is under way);
    the output holds each input message exactly once, and the group's committed offsets
    end where the copy did."""
    import threading

    from tests.cluster.harness import faults

    c = cluster
    n = 1000
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

    victims: list[int] = []
    bounced: list[int] = []
    bounce_errors: list[BaseException] = []
    copying = threading.Event()  # set once the first transaction committed

    def bounce(stop: threading.Event) -> None:
        try:
            deadline = time.monotonic() + 60
            while not copying.wait(0.2):
                if stop.is_set() or time.monotonic() > deadline:
                    return
            victims.extend(_coordinators(c))
            for victim in victims:
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
    producer = _txn_producer(
        c,
        "copier-tx",
        **{"connections.max.idle.ms": _IDLE_MS},
        **_client_debug(c, "producer").get("confluent", {}),
    )
    copied = 0
    transactions: list[int] = []
    bouncer.start()
    try:
        consumer.subscribe(["eos-in"])
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            # Many small transactions while the brokers are bounced; the rest of the copy
            # (a transaction's time hardly depends on its size) in few large ones.
            batch = 10 if bouncer.is_alive() else 100
            msgs = [m for m in consumer.consume(batch, 0.5) if not m.error()]
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
                copying.set()
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
        positions = [(tp.partition, tp.offset) for tp in consumer.position(consumer.assignment())]
        progress = f"copied {copied} in {len(transactions)} transactions, positions {positions}"
        # Every transactional offset commit ended with its transaction: the group's
        # committed offsets as a read_committed consumer asks them (OffsetFetch with
        # require_stable answers UNSTABLE_OFFSET_COMMIT while one is pending) are the
        # positions the last transaction sent.
        try:
            committed: list = sorted((tp.partition, tp.offset) for tp in _committed(consumer))
        except KafkaException as e:
            committed = [f"not answered: {e}"]
    finally:
        stop.set()
        bouncer.join(90)
        consumer.close()
    assert not bounce_errors and len(bounced) == 2 and bounced == victims, (
        victims,
        bounced,
        bounce_errors,
    )
    assert committed == sorted(positions), f"committed {committed}; {progress}"
    out = _read_committed(c, "eos-out", 3)
    assert sorted(out) == sorted(b"%d" % i for i in range(n)), (
        f"{len(out)} records, {len(set(out))} distinct; {progress}"
    )
    assert len(transactions) >= 10  # many small transactions, some across the bounces
