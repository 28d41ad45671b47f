"""Page load times of ``logstore console`` on a big topic and a big group (issue 40's
rule: every page under 1 s on a topic of 1,000 partitions and a group of 100 members).

    python benches/console_bench.py [--partitions 1000] [--members 100] [--rounds 5]
        [--workdir /tmp/console-bench]

One broker; a topic of ``--partitions`` partitions with ``--records`` records spread
over them; ``--members`` confluent-kafka consumers in one group subscribed to it (the
group waited for until it is STABLE with every member assigned); a console on a free
port. Each page is fetched once to warm it, then ``--rounds`` times; the median and
the slowest time from request to the last byte are printed per page.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benches"))
sys.path.insert(0, str(REPO))

from e2e_helpers import BrokerProc, free_port  # noqa: E402

TOPIC = "big"
GROUP = "crowd"


def _setup(bootstrap: str, partitions: int, records: int, members: int) -> list:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)], request_timeout=300)[TOPIC].result(300)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    for i in range(records):
        producer.produce(TOPIC, key=f"k{i}", value=f'{{"n": {i}}}', partition=i % partitions)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    consumers = []
    for i in range(members):
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": f"member-{i}",
                "session.timeout.ms": 60000,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        c.subscribe([TOPIC])
        consumers.append(c)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0)
        if all(c.assignment() for c in consumers):
            desc = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
            if len(desc.members) == members and desc.state.name == "STABLE":
                break
        time.sleep(0.2)
    else:
        raise SystemExit("the group did not settle")
    for c in consumers[: members // 2]:  # half the members commit offset 10
        done = [TopicPartition(tp.topic, tp.partition, 10) for tp in c.assignment()]
        c.commit(offsets=done, asynchronous=False)
    return consumers


def _fetch(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workdir", default="/tmp/console-bench")
    args = ap.parse_args()
    workdir = Path(args.workdir)
    subprocess.run(["rm", "-rf", str(workdir)], check=True)
    broker = BrokerProc(workdir / "broker")
    broker.start()
    console = None
    consumers = []
    try:
        t0 = time.monotonic()
        consumers = _setup(broker.bootstrap, args.partitions, args.records, args.members)
        print(f"setup: {time.monotonic() - t0:.1f} s", flush=True)
        port = free_port()
        console = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logstore",
                "console",
                "-b",
                broker.bootstrap,
                "--listen",
                f"127.0.0.1:{port}",
            ],
            stdout=subprocess.PIPE,
            env={"PYTHONPATH": f"{REPO}:{REPO / 'python'}", "PATH": "/usr/bin:/bin"},
        )
        assert console.stdout is not None
        console.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        pages = [
            "/",
            "/topics",
            f"/topics/{TOPIC}",
            f"/topics/{TOPIC}/records",
            f"/topics/{TOPIC}/records?mode=offset&offset=50",
            f"/topics/{TOPIC}/records?key=k99999",
            "/groups",
            f"/groups/{GROUP}",
            "/security",
        ]
        print(f"{'page':48} {'median s':>9} {'max s':>7}")
        for page in pages:
            for _ in range(2):
                for c in consumers:
                    c.poll(0)
            _fetch(base + page)
            times = []
            for _ in range(args.rounds):
                for c in consumers:
                    c.poll(0)
                times.append(_fetch(base + page))
            print(f"{page:48} {statistics.median(times):9.3f} {max(times):7.3f}", flush=True)
    finally:
        if console is not None:
            console.terminate()
            console.wait(15)
        # every member leaves at once: closed one after another, each leave makes the
        # group rebalance around members that are not polling
        with ThreadPoolExecutor(len(consumers) or 1) as pool:
            list(pool.map(lambda c: c.close(), consumers))
        broker.stop()


if __name__ == "__main__":
    main()
