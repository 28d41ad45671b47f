"""Mirror throughput (issue 38): `logstore mirror` between two brokers on this machine
against the slower of consume-alone and produce-alone, measured in the same run.

    python benches/mirror_bench.py [--records-100 400000] [--records-1k 150000] [--json out]

For each record size (100 B, 1 KB): N records are written to a 4-partition source topic;
then, each timed on its own, (1) a confluent-kafka consumer reads them all from the
source (the mirror's consumer settings), (2) a confluent-kafka producer writes N records
of that size to a fresh target topic (the mirror's producer settings: idempotent,
acks=all, linger.ms=5), (3) `logstore mirror` copies the topic at-least-once, (4) the
same exactly-once, each into fresh remote topics. A rate is records per second between
the first 1 % and the last record (the mirror's: polled end offsets on the target every
50 ms), so process start and group join are not counted; each rate is the median of
--rounds rounds. Ratio = mirror rate / min(consume rate, produce rate).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.integration.conftest import BrokerProcess  # noqa: E402
from tests.support import processes  # noqa: E402

PARTITIONS = 4


def create(bootstrap: str, topic: str) -> None:
    adm = AdminClient({"bootstrap.servers": bootstrap})
    for f in adm.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result()


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    """Writes n records of `size` bytes; records/s from the first 1 % to the end."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
        }
    )
    value = os.urandom(size)
    start = time.monotonic()
    t1 = None
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
            if t1 is None and i >= n // 100:
                t1 = time.monotonic()
    p.flush(120)
    end = time.monotonic()
    return (n - n // 100) / (end - (t1 or start))


def consume(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.subscribe([topic])
    got = 0
    t1 = None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        msgs = c.consume(5000, 0.5)
        got += sum(1 for m in msgs if m.error() is None)
        if t1 is None and got >= n // 100:
            t1 = time.monotonic()
    end = time.monotonic()
    c.close()
    assert got >= n, (got, n)
    return (n - n // 100) / (end - (t1 or end))


def target_count(c: Consumer, topic: str) -> int:
    total = 0
    for p in range(PARTITIONS):
        try:
            total += c.get_watermark_offsets(TopicPartition(topic, p), 5)[1]
        except Exception:
            return 0
    return total


def mirror(
    a: BrokerProcess, b: BrokerProcess, topic: str, n: int, alias: str, eos: bool, workdir: str
) -> float:
    args = [
        sys.executable,
        "-m",
        "logstore",
        "mirror",
        "--source",
        a.bootstrap,
        "--target",
        b.bootstrap,
        "--source-alias",
        alias,
        "--target-alias",
        "t",
        "--topics",
        topic,
        "--set",
        "emit.checkpoints.enabled=false",
    ]
    if eos:
        args.append("--exactly-once")
    with open(os.path.join(workdir, f"mirror-{alias}.log"), "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=processes.repo_env())
    ok, out = processes.wait_for_output(proc, b": running", 60)
    assert ok, out
    remote = f"{alias}.{topic}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused"})
    t1 = None
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            got = target_count(c, remote)
            now = time.monotonic()
            if t1 is None and got >= n // 100:
                t1, g1 = now, got
            if got >= n and now > t1:
                # (with exactly-once the end offsets include the transaction markers)
                return (got - g1) / (now - t1)
            time.sleep(0.05)
        raise RuntimeError("the mirror did not finish")
    finally:
        c.close()
        processes.terminate(proc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records-100", type=int, default=400_000)
    ap.add_argument("--records-1k", type=int, default=150_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    opts = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as d:
        os.makedirs(f"{d}/a")
        os.makedirs(f"{d}/b")
        a, b = BrokerProcess(f"{d}/a"), BrokerProcess(f"{d}/b")
        a.start()
        b.start()
        try:
            for size, n in ((100, opts.records_100), (1024, opts.records_1k)):
                topic = f"bench-{size}"
                create(a.bootstrap, topic)
                produce(a.bootstrap, topic, n, size)  # the source data
                row: dict[str, float] = {"size": size, "records": n}
                runs: dict[str, list[float]] = {}
                for r in range(opts.rounds):
                    create(b.bootstrap, f"alone-{size}-{r}")
                    got = {
                        "consume_alone": consume(a.bootstrap, topic, n),
                        "produce_alone": produce(b.bootstrap, f"alone-{size}-{r}", n, size),
                        "mirror_alo": mirror(a, b, topic, n, f"alo{size}r{r}", False, d),
                        "mirror_eos": mirror(a, b, topic, n, f"eos{size}r{r}", True, d),
                    }
                    for k, v in got.items():
                        runs.setdefault(k, []).append(v)
                for k, v in runs.items():
                    row[k] = statistics.median(v)
                base = min(row["consume_alone"], row["produce_alone"])
                row["ratio_alo"] = row["mirror_alo"] / base
                row["ratio_eos"] = row["mirror_eos"] / base
                results.append(row)
                print(
                    f"{size:>5} B x {n}: consume-alone {row['consume_alone']:,.0f}/s, "
                    f"produce-alone {row['produce_alone']:,.0f}/s, mirror at-least-once "
                    f"{row['mirror_alo']:,.0f}/s ({row['ratio_alo']:.2f}), exactly-once "
                    f"{row['mirror_eos']:,.0f}/s ({row['ratio_eos']:.2f})",
                    flush=True,
                )
        finally:
            a.kill()
            b.kill()
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
