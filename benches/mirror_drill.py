"""The mirror's longer drills (issue 38), between a broker alone and a three-broker
cluster (with a real ZooKeeper), in both directions:

1. exactly-once under a steady idempotent producer, the mirror SIGKILLed and restarted
   twice: the target must hold exactly the source's records in each partition, in order;
2. the same at-least-once: nothing missing, and duplicates only right after a kill;
3. disaster recovery: a consumer group reads part of the source and commits; the source
   is killed (every broker); the group moves to the target with the translated offsets
   (synced to the target group by the mirror; `logstore mirror translate-offsets` must
   agree) and reads to the end. Every record is processed at least once, and the records
   processed twice are those between the last checkpoint and the group's last commit.

    python benches/mirror_drill.py [--direction single-to-cluster|cluster-to-single|both]

Prints one line per check and exits non-zero if one fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.cluster.harness.cluster import Cluster  # noqa: E402
from tests.integration.conftest import BrokerProcess  # noqa: E402
from tests.integration.test_mirror import Mirror, SteadyProducer, read_all  # noqa: E402
from tests.support import processes  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

PARTITIONS = 3
FAILED: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        FAILED.append(what)


def create(bootstrap: str, topic: str, rf: int) -> None:
    adm = AdminClient({"bootstrap.servers": bootstrap})
    for f in adm.create_topics([NewTopic(topic, PARTITIONS, rf)]).values():
        f.result()


def args_for(src: str, tgt: str, alias: str, topic: str, *sets: str) -> list[str]:
    out = ["--source", src, "--target", tgt, "--source-alias", alias, "--target-alias", "T"]
    out += ["--topics", topic]
    for s in ("refresh.topics.interval.seconds=2", "offset.flush.interval.ms=1000", *sets):
        out += ["--set", s]
    return out


def killed_twice(workdir: str, args: list[str], copied: Callable[[], int]) -> Mirror:
    m = Mirror(workdir, args).start()
    for _ in range(2):
        before = copied()
        wait_until(lambda b=before: copied() > b + 2000, 60, message="copying")
        m.kill()
        m = Mirror(workdir, args).start()
    return m


def restarts(want: list[bytes], got: list[bytes]) -> int:
    """How many times ``got`` steps back in ``want``'s order (a re-copied stretch
    starts); -1 when ``got`` skips forward (a record missing at that point)."""
    index = {v: i for i, v in enumerate(want)}
    back = 0
    for prev, cur in zip(got, got[1:]):
        step = index[cur] - index[prev]
        if step > 1:
            return -1
        if step < 1:
            back += 1
    return back


def total(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return sum(
            c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)
        )
    except Exception:
        return 0
    finally:
        c.close()


def sigkill_runs(src: str, tgt: str, rf_src: int, workdir: str, label: str) -> None:
    for mode in ("exactly-once", "at-least-once"):
        topic, alias = f"drill-{mode}", "EO" if mode == "exactly-once" else "AL"
        create(src, topic, rf_src)
        prod = SteadyProducer(src, topic, PARTITIONS)
        prod.start()
        extra = ["emit.checkpoints.enabled=false"]
        args = args_for(src, tgt, alias, topic, *extra)
        if mode == "exactly-once":
            args.append("--exactly-once")
        started = time.monotonic()
        m = killed_twice(workdir, args, lambda t=f"{alias}.{topic}": total(tgt, t))
        time.sleep(2)
        prod.stop()
        want = read_all(src, topic, PARTITIONS, 120)
        n = sum(map(len, want.values()))

        def arrived(remote: str = f"{alias}.{topic}", want: dict = want) -> dict | bool:
            got = read_all(tgt, remote, PARTITIONS, 120)
            complete = all(
                {x.value() for x in got[p]} >= {x.value() for x in want[p]}
                for p in range(PARTITIONS)
            )
            return complete and got

        got = wait_until(arrived, 120, message="the copy to finish")
        m.stop()
        elapsed = time.monotonic() - started
        for p in range(PARTITIONS):
            w = [x.value() for x in want[p]]
            g = [x.value() for x in got[p]]
            if mode == "exactly-once":
                check(g == w, f"{label} {mode} p{p}: {len(g)} copied == {len(w)} on source")
            else:
                dups = len(g) - len(set(g))
                jumps = restarts(w, g)
                in_order = list(dict.fromkeys(g)) == w
                check(
                    in_order and 0 <= jumps <= 2,
                    f"{label} {mode} p{p}: all {len(w)} in order: {in_order}, {dups} "
                    f"duplicates in {jumps} re-copied stretch(es) (two kills)",
                )
        print(f"     {label} {mode}: {n} records, two SIGKILLs, {elapsed:.1f} s", flush=True)


def dr_drill(src: str, tgt: str, rf_src: int, workdir: str, label: str, kill_source) -> None:
    topic, alias, group = "orders", "DR", "billing"
    create(src, topic, rf_src)
    prod = SteadyProducer(src, topic, PARTITIONS)
    prod.start()
    time.sleep(3)
    prod.stop()
    records = read_all(src, topic, PARTITIONS, 60)
    n = sum(map(len, records.values()))
    args = args_for(
        src,
        tgt,
        alias,
        topic,
        "emit.checkpoints.interval.seconds=1",
        "sync.group.offsets.enabled=true",
        "sync.group.offsets.interval.seconds=1",
    )
    m = Mirror(workdir, args).start()
    # the group processes about half of the records on the source, committing as it goes
    c = Consumer(
        {
            "bootstrap.servers": src,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    on_source: set[bytes] = set()
    committed: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(on_source) < n // 2 and time.monotonic() < deadline:
        batch = [x for x in c.consume(500, 1.0) if x.error() is None]
        if not batch:
            continue
        on_source.update(x.value() for x in batch)
        c.commit(asynchronous=False)
        for x in batch:
            committed[x.partition()] = x.offset() + 1
    c.close()
    remote = f"{alias}.{topic}"
    wait_until(lambda: total(tgt, remote) >= n, 60, message="the mirror to catch up")
    time.sleep(4)  # a few checkpoint intervals after the group's last commit
    kill_source()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "logstore",
            "mirror",
            "translate-offsets",
            "--json",
            "--group",
            group,
            *args[:8],
        ],
        capture_output=True,
        env=processes.repo_env(),
        timeout=120,
    )
    check(out.returncode == 0, f"{label} DR translate-offsets with the source down")
    translated = {r["partition"]: r["offset"] for r in json.loads(out.stdout)["offsets"]}
    m.kill()
    adm = AdminClient({"bootstrap.servers": tgt})
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    synced = {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}
    check(synced == translated, f"{label} DR synced group offsets {synced} == translated")
    # the group moves to the target
    c = Consumer(
        {
            "bootstrap.servers": tgt,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([remote])
    on_target: list[bytes] = []
    end = total(tgt, remote)
    start = sum(synced.get(p, 0) for p in range(PARTITIONS))
    deadline = time.monotonic() + 60
    while len(on_target) < end - start and time.monotonic() < deadline:
        on_target += [x.value() for x in c.consume(500, 1.0) if x.error() is None]
    c.close()
    every = {x.value() for p in records for x in records[p]}
    check(on_source | set(on_target) == every, f"{label} DR every one of {n} records processed")
    again = on_source & set(on_target)
    bound = sum(committed.get(p, 0) - translated.get(p, 0) for p in range(PARTITIONS))
    check(
        len(again) <= bound,
        f"{label} DR re-processed {len(again)} <= {bound} (between the checkpoints and the "
        f"group's commits; {len(on_source)} processed on the source, {len(on_target)} on "
        "the target)",
    )


def run(direction: str, base: str) -> None:
    single_dir = os.path.join(base, f"{direction}-single")
    os.makedirs(single_dir)
    single = BrokerProcess(single_dir)
    cluster = Cluster(
        os.path.join(base, f"{direction}-cluster"),
        n_brokers=3,
        overrides={
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
        },
    )
    single.start()
    with cluster:
        adm = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        wait_until(lambda: len(adm.list_topics(timeout=5).brokers) == 3, 60, message="3 brokers")
        try:
            if direction == "single-to-cluster":
                src, tgt, rf, kill = single.bootstrap, cluster.bootstrap_servers, 1, single.kill
            else:
                src, tgt, rf, kill = (
                    cluster.bootstrap_servers,
                    single.bootstrap,
                    3,
                    cluster.kill_all,
                )
            label = direction
            sigkill_runs(src, tgt, rf, base, label)
            dr_drill(src, tgt, rf, base, label, kill)
        finally:
            single.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--direction", default="both", choices=["single-to-cluster", "cluster-to-single", "both"]
    )
    opts = ap.parse_args()
    dirs = (
        ["single-to-cluster", "cluster-to-single"] if opts.direction == "both" else [opts.direction]
    )
    with tempfile.TemporaryDirectory(prefix="mirror-drill-") as base:
        for d in dirs:
            started = time.monotonic()
            run(d, base)
            print(f"     {d}: {time.monotonic() - started:.0f} s", flush=True)
    if FAILED:
        print(f"{len(FAILED)} check(s) failed", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
