"""An operator grows a three-broker cluster to four and shrinks it back to three with the
``logstore`` command alone, while an idempotent acks=all producer, a consumer and a
consumer group run (issue 36), the brokers in two racks: ``cluster partitions balance
--throttle`` moves replicas onto the new broker, keeping every partition in both racks;
``cluster decommission`` empties another (``__consumer_offsets`` included), which is
then stopped. The checker finds nothing lost, duplicated or reordered; the group reads
every acknowledged record; no partition is under-replicated; every replica of every
partition holds the same batches below the high watermark; the throttle configs are
gone once the moves end. ``elect-leaders --preferred`` and ``status`` are run on the
way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from logstore.balance.planner import Move
from logstore.cli import partition_moves
from logstore.cli.admin import Admin
from logstore.cli.connection import ClientOptions
from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster
from tests.cluster.harness.replicas import compare_replicas
from tests.cluster.harness.workload import Workload
from tests.support.processes import repo_env
from tests.support.waiting import wait_until

OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
}
TOPICS = {"moves": 4, "bulk": 2}  # name -> partitions, replication factor 3
RACKS = {1: "a", 2: "b", 3: "b", 4: "a"}
THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def logstore(bootstrap: str, *args: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "logstore", *map(str, args), "-b", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        env=repo_env(),
    )
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def brokers_seen(c: Cluster, n: int) -> None:
    """Waits until broker 1's metadata lists ``n`` brokers."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap(1)})
    wait_until(
        lambda: len(admin.list_topics(timeout=5).brokers) == n, 30, 0.2, f"{n} brokers listed"
    )


def replicas(c: Cluster) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """(topic, partition) -> (replicas, ISR) of the test's topics, as broker 1 says."""
    md = AdminClient({"bootstrap.servers": c.bootstrap(1)}).list_topics(timeout=10)
    return {
        (t, p.id): (list(p.replicas), sorted(p.isrs))
        for t in TOPICS
        for p in md.topics[t].partitions.values()
    }


