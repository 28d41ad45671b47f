"""Group and transaction coordinators across a cluster of three real brokers and a real
ZooKeeper: the coordinator of a group or transactional id is the leader of its internal
topic partition, loads its state when it is elected, and hands it over when it dies.

- a consumer group keeps its committed offsets across the death of its coordinator, and
  every other broker answers NOT_COORDINATOR for it;
- a transaction spanning partitions led by different brokers commits (markers reach
  every leader by WriteTxnMarkers) or aborts as a whole for read_committed consumers;
- a transactional producer survives the death of its transaction coordinator.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker_py.coordinator.group.group_metadata_records import partition_for
from broker_py.network.network_client import NetworkClient
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.offset_commit import OffsetFetchRequest
from tests.cluster.harness.cluster import Cluster, logs_on_failure, wait_until

OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "transaction.state.log.min.isr": "2",
}


@pytest.fixture
def cluster(request, tmp_path):
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=4000, overrides=OVERRIDES)
    with c, logs_on_failure(request, c, 80):
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(lambda: len(a.list_topics(timeout=5).brokers) == 3, 20, message="three brokers registered")
        yield c


def _leader_of(c: Cluster, topic: str, partition: int) -> int:
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})

    def find():
        try:
            leader = a.list_topics(topic, timeout=5).topics[topic].partitions[partition].leader
        except Exception:  # noqa: BLE001 - metadata moving; ask again
            return None
        return leader if leader >= 0 else None

    return wait_until(find, 30, 0.2, f"a leader of {topic}-{partition}")


def _offset_fetch_error(c: Cluster, broker: int, group: str) -> int:
    async def go():
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "coordinator-test")
        try:
            body = OffsetFetchRequest(group_id=group, topics=None, groups=[], require_stable=False)
            return (await client.send(ApiKey.OFFSET_FETCH, body, 10000, version=5)).error_code
        finally:
            await client.close()

    return asyncio.run(go())


def _consume(c: Cluster, group: str, topic: str, want: int, **config) -> list:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000, **config})  # fmt: skip
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < want and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset(), m.value()))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_a_group_keeps_its_offsets_when_its_coordinator_dies(cluster):
    c = cluster
    c.create_topic("g-data", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(300):
        p.produce("g-data", b"a%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    first = _consume(c, "g", "g-data", 300)
    assert sorted(v for _, _, v in first) == sorted(b"a%d" % i for i in range(300))
    coordinator = _leader_of(c, "__consumer_offsets", partition_for("g", 6))
    others = [b for b in (1, 2, 3) if b != coordinator]
    assert [_offset_fetch_error(c, b, "g") for b in others] == [16, 16]  # NOT_COORDINATOR
    assert _offset_fetch_error(c, coordinator, "g") == 0
    c.broker(coordinator).kill()
    for i in range(300, 450):
        p.produce("g-data", b"a%d" % i, partition=i % 3)
    assert p.flush(60) == 0
    new = _leader_of(c, "__consumer_offsets", partition_for("g", 6))
    assert new != coordinator
    # The new coordinator loaded the group's offsets: the group resumes where it committed.
    second = _consume(c, "g", "g-data", 150)
    assert sorted(v for _, _, v in second) == sorted(b"a%d" % i for i in range(300, 450))
    c.broker(coordinator).start()


def _txn_producer(c: Cluster, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": tid, "acks": "all",
                  "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})  # fmt: skip
    p.init_transactions(30)
    return p


def _read_committed(c: Cluster, topic: str, partitions: int) -> list:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"rc-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    try:
        ends = {}
        for i in range(partitions):
            ends[i] = consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1]
        consumer.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(consumer.position([TopicPartition(topic, i)])[0].offset >= ends[i] for i in range(partitions) if ends[i] > 0):
                break
            m = consumer.poll(0.3)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        consumer.close()


def test_a_transaction_over_partitions_of_every_broker_commits_or_aborts_whole(cluster):
    c = cluster
    c.create_topic("t-data", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    assert len({_leader_of(c, "t-data", i) for i in range(3)}) > 1  # leaders on more than one broker
    p = _txn_producer(c, "spread")
    p.begin_transaction()
    for i in range(30):
        p.produce("t-data", b"c%d" % i, partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce("t-data", b"x%d" % i, partition=i % 3)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("t-data", b"last", partition=0)
    p.commit_transaction(30)
    got = _read_committed(c, "t-data", 3)
    assert sorted(got) == sorted([b"c%d" % i for i in range(30)] + [b"last"])


def test_a_transactional_producer_survives_its_coordinators_death(cluster):
    c = cluster
    c.create_topic("t-move", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
    p = _txn_producer(c, "mover")
    p.begin_transaction()
    p.produce("t-move", b"before", partition=0)
    p.commit_transaction(30)
    coordinator = _leader_of(c, "__transaction_state", partition_for("mover", 6))  # the same hash as groups
    c.broker(coordinator).kill()
    committed = False
    deadline = time.monotonic() + 60
    while not committed and time.monotonic() < deadline:
        try:
            p.begin_transaction()
            p.produce("t-move", b"after", partition=1)
            p.commit_transaction(30)
            committed = True
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                p.abort_transaction(30)
            elif not error.retriable():
                raise
            time.sleep(0.5)
    assert committed
    assert sorted(_read_committed(c, "t-move", 2)) == [b"after", b"before"]
    c.broker(coordinator).start()
