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
import logging
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker_py.coordinator.group.group_metadata_records import partition_for
from broker_py.network.network_client import NetworkClient
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.offset_commit import OffsetFetchRequest
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.support.waiting import wait_until

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
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
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
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            **config,
        }
    )
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
    c.create_topic(
        "g-data", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
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


def _txn_producer(c: Cluster, tid: str, **config) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "transactional.id": tid,
            "acks": "all",
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
            **config,
        }
    )
    p.init_transactions(30)
    return p


def _end_offset(consumer: Consumer, topic: str, index: int) -> int:
    """The partition's end offset, asked again while its leader answers a retriable
    error (OFFSET_NOT_AVAILABLE from a new leader whose high watermark is not caught up)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=10)[1]
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _read_committed(c: Cluster, topic: str, partitions: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "group.id": f"rc-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {i: _end_offset(consumer, topic, i) for i in range(partitions)}
        consumer.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(
                consumer.position([TopicPartition(topic, i)])[0].offset >= ends[i]
                for i in range(partitions)
                if ends[i] > 0
            ):
                break
            m = consumer.poll(0.3)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        consumer.close()


def test_a_transaction_over_partitions_of_every_broker_commits_or_aborts_whole(cluster):
    c = cluster
    c.create_topic(
        "t-data", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    assert (
        len({_leader_of(c, "t-data", i) for i in range(3)}) > 1
    )  # leaders on more than one broker
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
    c.create_topic(
        "t-move", partitions=2, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    p = _txn_producer(c, "mover")
    p.begin_transaction()
    p.produce("t-move", b"before", partition=0)
    p.commit_transaction(30)
    coordinator = _leader_of(
        c, "__transaction_state", partition_for("mover", 6)
    )  # the same hash as groups
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


def test_a_group_of_three_rebalances_and_loses_no_commit_across_two_coordinator_deaths(cluster):
    """Three members over 12 partitions commit as they go while the group's coordinator is
    SIGKILLed, then the next one SIGTERMed: every message is consumed, and a message is
    delivered again only if no commit covering it had succeeded before."""
    import threading

    c = cluster
    topic, n = "g12", 3000
    c.create_topic(topic, partitions=12, replication_factor=3, config={"min.insync.replicas": "2"})
    stop = threading.Event()
    lock = threading.Lock()
    deliveries: list[tuple[int, int, float]] = []  # (partition, offset, time)
    commits: list[tuple[int, int, float]] = []  # (partition, committed offset, time it succeeded)
    errors: list[str] = []
    # librdkafka's logs (offset resets, truncation detected) and poll errors, with a
    # time, to explain a failure.
    events: list[str] = []

    class _Events(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            events.append(f"{time.monotonic():.3f} {record.getMessage()}")

    rdkafka_log = logging.getLogger("test_coordinators.g12")
    rdkafka_log.propagate = False
    rdkafka_log.addHandler(_Events())
    rdkafka_log.setLevel(logging.DEBUG)

    def member(i: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap_servers,
                "group.id": "g12",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "client.id": f"m{i}",
                "logger": rdkafka_log,
                "debug": "cgrp,topic",
            }
        )
        try:
            consumer.subscribe([topic])
            since_commit = 0
            while not stop.is_set():
                m = consumer.poll(0.2)
                if m is not None and m.error():
                    events.append(f"{time.monotonic():.3f} m{i} poll: {m.error()}")
                if m is None or m.error():
                    continue
                with lock:
                    deliveries.append((m.partition(), m.offset(), time.monotonic()))
                since_commit += 1
                if since_commit >= 25:
                    try:
                        done = consumer.commit(asynchronous=False)
                        with lock:
                            commits.extend(
                                (tp.partition, tp.offset, time.monotonic())
                                for tp in done
                                if tp.error is None and tp.offset >= 0
                            )
                        since_commit = 0
                    except KafkaException:
                        # the coordinator moved: delivered again after the rebalance, as allowed
                        pass
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"m{i}: {e!r}")
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    p = Producer(
        {"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    for i in range(n // 2):
        p.produce(topic, b"%d" % i, partition=i % 12)
    assert p.flush(60) == 0
    first = _leader_of(c, "__consumer_offsets", partition_for("g12", 6))
    c.broker(first).kill()
    for i in range(n // 2, 3 * n // 4):
        p.produce(topic, b"%d" % i, partition=i % 12)
    assert p.flush(60) == 0
    second = wait_until(
        lambda: (b := _leader_of(c, "__consumer_offsets", partition_for("g12", 6))) != first and b,
        30,
        0.2,
        "a new coordinator",
    )
    c.broker(first).start()
    c.broker(second).terminate()
    for i in range(3 * n // 4, n):
        p.produce(topic, b"%d" % i, partition=i % 12)
    assert p.flush(60) == 0
    c.broker(second).start()

    def all_consumed() -> bool:
        with lock:
            return len({(p_, o) for p_, o, _ in deliveries}) >= n

    try:
        wait_until(all_consumed, 90, 0.5, "every message consumed")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    seen: dict[tuple[int, int], float] = {}
    for part, offset, at in sorted(deliveries, key=lambda d: d[2]):
        if (part, offset) in seen:
            covered = [o for q, o, t in commits if q == part and t < at and o > offset]
            context = "\n".join(
                [
                    e
                    for e in events
                    if "reset" in e or "runcat" in e or "poll:" in e or f"[{part}]" in e
                ][-300:]
            )
            assert not covered, (
                f"{part}@{offset} delivered again at {at:.3f} after a commit of {covered[0]} "
                "had succeeded; "
                f"commits: {[(o, round(t, 3)) for q, o, t in commits if q == part]}\n{context}"
            )
        seen.setdefault((part, offset), at)
    assert len(seen) == n


def test_transactions_stay_whole_while_their_coordinator_dies_and_returns(cluster):
    """A transactional producer commits and aborts in turn over partitions led by every
    broker while its coordinator is killed and restarted: a read_committed consumer sees
    every committed transaction whole and nothing of an aborted one."""
    c = cluster
    topic = "t-loop"
    c.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    p = _txn_producer(c, "looper")
    coordinator = _leader_of(c, "__transaction_state", partition_for("looper", 6))
    committed, aborted, unknown = [], [], []
    killed = restarted = False
    for k in range(40):
        if k == 10:
            c.broker(coordinator).kill()
            killed = True
        if k == 25 and killed:
            c.broker(coordinator).start()
            restarted = True
        values = [b"t%d-%d" % (k, i) for i in range(3)]
        commit = k % 3 != 2
        try:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce(topic, v, partition=i)
            if commit:
                p.commit_transaction(30)
                committed.append(values)
            else:
                p.abort_transaction(30)
                aborted.append(values)
        except KafkaException as e:
            error = e.args[0]
            unknown.append(values)
            if error.txn_requires_abort():
                p.abort_transaction(30)
            elif error.fatal():
                raise
            time.sleep(0.5)
    assert killed and restarted and len(committed) >= 20
    got = set(_read_committed(c, topic, 3))
    for values in committed:
        assert set(values) <= got, f"committed transaction {values[0]} not whole"
    for values in aborted:
        assert not set(values) & got, f"aborted transaction {values[0]} visible"
    for values in unknown:
        assert set(values) <= got or not set(values) & got, (
            f"transaction {values[0]} partly visible"
        )


def test_producer_ids_handed_out_by_different_brokers_never_collide(cluster):
    from logstore.protocol.messages.transactions import InitProducerIdRequest

    c = cluster

    async def ids(broker: int, count: int) -> list[int]:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "pid-test")
        try:
            body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
            out = []
            for _ in range(count):
                r = await client.send(ApiKey.INIT_PRODUCER_ID, body, 10000, version=4)
                assert r.error_code == 0
                out.append(r.producer_id)
            return out
        finally:
            await client.close()

    async def all_brokers() -> list[list[int]]:
        return await asyncio.gather(*(ids(b, 1200) for b in (1, 2, 3)))  # more than one block each

    handed = asyncio.run(all_brokers())
    flat = [pid for per_broker in handed for pid in per_broker]
    assert len(flat) == len(set(flat)) == 3600
    # a restarted broker claims a fresh block
    c.broker(2).terminate()
    c.broker(2).start()
    again = asyncio.run(ids(2, 5))
    assert not set(again) & set(flat)