def throttle_configs(c: Cluster, brokers: list[int]) -> dict[str, str]:
    """The throttle keys set dynamically on ``brokers`` and on the topics."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap(1)})
    found = {}
    resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in brokers]
    resources += [ConfigResource(ResourceType.TOPIC, t) for t in TOPICS]
    for r in resources:
        entries = admin.describe_configs([r])[r].result(10)
        for k in THROTTLE_KEYS:
            e = entries.get(k)
            if e is not None and int(e.source) in (1, 2):  # DYNAMIC_TOPIC / DYNAMIC_BROKER
                found[f"{r.name}/{k}"] = e.value
    return found


def settled_throttle(c: Cluster, brokers: list[int], expected: dict[str, str]) -> dict[str, str]:
    """The throttle configs once they equal ``expected`` (a broker applies a topic config
    change when ZooKeeper notifies it), or as they are after 15 s."""
    seen: dict[str, str] = {}

    def check() -> bool:
        seen.clear()
        seen.update(throttle_configs(c, brokers))
        return seen == expected

    try:
        wait_until(check, 15, 0.2, "the throttle configs")
    except Exception:  # noqa: BLE001 - the caller's assertion shows what was seen
        pass
    return seen


def test_grow_balance_decommission_under_load(tmp_path):
    c = Cluster(
        tmp_path,
        n_brokers=4,
        zk_session_timeout_ms=6000,
        overrides=OVERRIDES,
        broker_overrides={b: {"broker.rack": rack} for b, rack in RACKS.items()},
    )
    try:
        assert c.zookeeper is not None
        c.zookeeper.start()
        for b in c.brokers[:3]:
            b.launch()
        for b in c.brokers[:3]:
            b.wait_ready()
        b1 = c.bootstrap(1)
        brokers_seen(c, 3)
        for topic, n in TOPICS.items():
            c.create_topic(topic, partitions=n, replication_factor=3, bootstrap=b1)
        bulk = Producer({"bootstrap.servers": b1, "acks": "all", "linger.ms": 20})
        for i in range(2000):  # 2 MB that the moves copy
            bulk.produce("bulk", bytes(1000), partition=i % TOPICS["bulk"])
            bulk.poll(0)
        assert bulk.flush(30) == 0

        steps: dict[str, object] = {}

        def operate(stop: threading.Event) -> None:
            try:
                c.broker(4).start()
                brokers_seen(c, 4)
                topics = [a for t in TOPICS for a in ("--topic", t)]
                out = logstore(
                    b1,
                    "cluster",
                    "partitions",
                    "balance",
                    *topics,
                    "--throttle",
                    "20MiB",
                    "--max-in-flight",
                    "2",
                    "--format",
                    "json",
                )
                steps["balance"] = json.loads(out.stdout)
                steps["balance_log"] = out.stderr
                steps["after_balance"] = replicas(c)
                steps["throttle_after_balance"] = settled_throttle(c, [1, 2, 3, 4], {})
                steps["status"] = json.loads(
                    logstore(b1, "cluster", "partitions", "status", "--format", "json").stdout
                )
                out = logstore(
                    b1, "cluster", "decommission", "2", "--throttle", "20MiB", "--format", "json"
                )
                steps["decommission"] = json.loads(out.stdout)
                steps["decommission_log"] = out.stderr
                steps["throttle_after_decommission"] = settled_throttle(c, [1, 2, 3, 4], {})
                c.broker(2).terminate()
                steps["elect"] = json.loads(
                    logstore(
                        c.bootstrap(3),
                        "cluster",
                        "elect-leaders",
                        "--preferred",
                        "--format",
                        "json",
                    ).stdout
                )
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                steps["error"] = exc
            finally:
                stop.set()

        # a consumer group on the topic, its coordinator moved by the decommission
        group_seen: set[str] = set()
        group_done = threading.Event()
        group_errors: list[str] = []

        def consume_in_group() -> None:
            consumer = Consumer(
                {
                    "bootstrap.servers": c.bootstrap(3),
                    "group.id": "moves-group",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": True,
                    "auto.commit.interval.ms": 500,
                }
            )
            try:
                consumer.subscribe(["moves"])
                while not group_done.is_set():
                    msg = consumer.poll(0.2)
                    if msg is not None and msg.error() is None:
                        group_seen.add(msg.value().decode())
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                group_errors.append(repr(exc))
            finally:
                consumer.close()

        group_thread = threading.Thread(target=consume_in_group, daemon=True)
        group_thread.start()

        wl = Workload(
            c.bootstrap(3),
            "moves",
            partitions=TOPICS["moves"],
            producers=("confluent",),
            consumers=("confluent",),
            count=100_000,
            seconds=60,
            interval=0.005,
            flush_seconds=20,
        )
        history = wl.run(during=operate)
        assert "error" not in steps, steps["error"]
        assert not wl.errors, wl.errors

        # balance: the new broker got its share, with the throttle, removed after
        plan = steps["balance"]
        assert plan["replica_moves"] >= 4 and plan["cost_bytes"] > 0
        assert all(m["error"] is None for m in plan["moves"]), plan["moves"]
        counts = {b: 0 for b in (1, 2, 3, 4)}
        for reps, _isr in steps["after_balance"].values():
            for b in reps:
                counts[b] += 1
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        assert {b["id"]: b["rack"] for b in plan["brokers"]} == RACKS
        for reps, _isr in steps["after_balance"].values():
            assert {RACKS[b] for b in reps} == {"a", "b"}, steps["after_balance"]
        assert "throttle 20971520 B/s" in steps["balance_log"]
        assert "throttle removed" in steps["balance_log"]
        assert steps["throttle_after_balance"] == {}
        assert steps["status"] == []

        # decommission: broker 2 emptied, then stopped; nothing under-replicated
        assert all(m["error"] is None for m in steps["decommission"]["moves"])
        assert "broker 2 holds no replica" in steps["decommission_log"]
        assert steps["throttle_after_decommission"] == {}
        assert all(e["error"] is None for e in steps["elect"]), steps["elect"]

        def settled():
            now = replicas(c)
            return now if all(sorted(r) == isr for r, isr in now.values()) else None

        final = wait_until(settled, 30, 0.2, "every ISR full on brokers 1, 3 and 4")
        for reps, _isr in final.values():
            assert len(reps) == 3 and 2 not in reps

        result = history.check()
        assert result.ok, result.summary()
        acked = {s.value for s in history.sends if s.outcome == "ok"}
        assert len(acked) > 100
        try:
            wait_until(lambda: acked <= group_seen, 30, 0.2, "the group read every acked record")
        finally:
            group_done.set()
            group_thread.join(10)
        assert not group_errors, group_errors

        hws = {t: faults.high_watermarks(c, t, n) for t, n in TOPICS.items()}
        for (t, p), (reps, _isr) in final.items():
            dirs = {f"b{b}": c.broker(b).partition_dir(t, p) for b in reps}

            def same(dirs=dirs, hw=hws[t][p]):
                cmp = compare_replicas(dirs, hw)
                return cmp if cmp.identical and min(cmp.end_offsets.values()) >= hw else None

            wait_until(same, 30, 0.2, f"replicas of {t}-{p} identical")

        # the throttle configs as kafka-reassign-partitions.sh --throttle sets them
        admin = Admin(ClientOptions(brokers=c.bootstrap(1)))
        partition_moves.set_throttle(admin, 1000, [Move("bulk", 0, (1, 3), (3, 4), 0)])
        expected = {
            **{f"{b}/{k}": "1000" for b in ("1", "3", "4") for k in THROTTLE_KEYS[:2]},
            "bulk/leader.replication.throttled.replicas": "0:1,0:3",
            "bulk/follower.replication.throttled.replicas": "0:4",
        }
        assert settled_throttle(c, [1, 3, 4], expected) == expected
        assert partition_moves.clear_throttle(admin, [1, 3, 4], ["bulk"]) == []
        assert settled_throttle(c, [1, 3, 4], {}) == {}
    except BaseException:
        print(c.log_tails(80))
        raise
    finally:
        c.close()
