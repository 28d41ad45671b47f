"""A big topic created in a cluster does not pause the brokers: each broker opens the
logs its LeaderAndIsr names for the first time on a worker thread, a chunk at a time,
while its event loop keeps serving (issue 23's bound: no client paused over about a
second by admin work). Real ZooKeeper, three broker processes; a well-behaved acks=all
producer and an ApiVersions probe on every broker watch the creation."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.integration.hardening.support import WATCH_TOPIC, WellBehavedProducer
from tests.support.waiting import wait_until

PARTITIONS = 1000


def test_a_thousand_partition_topic_is_created_without_pausing_any_broker(request, tmp_path):
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=6000)
    with c, logs_on_failure(request, c, 60):
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        c.create_topic(
            WATCH_TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        watchers = [WellBehavedProducer(c.bootstrap(b)).start() for b in (1, 2, 3)]
        try:
            c.create_topic("big", partitions=PARTITIONS, replication_factor=3, timeout=120)

            def led() -> int:
                parts = admin.list_topics("big", timeout=10).topics["big"].partitions
                return sum(1 for p in parts.values() if p.leader >= 0 and len(p.isrs) == 3)

            wait_until(
                lambda: led() == PARTITIONS,
                120,
                0.5,
                "every partition led with its three replicas in sync",
            )
        finally:
            for w in watchers:
                w.stop()
        for w in watchers:
            w.assert_responsive()
        for b in (1, 2, 3):
            assert (
                sum(
                    1
                    for name in (c.workdir / f"b{b}" / "data").iterdir()
                    if name.name.startswith("big-")
                )
                == PARTITIONS
            )
