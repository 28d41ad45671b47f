"""Kafka's ``replication_test`` faults (tests/kafkatest/tests/core/replication_test.py)
on one broker of a running cluster, chosen as the leader of a partition or the
controller at the moment each fault starts:

- ``clean_shutdown``: SIGTERM (controlled shutdown), left down;
- ``hard_shutdown``: SIGKILL, left down;
- ``clean_bounce``: SIGTERM and start again, ``bounces`` times;
- ``hard_bounce``: SIGKILL and start again, ``bounces`` times.

As in Kafka's ``hard_bounce``, a SIGKILLed broker starts again only once ZooKeeper has
expired its session (its ``/brokers/ids/N`` is gone), so each hard kill is seen and
handled on its own. Each bounce waits for the broker to be back in every ISR of the
topic before the next one, so a bounce never takes down the last in-sync copy of a
partition (which would make acks=all records unavailable, not lost). :func:`settle`
restarts every stopped broker and waits for full ISRs, then :func:`replica_check`
compares the replicas' segment files below each partition's high watermark.
"""

from __future__ import annotations

import collections
import threading
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.cluster.harness.cluster import Cluster
from tests.cluster.harness.replicas import ReplicaComparison, compare_replicas
from tests.support.waiting import wait_until

FAULTS = ("clean_shutdown", "hard_shutdown", "clean_bounce", "hard_bounce")
TARGETS = ("leader", "controller")


def target_broker(cluster: Cluster, target: str, topic: str, partition: int = 0) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def find() -> int | None:
        try:
            md = admin.list_topics(topic, timeout=5)
            if target == "controller":
                return md.controller_id if md.controller_id >= 0 else None
            leader = md.topics[topic].partitions[partition].leader
        except Exception:  # noqa: BLE001 - a broker going down or up; ask again
            return None
        return leader if leader >= 0 else None

    return wait_until(find, 30, 0.1, f"the {target} of {topic}")


def isrs(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    """Each partition's ISR as the metadata says now; a partition the answer lacks (a
    broker just started answers with no topics until its first UpdateMetadata) reads as
    [-1]."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    out: dict[int, list[int]] = collections.defaultdict(lambda: [-1])
    try:
        md = admin.list_topics(topic, timeout=5).topics[topic]
    except Exception:  # noqa: BLE001 - a broker going down or up; ask again
        return out
    if md.error is None:
        out.update({p.id: sorted(p.isrs) for p in md.partitions.values()})
    return out


def wait_deregistered(cluster: Cluster, broker_id: int, timeout: float = 60) -> None:
    """ZooKeeper has expired the session of ``broker_id``: its registration is gone."""
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=15)
    try:
        wait_until(
            lambda: zk.exists(f"/brokers/ids/{broker_id}") is None,
            timeout,
            0.1,
            f"broker {broker_id} deregistered",
        )
    finally:
        zk.stop()
        zk.close()


def registrations(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """Each registered broker's ``/brokers/ids/N`` as (czxid, ephemeralOwner): its broker
    epoch and the session holding it. A broker that registers again (after its session
    expired) has a new pair."""
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=15)
    try:
        out = {}
        for child in zk.get_children("/brokers/ids"):
            stat = zk.exists(f"/brokers/ids/{child}")
            if stat is not None:
                out[int(child)] = (stat.czxid, stat.ephemeralOwner)
        return out
    finally:
        zk.stop()
        zk.close()


def wait_full_isr(cluster: Cluster, topic: str, timeout: float = 60) -> None:
    """Every partition's ISR holds every broker, as every broker's metadata says."""
    ids = sorted(b.id for b in cluster.brokers)

    def full_on(broker) -> bool:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(broker.id)})
        try:
            md = admin.list_topics(topic, timeout=5).topics[topic]
        except Exception:  # noqa: BLE001 - going down or up; ask again
            return False
        return (
            md.error is None
            and bool(md.partitions)
            and all(sorted(p.isrs) == ids for p in md.partitions.values())
        )

    wait_until(
        lambda: all(full_on(b) for b in cluster.brokers if b.alive()),
        timeout,
        0.2,
        f"every ISR of {topic} back to {ids}",
    )


def run_fault(
    cluster: Cluster,
    fault: str,
    target: str,
    topic: str,
    bounces: int = 5,
    stop: threading.Event | None = None,
    log: list[str] | None = None,
) -> None:
    """Applies ``fault`` to the current ``target`` broker (leader of partition 0 of
    ``topic``, or the controller); bounces wait for full ISRs in between."""
    note = log.append if log is not None else (lambda _s: None)
    rounds = bounces if fault.endswith("bounce") else 1
    for i in range(rounds):
        if stop is not None and stop.is_set() and i > 0:
            return
        broker_id = target_broker(cluster, target, topic)
        broker = cluster.broker(broker_id)
        note(f"{time.strftime('%H:%M:%S')} {fault} #{i + 1} of b{broker_id} ({target})")
        if fault.startswith("clean"):
            broker.terminate()
        else:
            broker.kill()
        if fault.endswith("shutdown"):
            return
        if fault == "hard_bounce" and cluster.zookeeper is not None:
            wait_deregistered(cluster, broker_id)
        broker.start()
        wait_full_isr(cluster, topic)


def settle(cluster: Cluster, topic: str) -> None:
    """Every broker running, every ISR full."""
    for b in cluster.brokers:
        if not b.alive():
            b.start()
    wait_full_isr(cluster, topic)


def high_watermarks(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "replica-check",
            "enable.auto.commit": False,
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def replica_check(cluster: Cluster, topic: str, partitions: int) -> dict[int, ReplicaComparison]:
    """Each partition's replicas compared below its high watermark (after :func:`settle`;
    followers are given until their log ends reach it)."""
    hws = high_watermarks(cluster, topic, partitions)
    out = {}
    for p, hw in hws.items():
        dirs = {f"b{b.id}": b.partition_dir(topic, p) for b in cluster.brokers}

        def caught_up(dirs=dirs, hw=hw) -> ReplicaComparison | None:
            result = compare_replicas(dirs, hw)
            return (
                result
                if result.identical and all(end >= hw for end in result.end_offsets.values())
                else None
            )

        try:
            out[p] = wait_until(caught_up, 30, 0.2, f"replicas of {topic}-{p} equal below {hw}")
        except Exception:
            out[p] = compare_replicas(dirs, hw)
    return out
