"""Replication throttle bench (issue 36, KIP-73): a partition move under a throttle of R
MB/s, and without one, beside an acks=all producer at a steady rate.

    python benches/reassignment_throttle.py [--gib 1] [--rates 20,0] [--base-seconds 20]
        [--producer-rate 500] [--window-num 11] [--json out.json]

Two brokers and a ZooKeeper (``tests/cluster/harness``; the brokers advertise their own
listeners, so no proxy carries the bytes). Per case (``--rates``, MB/s, 0 for none):

1. a fresh topic ``bulk-<n>`` of one partition on broker 1 alone is filled with ``--gib``
   GiB of 10 KiB random records (acks=1, 1 MB batches);
2. a producer process (confluent-kafka) sends 1 KiB records with acks=all and
   linger.ms=0 at ``--producer-rate`` per second to ``live`` (one partition on brokers 1
   and 2, both in sync, ``min.insync.replicas`` 2), logging each record's send time and
   its time to delivery;
3. after ``--base-seconds`` (the baseline), the throttle is set as
   ``kafka-reassign-partitions.sh --throttle`` sets it: both rates on both brokers
   (IncrementalAlterConfigs), and the moving partition listed on the bulk topic
   (``leader.replication.throttled.replicas=0:1``, the current replica;
   ``follower.replication.throttled.replicas=0:2``, the new one);
4. AlterPartitionReassignments moves the partition from broker 1 to broker 2 (kafka-python).
   The bench samples the size of broker 2's copy every 0.25 s until the reassignment is
   no longer listed (bounded: 4 x the expected time + 120 s), then removes the throttle.

Reported per case: the move's overall rate (log bytes / time from the reassignment to its
end) and its steady rate (over the samples past the throttle's start-up allowance, the
first ``replication.quota.window.num - 1`` windows, in which a Kafka rate sensor lets
R x (window.num - 1) s through at once; to 95% of the bytes), both against R; the producer's p50/p99
before the move (the baseline, its first 2 s dropped), during the copy (records sent from
the reassignment until 1 s before the new replica holds every byte) and during the whole
move (to 3 s past its end: the new replica joins the ISR, the old one is stopped and its
log deleted), each p99 against the baseline's; the load average. The move's bytes are the
leader's log bytes; the copy's size is checked equal to them at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MB = 1_000_000
MIB = 1 << 20
SESSION_MS = 18000
OVERRIDES = {
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "200",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_LIST = "leader.replication.throttled.replicas"
FOLLOWER_LIST = "follower.replication.throttled.replicas"
SAMPLES = 11  # replication.quota.window.num (Kafka's default; --window-num) of 1 s
BULK_RECORD = 10 * 1024
LIVE_RECORD = 1024
END_S = 3.0  # producer records past the reassignment's end counted in the move


# ---------------------------------------------------------------------------
# the acks=all producer process
# ---------------------------------------------------------------------------


def run_latency_producer(bootstrap: str, topic: str, rate: int, out: str) -> None:
    """Sends ``rate`` records/s until SIGTERM; writes ``send_time latency_s`` per record
    (CLOCK_MONOTONIC, shared by every process on the host)."""
    from confluent_kafka import Producer

    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    lines: list[str] = []
    failed = 0

    def report(err: object, msg: object, sent: float) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
        else:
            lines.append(f"{sent:.6f} {time.monotonic() - sent:.6f}\n")

    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 60000}
    )
    value = os.urandom(LIVE_RECORD)
    interval = 1.0 / rate
    next_t = time.monotonic()
    while not stop:
        sent = time.monotonic()
        p.produce(topic, value, partition=0, on_delivery=lambda e, m, s=sent: report(e, m, s))
        p.poll(0)
        next_t += interval
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_t = time.monotonic()
    p.flush(30)
    with open(out, "w") as f:
        f.writelines(lines)
        f.write(f"# failed {failed}\n")


# ---------------------------------------------------------------------------
# the cluster
# ---------------------------------------------------------------------------


def start_cluster(workdir: Path, window_num: int):
    from confluent_kafka.admin import AdminClient

    from tests.cluster.harness.cluster import Cluster, wait_until

    overrides = {**OVERRIDES, "replication.quota.window.num": str(window_num)}
    c = Cluster(workdir, n_brokers=2, zk_session_timeout_ms=SESSION_MS, overrides=overrides)
    for b in c.brokers:
        b.overrides["advertised.listeners"] = (
            f"CLIENT://127.0.0.1:{b.client_port},INTERNAL://127.0.0.1:{b.internal_port}"
        )
    c.__enter__()
    try:
        bootstrap = ",".join(f"127.0.0.1:{b.client_port}" for b in c.brokers)
        quiet = logging.getLogger("throttle-bench.admin")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({"bootstrap.servers": bootstrap}, logger=quiet)
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 60, 0.1, "2 brokers")
    except BaseException:
        c.__exit__(*sys.exc_info())
        raise
    return c, admin, bootstrap


def create_topic(admin, name: str, replicas: list[int], config: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    from tests.cluster.harness.cluster import wait_until

    admin.create_topics(
        [NewTopic(name, num_partitions=1, replica_assignment=[replicas], config=config)],
        operation_timeout=30,
    )[name].result(60)

    def ready() -> bool:
        md = admin.list_topics(name, timeout=5).topics.get(name)
        if md is None or md.error is not None or 0 not in md.partitions:
            return False
        p = md.partitions[0]
        return p.leader == replicas[0] and sorted(p.isrs) == sorted(replicas)

    wait_until(ready, 60, 0.1, f"{name} led by {replicas[0]}, all in sync")


def fill(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    pool = [os.urandom(BULK_RECORD) for _ in range(64)]
    for i in range(total // BULK_RECORD):
        while True:
            try:
                p.produce(topic, pool[i % len(pool)], partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0, "fill not acknowledged"


def log_bytes(c, broker: int, topic: str) -> int:
    path = c.broker(broker).partition_dir(topic, 0)
    if not path.is_dir():
        return 0
    total = 0
    for f in path.iterdir():
        if f.suffix == ".log":
            try:
                total += f.stat().st_size
            except FileNotFoundError:
                pass
    return total


def alter(admin, resource, entries: dict[str, str | None]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource.incremental_configs = [
        ConfigEntry(
            k,
            v or "",
            incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET,
        )
        for k, v in entries.items()
    ]
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def set_throttle(admin, topic: str, rate: int | None) -> None:
    """kafka-reassign-partitions.sh's throttle for moving ``topic``-0 from 1 to 2 (or its
    removal, with None)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    value = None if rate is None else str(rate)
    for b in (1, 2):
        alter(admin, ConfigResource(ResourceType.BROKER, str(b)), dict.fromkeys(RATES, value))
    lists = {LEADER_LIST: "0:1", FOLLOWER_LIST: "0:2"} if rate is not None else None
    alter(
        admin,
        ConfigResource(ResourceType.TOPIC, topic),
        lists or {LEADER_LIST: None, FOLLOWER_LIST: None},
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------
# one case
# ---------------------------------------------------------------------------


def run_case(c, admin, bootstrap: str, n: int, rate_mb: float, args, workdir: Path) -> dict:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    topic = f"bulk-{n}"
    create_topic(admin, topic, [1], {"segment.bytes": str(256 * MIB)})
    t = time.monotonic()
    fill(bootstrap, topic, int(args.gib * (1 << 30)))
    total = log_bytes(c, 1, topic)
    print(
        f"case {n}: {topic} filled with {total / MIB:.0f} MiB in {time.monotonic() - t:.1f} s",
        flush=True,
    )

    out = workdir / f"latency-{n}.txt"
    producer = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--latency-producer",
            bootstrap,
            "live",
            str(args.producer_rate),
            str(out),
        ]
    )
    rate = int(rate_mb * MB) if rate_mb > 0 else None
    samples: list[tuple[float, int]] = []
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        base_start = time.monotonic() + 2
        time.sleep(args.base_seconds + 2)
        if rate is not None:
            set_throttle(admin, topic, rate)
        load_before = os.getloadavg()[0]
        t0 = time.monotonic()
        answer = kp.alter_partition_reassignments({KTopicPartition(topic, 0): [2]}, 30000)
        assert answer == {KTopicPartition(topic, 0): None}, answer
        expected = total / (rate or 50 * MB)
        deadline = t0 + 4 * expected + 120
        last_check = 0.0
        while True:
            now = time.monotonic()
            assert now < deadline, f"the move of {topic} did not end in {deadline - t0:.0f} s"
            samples.append((now, log_bytes(c, 2, topic)))
            if samples[-1][1] >= total and now - last_check >= 0.25:
                last_check = now
                if not kp.list_partition_reassignments():
                    break
            time.sleep(0.25)
        t1 = time.monotonic()
        load_during = os.getloadavg()[0]
        time.sleep(END_S)  # the producer past the move's end and the old replica's removal
    finally:
        kp.close()
        producer.send_signal(signal.SIGTERM)
        producer.wait(60)
        if rate is not None:
            set_throttle(admin, topic, None)
    copied = log_bytes(c, 2, topic)
    assert copied == total, (copied, total)
    # The copy's progress beside the latency log (kept with --keep): time, bytes.
    (workdir / f"copy-{n}.txt").write_text("".join(f"{t:.3f} {b}\n" for t, b in samples))

    # The copy ends when the new replica holds every byte; the reassignment then ends
    # (the new replica joins the ISR, the old one is stopped and its log deleted).
    copy_end = next(t for t, b in samples if b >= total)
    before: list[float] = []
    copying: list[float] = []
    moving: list[float] = []
    failed = 0
    for line in out.read_text().splitlines():
        if line.startswith("# failed"):
            failed = int(line.split()[-1])
            continue
        sent, latency = map(float, line.split())
        if base_start <= sent < t0:
            before.append(latency * 1000)
        elif t0 <= sent < t1 + END_S:
            moving.append(latency * 1000)
            if sent < copy_end - 1:
                copying.append(latency * 1000)
    # Steady rate: past the start-up allowance (samples - 1 windows of 1 s), to 95%.
    steady = [(t, b) for t, b in samples if t >= t0 + args.window_num and b <= 0.95 * total]
    steady_rate = (
        (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
        if len(steady) >= 2 and steady[-1][0] > steady[0][0]
        else float("nan")
    )
    result = {
        "throttle_MBps": rate_mb,
        "window_num": args.window_num,
        "bytes": total,
        "move_s": t1 - t0,
        "overall_MBps": total / (t1 - t0) / MB,
        "steady_MBps": steady_rate / MB,
        "p50_before_ms": percentile(before, 0.5),
        "p99_before_ms": percentile(before, 0.99),
        "copy_s": copy_end - t0,
        "p50_copy_ms": percentile(copying, 0.5),
        "p99_copy_ms": percentile(copying, 0.99),
        "p50_move_ms": percentile(moving, 0.5),
        "p99_move_ms": percentile(moving, 0.99),
        "max_move_ms": max(moving, default=float("nan")),
        "records_before": len(before),
        "records_copy": len(copying),
        "records_move": len(moving),
        "failed": failed,
        "load_before": load_before,
        "load_during": load_during,
    }
    result["p99_copy_ratio"] = result["p99_copy_ms"] / result["p99_before_ms"]
    result["p99_move_ratio"] = result["p99_move_ms"] / result["p99_before_ms"]
    if rate_mb > 0:
        result["overall_vs_R"] = result["overall_MBps"] / rate_mb
        result["steady_vs_R"] = result["steady_MBps"] / rate_mb
    print(json.dumps(result, indent=1), flush=True)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rates", default="20,0", help="MB/s per case, 0: no throttle")
    parser.add_argument("--base-seconds", type=float, default=20.0)
    parser.add_argument("--producer-rate", type=int, default=500)
    parser.add_argument(
        "--window-num", type=int, default=SAMPLES, help="replication.quota.window.num"
    )
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--latency-producer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.latency_producer:
        bootstrap, topic, rate, out = args.latency_producer
        run_latency_producer(bootstrap, topic, int(rate), out)
        return

    workdir = Path(tempfile.mkdtemp(prefix="throttle-bench-"))
    c, admin, bootstrap = start_cluster(workdir / "cluster", args.window_num)
    results = []
    try:
        create_topic(admin, "live", [1, 2], {"min.insync.replicas": "2"})
        for n, rate_mb in enumerate(float(r) for r in args.rates.split(",")):
            results.append(run_case(c, admin, bootstrap, n, rate_mb, args, workdir))
            if args.json:  # each case as it ends
                Path(args.json).write_text(json.dumps(results, indent=1))
    finally:
        c.__exit__(None, None, None)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        "\nthrottle MB/s | GiB | move s | overall MB/s | steady MB/s | p99 ms before |"
        " copy (x) | move (x) | max ms"
    )
    for r in results:
        print(
            f"{r['throttle_MBps'] or 'none'} | {r['bytes'] / (1 << 30):.2f} | {r['move_s']:.1f} | "
            f"{r['overall_MBps']:.1f} | {r['steady_MBps']:.1f} | {r['p99_before_ms']:.1f} | "
            f"{r['p99_copy_ms']:.1f} ({r['p99_copy_ratio']:.2f}) | "
            f"{r['p99_move_ms']:.1f} ({r['p99_move_ratio']:.2f}) | {r['max_move_ms']:.0f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(
        "p50 ms before/copy/move:",
        [(r["p50_before_ms"], r["p50_copy_ms"], r["p50_move_ms"]) for r in results],
    )
    print("load before/during:", [(r["load_before"], r["load_during"]) for r in results])


if __name__ == "__main__":
    main()
