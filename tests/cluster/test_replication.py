"""Replication with three real brokers and a real ZooKeeper: followers copy their leaders
byte for byte, acks=all waits for the ISR and survives losing the leader or the
controller, the ISR shrinks and grows with a paused follower, acks=all is refused below
min.insync.replicas, and unclean election loses only what it may.

The fault runs use three real clients (confluent-kafka, kafka-python, aiokafka) as
producers (acks=all, idempotent) and consumers, and the Jepsen-style checker of
tests/cluster/harness: every acknowledged record is read, in order, none twice.
The full matrix (every fault, five bounces, leader and controller) is
tests/cluster/chaos/test_replication_matrix.py, run by scripts/chaos.sh.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.cluster.harness.replicas import compare_replicas
from tests.cluster.harness.workload import Workload
from tests.support.waiting import wait_until

# The ZooKeeper session of every broker. Its pings pass through this process's link
# proxies, which stall whenever this process does (the workload's clients run here too);
# 6 s, as the chaos matrix uses, leaves them room where 4 s let live sessions expire in
# two full-suite runs.
SESSION_MS = 6000
LAG_MS = 3000
OVERRIDES = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
}


@pytest.fixture
def cluster(request, tmp_path):
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=OVERRIDES)
    with c, logs_on_failure(request, c, 80):
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        yield c


def _producer(c: Cluster, **config) -> Producer:
    return Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 20000,
            **config,
        }
    )


def _produce(p: Producer, topic: str, values, partition: int = 0) -> list:
    results = []

    def cb(err, msg):
        results.append((err, msg.offset() if err is None else None))

    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=cb)
    p.flush(30)
    return results


def _log_end(c: Cluster, broker_id: int, topic: str, partition: int) -> int:
    from tests.cluster.harness.replicas import read_batches

    batches = read_batches(c.broker(broker_id).partition_dir(topic, partition))
    return batches[-1].last_offset + 1 if batches else 0


def test_followers_copy_the_leader_byte_for_byte(cluster):
    cluster.create_topic(
        "copy", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    p = _producer(cluster)
    for part in range(3):
        results = _produce(p, "copy", [f"v{i}".encode() for i in range(300)], part)
        assert all(err is None for err, _ in results)
    faults.wait_full_isr(cluster, "copy")
    for part, result in faults.replica_check(cluster, "copy", 3).items():
        assert result.identical and result.high_watermark == 300, (
            part,
            result.detail,
            result.end_offsets,
        )


def test_acks_all_refused_below_min_insync_replicas_writes_nothing(cluster):
    cluster.create_topic(
        "minisr", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    p = _producer(cluster, **{"enable.idempotence": False, "retries": 0})
    assert all(err is None for err, _ in _produce(p, "minisr", [b"a", b"b"]))
    leader = faults.target_broker(cluster, "leader", "minisr")
    others = [b for b in (1, 2, 3) if b != leader]
    for b in others:
        cluster.broker(b).kill()
    wait_until(
        lambda: faults.isrs(cluster, "minisr")[0] == [leader],
        20,
        0.2,
        "the ISR shrunk to the leader",
    )
    before = _log_end(cluster, leader, "minisr", 0)
    results = _produce(p, "minisr", [b"c"])
    assert results and results[0][0] is not None
    assert results[0][0].code() == KafkaError.NOT_ENOUGH_REPLICAS, results[0][0]
    assert _log_end(cluster, leader, "minisr", 0) == before == 2


def test_paused_follower_leaves_the_isr_and_rejoins(cluster):
    cluster.create_topic(
        "pause", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    leader = faults.target_broker(cluster, "leader", "pause")
    follower = next(b for b in (1, 2, 3) if b != leader)
    p = _producer(cluster)
    cluster.broker(follower).pause()
    try:
        # The producer's acks wait for the paused follower until the leader drops it.
        results = _produce(p, "pause", [f"p{i}".encode() for i in range(50)])
        assert all(err is None for err, _ in results)
        wait_until(
            lambda: follower not in faults.isrs(cluster, "pause")[0],
            20,
            0.2,
            f"b{follower} out of the ISR",
        )
    finally:
        cluster.broker(follower).resume()
    assert all(
        err is None for err, _ in _produce(p, "pause", [f"q{i}".encode() for i in range(50)])
    )
    faults.wait_full_isr(cluster, "pause", 30)
    result = faults.replica_check(cluster, "pause", 1)[0]
    assert result.identical and result.high_watermark == 100, (result.detail, result.end_offsets)


@pytest.mark.parametrize(
    ("fault", "target"),
    [("hard_bounce", "leader"), ("hard_bounce", "controller"), ("clean_bounce", "leader")],
)
def test_acked_records_survive(cluster, fault, target):
    topic = "survive"
    cluster.create_topic(
        topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    notes: list[str] = []
    wl = Workload(
        cluster.bootstrap_servers,
        topic,
        partitions=3,
        count=600,
        seconds=25,
        interval=0.01,
        flush_seconds=30,
    )
    history = wl.run(
        during=lambda stop: (
            time.sleep(2),
            faults.run_fault(cluster, fault, target, topic, bounces=2, stop=stop, log=notes),
        )
    )
    assert not wl.errors, wl.errors
    faults.settle(cluster, topic)
    result = history.check()
    assert result.ok, f"{notes}\n{result.summary()}"
    acked = sum(1 for s in history.sends if s.outcome == "ok")
    assert acked > 0
    for part, cmp in faults.replica_check(cluster, topic, 3).items():
        assert cmp.identical, (part, cmp.detail)


def test_leader_cut_off_from_everyone_loses_no_acknowledged_record(cluster):
    topic = "isolated"
    cluster.create_topic(
        topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    leader = faults.target_broker(cluster, "leader", topic)

    def isolate(stop):
        time.sleep(2)
        cluster.net.isolate(f"b{leader}")
        stop.wait(SESSION_MS / 1000 * 2 + 4)
        cluster.net.heal()

    wl = Workload(
        cluster.bootstrap_servers,
        topic,
        partitions=1,
        count=400,
        seconds=20,
        interval=0.02,
        flush_seconds=30,
    )
    history = wl.run(during=isolate)
    assert not wl.errors, wl.errors
    faults.settle(cluster, topic)
    result = history.check()
    assert result.ok, result.summary()
    assert faults.replica_check(cluster, topic, 1)[0].identical


def test_unclean_election_only_when_enabled(cluster):
    topic = "unclean"
    cluster.create_topic(
        topic, partitions=1, replication_factor=2, config={"min.insync.replicas": "1"}
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    leader, follower = md.leader, next(r for r in md.replicas if r != md.leader)
    p = _producer(cluster, **{"enable.idempotence": False, "acks": "1"})
    assert all(err is None for err, _ in _produce(p, topic, [f"a{i}".encode() for i in range(10)]))
    wait_until(
        lambda: _log_end(cluster, follower, topic, 0) == 10, 20, 0.2, "the follower caught up"
    )
    cluster.broker(follower).kill()
    wait_until(
        lambda: faults.isrs(cluster, topic)[0] == [leader], 20, 0.2, "the ISR shrunk to the leader"
    )
    assert all(
        err is None for err, _ in _produce(p, topic, [f"b{i}".encode() for i in range(5)])
    )  # only on the leader
    cluster.broker(leader).kill()
    cluster.broker(follower).start()
    time.sleep(SESSION_MS / 1000 + 2)
    offline = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    assert offline.leader == -1, "an out-of-sync replica was elected with unclean election disabled"
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("topic", topic, set_config={"unclean.leader.election.enable": "true"})
    admin.alter_configs([resource])[resource].result(20)
    wait_until(
        lambda: admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader == follower,
        30,
        0.2,
        "the unclean leader",
    )
    # The records only the dead leader had are lost, exactly those: the log is 10 long.
    assert _log_end(cluster, follower, topic, 0) == 10
    cluster.broker(leader).start()
    wait_until(
        lambda: faults.isrs(cluster, topic)[0] == sorted([leader, follower]),
        30,
        0.2,
        "the old leader back in the ISR",
    )
    # The old leader truncated its 5 extra records and copies the new leader's log.
    assert all(err is None for err, _ in _produce(p, topic, [b"c0"]))
    dirs = {f"b{b}": cluster.broker(b).partition_dir(topic, 0) for b in (leader, follower)}
    wait_until(
        lambda: compare_replicas(dirs, 11).identical and _log_end(cluster, leader, topic, 0) == 11,
        20,
        0.2,
        "replicas equal",
    )
