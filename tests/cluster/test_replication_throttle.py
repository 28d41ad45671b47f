"""Replication throttles (KIP-73) in a real two-broker cluster: a replica added by
AlterPartitionReassignments copies at the throttled rate while both brokers' throttles
are set (leader side on the leader, follower side on the new replica), and finishes once
the rates are removed; acks=all produce to an in-sync partition listed by the same
throttles is unaffected (in-sync replicas are never throttled)."""

from __future__ import annotations

import os
import time

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from tests.cluster.harness.cluster import Cluster
from tests.support.waiting import wait_until

RATE = 100 * 1024  # bytes/s, both sides
CHUNK = 64 * 1024  # replica.fetch.max.bytes: the most one fetch carries per partition
SAMPLES = 2  # replication.quota.window.num, of 1 s: the start-up allowance is 1 window
RECORDS, RECORD_BYTES = 1024, 1024  # about 1 MiB to copy
OVERRIDES = {
    "replica.fetch.max.bytes": str(CHUNK),
    "replica.fetch.backoff.ms": "200",
    "replication.quota.window.num": str(SAMPLES),
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "200",
}
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def set_rates(a: AdminClient, value: str | None) -> None:
    """Sets (or, with None, deletes) both rates on brokers 1 and 2, each on its own."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    entries = [ConfigEntry(k, value or "", incremental_operation=op) for k in RATES]
    for b in (1, 2):  # one BROKER resource per call, sent to that broker
        resource = ConfigResource(ResourceType.BROKER, str(b), incremental_configs=entries)
        for future in a.incremental_alter_configs([resource]).values():
            future.result(20)


def log_bytes(c: Cluster, broker: int, topic: str) -> int:
    path = c.broker(broker).partition_dir(topic, 0)
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.iterdir() if f.suffix == ".log")


def produce(c: Cluster, topic: str, count: int, size: int) -> None:
    """``count`` records of ``size`` random bytes with acks=all, every one acknowledged."""
    errors: list[object] = []
    # Batches of at most 16 KiB: a fetch returns at least one whole batch, whatever its limit.
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "batch.size": 16384,
            "message.timeout.ms": 30000,
        }
    )
    for _ in range(count):
        producer.produce(
            topic, os.urandom(size), partition=0, on_delivery=lambda e, m: e and errors.append(e)
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def test_a_throttled_reassignment_copies_at_the_rate_and_acks_all_is_unaffected(tmp_path):
    with Cluster(tmp_path, n_brokers=2, overrides=OVERRIDES) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(lambda: len(a.list_topics(timeout=5).brokers) == 2, 20, message="2 brokers")
        throttled = {
            "leader.replication.throttled.replicas": "*",
            "follower.replication.throttled.replicas": "*",
        }
        futures = a.create_topics(
            [
                NewTopic("moving", num_partitions=1, replica_assignment=[[1]], config=throttled),
                NewTopic("steady", num_partitions=1, replica_assignment=[[1, 2]], config=throttled),
            ]
        )
        for future in futures.values():
            future.result(20)
        produce(c, "moving", RECORDS, RECORD_BYTES)
        total = log_bytes(c, 1, "moving")
        set_rates(a, str(RATE))

        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=20000)
        try:
            wait_until(
                lambda: (
                    kp.alter_partition_reassignments(
                        {KTopicPartition("moving", 0): [1, 2]}, timeout_ms=15000
                    )
                    == {KTopicPartition("moving", 0): None}
                ),
                30,
                0.5,
                "the reassignment accepted",
            )
            started = time.monotonic()
            # acks=all to a partition both throttles list, whose follower is in sync.
            produce(c, "steady", 200, RECORD_BYTES)
            # Copied by t seconds: at most RATE x (t + the start-up allowance) and one fetch
            # (less than a quarter of the log, when the unthrottled copy takes well under 1 s).
            bound_s = (total - CHUNK) / RATE - (SAMPLES - 1)
            observe_s = bound_s / 2
            assert observe_s >= 3, (total, bound_s)
            while time.monotonic() - started < observe_s:
                elapsed = time.monotonic() - started
                copied = log_bytes(c, 2, "moving")
                assert copied <= RATE * (elapsed + SAMPLES) + 2 * CHUNK, (elapsed, copied)
                assert kp.list_partition_reassignments(), "finished within the throttle's bound"
                time.sleep(0.5)

            set_rates(a, None)
            wait_until(
                lambda: kp.list_partition_reassignments() == {},
                30,
                0.2,
                "the reassignment to finish once the rates are removed",
            )
        finally:
            kp.close()
        assert log_bytes(c, 2, "moving") == total
