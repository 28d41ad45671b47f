"""Replication benchmark: produce and consume throughput, ack latency and the brokers' CPU
per message at replication factor 1 and 3, with three real broker processes and a real
ZooKeeper (``tests/cluster/harness``), every case side by side in one run.

    python benches/replication_bench.py [--quick] [--rounds N] [--messages N] [--netns]
        [--kb-messages N] [--json out.json]

Cases, each on a fresh one-partition topic whose leader is the same broker (one that
is not the controller; its followers are the other two, ``min.insync.replicas`` 2 at RF 3):

1. **Throughput, 100 B messages**: RF 1 acks=1, RF 1 acks=all, RF 3 acks=1, RF 3 acks=all,
   and for reference a single broker without ZooKeeper (``python -m broker_py`` alone, as
   ``benches/test_end_to_end.py`` runs it) at acks=1. A confluent-kafka producer tuned for
   throughput as in the end-to-end bench (linger.ms 20, batch.size 1 MB, no compression)
   driven by ``produce_batch()`` (10,000 messages a call), at most ``OUTSTANDING`` messages
   queued or in flight, so a case stops producing at its time limit and ends within
   seconds of it. msg/s is messages / (first produce to the end of ``flush()``). Each
   round runs every case, in the opposite order to the round before; the cases' ratios
   to RF 1 acks=1 are paired per round. Right after their produce case the RF 1 and RF 3
   acks=1 topics are read back by a confluent-kafka consumer (``assign`` from offset 0,
   500 messages per ``consume()``, no subscription and no commits; the consumer of
   ``benches/e2e_helpers.py``). With RF 3 the followers are caught up and idle while it
   reads. Every case's topic is deleted after it: a follower's Fetch carries every
   partition it follows from the leader (no fetch sessions), so topics left behind
   would make later cases dearer.
1b. **CPU per message at 1 KB**: each round, after the 100 B cases, RF 1 acks=1 and
   RF 3 acks=all with ``--kb-messages`` 1 KB records (default ``--messages`` / 10, the
   same bytes), the same producer, counted as in 3 below.
2. **Ack latency, 1 KB at 5,000 msg/s**, paced one message every 200 µs, linger.ms=0:
   ``produce()`` to the delivery callback, p50 / p99 / p99.9 / max, for RF 1 acks=1,
   RF 1 acks=all, RF 3 acks=1, RF 3 acks=all, and RF 3 acks=all from a producer with at
   most 5 requests in flight (see ``LATENCY_CASES``), in two passes of half the time each
   (the second in the opposite order); the first 0.5 s of each pass is dropped.
2b. **One request at a time** (``--serial N``, default 2,000; 0 skips it): RF 1 acks=1 and
   RF 3 acks=all, two runs each on fresh topics, N one-record (1 KB) requests from one
   producer on one connection, each produced only after the one before it was
   acknowledged: requests/s, p50/p99 of produce() to delivery, the brokers' CPU per request.
3. **The brokers' CPU** (user + system from ``/proc/<pid>/stat``) summed over the three
   broker processes, before and after each case, as seconds per million messages; also
   split leader / followers, and this process's own CPU (the client: librdkafka's
   threads and the Python loop). A produce case's CPU counts until the partition's high
   watermark reaches its end (with acks=1 the followers may still be copying when the
   producer is done; "replicated" is the msg/s up to then). Beside it: how long the
   brokers' threads were runnable but waited for a CPU (``schedstat``; the share of the
   case, per broker), the VM's steal time, and the records per batch in the leader's log.

After each RF 3 throughput case (outside its timing) the three replicas are compared
byte for byte below the high watermark (``tests/cluster/harness/replicas.py``).

Reference ("ceiling", as the other benches pair one): a raw loopback socket pump of the
same payload bytes (``SocketPump``: 1 MB ``sendall``, ``recv_into`` on a thread) right
before each produce case, reported as MB/s and as the case's payload MB/s over it.

``--netns`` runs each broker in its own network namespace joined to the host by a veth
pair on a bridge (``benches/netns.py``; created and removed by the bench), so a
broker's send no longer also runs its peer's receive path on loopback; the client and
ZooKeeper stay on the host. Both ends' TCP stacks still run on the same CPUs.

By default the brokers advertise their own listeners, so clients and followers connect
to them directly. The harness's fault-injection proxies (Python asyncio, in this
process) would otherwise carry every byte: ``--via-proxies`` keeps them, to show what
they cost. ``--profile`` adds, after the measured cases (so they are not disturbed), one
more RF 3 acks=all produce with ``py-spy record --native`` sampling the leader and one
follower, and prints where the busy samples of their event-loop threads fall, system
calls included (needs ``pip install py-spy``; ``--profile-dir`` keeps the raw stacks).

Every loop is bounded: a throughput case stops producing after ``--case-seconds``. The
full run takes 2.5-3.5 minutes on the 2-vCPU machine (4 rounds, 20 s per latency
case), ``--quick`` about 1 (its single 0.3 s produce cases are only a smoke test).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for p in (REPO_ROOT, REPO_ROOT / "benches"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from cpu_meter import CpuMeter  # noqa: E402
from e2e_helpers import (  # noqa: E402 - importable once benches/ is on sys.path (above)
    MB,
    BrokerProc,
    SocketPump,
    consume,
    paced_produce,
    percentile,
)
from e2e_helpers import create_topic as single_create_topic  # noqa: E402
from netns import HOST_IP, Netns  # noqa: E402
from replication_report import (  # noqa: E402
    LABELS,
    LATENCY_CASES,
    LATENCY_RATE,
    SINGLE,
    THROUGHPUT_CASES,
    median,
    print_report,
    summarize,
)

SIZE = 100
LATENCY_SIZE = 1024
CHUNK = 10_000  # messages per produce_batch() call
OUTSTANDING = 300_000  # messages queued or in flight at most: ~30 MB of 100 B messages
SESSION_MS = 30_000  # no broker's ZooKeeper session expires on a busy host
OVERRIDES = {
    "message.max.bytes": str(8 * MB),  # the producer sends 1 MB batches
    "auto.leader.rebalance.enable": "false",
    # The consumer has a group.id (confluent-kafka requires one), so librdkafka looks for
    # its coordinator: a small offsets topic, created in the set-up, not in a timed case.
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# the cluster
# ---------------------------------------------------------------------------


def start_cluster(workdir: Path, via_proxies: bool, net=None):
    """The three brokers and ZooKeeper; with ``net`` (a :class:`netns.Netns`) each broker
    runs in its own network namespace, listening and advertising its address there, and
    reaches ZooKeeper through ``net``'s relay on the bridge."""
    from confluent_kafka.admin import AdminClient

    from tests.cluster.harness.cluster import Cluster, wait_until

    c = Cluster(workdir, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=OVERRIDES)
    if net is not None:
        assert c.zookeeper is not None
        zk_port = net.forward(c.zookeeper.port)
        for b in c.brokers:
            addr = net.address(b.id)
            b.command_prefix = net.prefix(b.id)
            b.overrides["listeners"] = b.overrides["advertised.listeners"] = (
                f"CLIENT://{addr}:{b.client_port},INTERNAL://{addr}:{b.internal_port}"
            )
            b.overrides["zookeeper.connect"] = f"{HOST_IP}:{zk_port}{c.chroot}"
    elif not via_proxies:
        # Advertise the brokers' own listeners: clients and followers connect straight to
        # them, not through the harness's proxies (ZooKeeper's links keep theirs).
        for b in c.brokers:
            b.overrides["advertised.listeners"] = (
                f"CLIENT://127.0.0.1:{b.client_port},INTERNAL://127.0.0.1:{b.internal_port}"
            )
    c.__enter__()
    try:
        if net is not None:
            bootstrap = ",".join(f"{net.address(b.id)}:{b.client_port}" for b in c.brokers)
        elif via_proxies:
            bootstrap = c.bootstrap_servers
        else:
            bootstrap = ",".join(f"127.0.0.1:{b.client_port}" for b in c.brokers)
        # librdkafka's log lines (disconnects when the cluster stops at the end) go nowhere.
        quiet = logging.getLogger("replication-bench.admin")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({"bootstrap.servers": bootstrap}, logger=quiet)
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            60,
            0.1,
            "three brokers in metadata",
        )
    except BaseException:
        c.__exit__(*sys.exc_info())
        raise
    return c, admin, bootstrap


def create_topic(admin, name: str, replicas: list[int]) -> None:
    from confluent_kafka.admin import NewTopic

    from tests.cluster.harness.cluster import wait_until

    config = {"min.insync.replicas": "2" if len(replicas) >= 3 else "1"}
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

    wait_until(ready, 30, 0.05, f"{name} led by {replicas[0]} with ISR {replicas}")


class Watermarks:
    """A partition's high watermark, asked of its leader (ListOffsets) each call."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        quiet = logging.getLogger("replication-bench.watermarks")
        quiet.setLevel(logging.CRITICAL)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "replication-bench-watermarks",
                "enable.auto.commit": False,
            },
            logger=quiet,
        )

    def high(self, topic: str) -> int:
        from confluent_kafka import TopicPartition

        return self.consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=5, cached=False
        )[1]

    def close(self) -> None:
        self.consumer.close()


def count_batches(part_dir: Path) -> tuple[int, int]:
    """(batches, records) in a partition directory's segments, from the batch headers
    (base offset, length, last offset delta)."""
    import struct

    batches = records = 0
    for seg in sorted(p for p in Path(part_dir).glob("*.log") if p.stem.isdigit()):
        with open(seg, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            pos = 0
            while pos + 61 <= size:
                f.seek(pos)
                head = f.read(27)
                _base, length = struct.unpack_from(">qi", head)
                if length <= 0 or pos + 12 + length > size:
                    break
                (delta,) = struct.unpack_from(">i", head, 23)
                batches += 1
                records += delta + 1
                pos += 12 + length
    return batches, records


def delete_topic(admin, name: str) -> None:
    from tests.cluster.harness.cluster import wait_until

    admin.delete_topics([name], operation_timeout=30)[name].result(60)
    wait_until(lambda: name not in admin.list_topics(timeout=5).topics, 30, 0.05, f"{name} deleted")
    time.sleep(0.2)  # the followers' StopReplica


# ---------------------------------------------------------------------------
# produce, consume, latency
# ---------------------------------------------------------------------------


def new_producer(bootstrap: str, acks: str, linger_ms: int, errors: list[str]):
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": linger_ms,
            "batch.size": MB,
            "batch.num.messages": 1_000_000,
            "message.max.bytes": 8 * MB,
            "compression.type": "none",
            "queue.buffering.max.messages": 2 * OUTSTANDING,
            "queue.buffering.max.kbytes": 2_097_151,
            "delivery.report.only.error": True,
            "message.timeout.ms": 120_000,
            "on_delivery": lambda err, msg: errors.append(str(err)) if err is not None else None,
            "error_cb": lambda err: errors.append(f"client: {err}"),
        }
    )


def produce_throughput(
    bootstrap: str,
    topic: str,
    acks: str,
    count: int,
    limit_s: float,
    linger_ms: int,
    pids: dict[int, int],
    leader: int,
    high_watermark=None,
    size: int = SIZE,
) -> dict:
    """Produces up to ``count`` ``size``-byte messages to partition 0 (stopping at ``limit_s``);
    returns msg/s, MB/s and the CPU spent per million messages. With ``high_watermark``
    (a function returning the partition's), the CPU is counted until it reaches the end
    (every replica has the records), and that time is ``replicated_s``."""
    errors: list[str] = []
    p = new_producer(bootstrap, acks, linger_ms, errors)
    p.produce(topic, b"warm-up", partition=0)  # connection, metadata, followers fetching
    assert p.flush(30) == 0, f"warm-up of {topic} not delivered: {errors}"
    payload = os.urandom(size)
    messages = [{"value": payload}] * CHUNK  # the client copies the payload per message
    produce_batch, poll = p.produce_batch, p.poll
    sent = 0
    gc.collect()
    with CpuMeter(pids) as cpu:
        start = time.perf_counter()
        deadline = start + limit_s
        while sent < count and time.perf_counter() < deadline:
            while len(p) > OUTSTANDING:
                poll(0.001)
            n = min(CHUNK, count - sent)
            queued = produce_batch(topic, messages[:n] if n < CHUNK else messages, partition=0)
            if queued < n:
                raise AssertionError(
                    f"produce_batch queued {queued} of {n}: {messages[0].get('_error')}"
                )
            sent += queued
            poll(0)
        left = p.flush(120)
        elapsed = time.perf_counter() - start
        # The case's CPU counts until every replica has the records: with acks=1 the
        # followers may still be copying them when the producer is done.
        replicated = elapsed
        if high_watermark is not None:
            end = sent + 1  # and the warm-up message
            give_up = time.perf_counter() + 60
            while high_watermark() < end and time.perf_counter() < give_up:
                time.sleep(0.002)
            replicated = time.perf_counter() - start
    assert left == 0, f"{left} messages not delivered"
    assert not errors, errors[:5]
    res = {
        "messages": sent,
        "seconds": elapsed,
        "msgs_per_s": sent / elapsed,
        "mb_per_s": sent * size / elapsed / MB,
        "size": size,
        "replicated_s": replicated,
        "replicated_msgs_per_s": sent / replicated,
        "cut_at_limit": sent < count,
        **cpu.per_million(sent, leader),
    }
    return res


def consume_throughput(
    bootstrap: str, topic: str, count: int, pids: dict[int, int], leader: int
) -> dict:
    """Reads ``count`` messages of partition 0 from offset 0 (the warm-up message first)."""
    gc.collect()
    with CpuMeter(pids) as cpu:
        elapsed = consume(bootstrap, topic, 1, count, timeout=120.0)
    return {
        "messages": count,
        "seconds": elapsed,
        "msgs_per_s": count / elapsed,
        "mb_per_s": count * SIZE / elapsed / MB,
        **cpu.per_million(count, leader),
    }


def produce_latency(
    bootstrap: str,
    topic: str,
    acks: str,
    rate: int,
    seconds: float,
    pids: dict[int, int],
    leader: int,
    extra: dict | None = None,
    warmup: float = 0.5,
) -> dict:
    """``LATENCY_SIZE``-byte messages at ``rate`` msg/s (linger.ms=0), one every 1/rate s;
    produce() to delivery callback latencies, the first ``warmup`` seconds dropped."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "message.timeout.ms": 60_000,
            **(extra or {}),
        }
    )
    payload = os.urandom(LATENCY_SIZE)
    p.produce(topic, payload, partition=0)
    assert p.flush(30) == 0
    total = int(rate * (seconds + warmup))
    skip = int(rate * warmup)
    with CpuMeter(pids) as cpu:
        lat, sending = paced_produce(p, topic, payload, rate, total, partition=0)
    kept = lat[skip:]
    return {
        "samples": len(kept),
        "rate": total / sending,
        "p50_ms": percentile(kept, 50) * 1e3,
        "p99_ms": percentile(kept, 99) * 1e3,
        "p999_ms": percentile(kept, 99.9) * 1e3,
        "max_ms": max(kept) * 1e3,
        "latencies": kept,
        **cpu.per_million(total, leader),
    }


SERIAL_CASES = [("rf1-acks1", 1, "1"), ("rf3-acksall", 3, "all")]
KB_SIZE = 1024
KB_CASES = [("rf1-acks1", 1, "1"), ("rf3-acksall", 3, "all")]


def produce_serial(
    bootstrap: str, topic: str, acks: str, n: int, pids: dict[int, int], leader: int
) -> dict:
    """``n`` one-record requests (1 KB, linger.ms=0) on one connection, one at a time:
    each produced only after the one before it was acknowledged. Per request:
    produce() to delivery callback; requests/s over the whole; the brokers' CPU per
    request."""
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "compression.type": "none"}
    )
    payload = os.urandom(LATENCY_SIZE)
    p.produce(topic, payload, partition=0)
    assert p.flush(30) == 0
    now = time.perf_counter
    lat = [0.0] * n
    state = {"done": False, "error": None}

    def on_delivery(err, msg):
        state["done"] = True
        state["error"] = err

    gc.collect()
    with CpuMeter(pids) as cpu:
        start = now()
        for i in range(n):
            state["done"] = False
            t = now()
            p.produce(topic, payload, partition=0, on_delivery=on_delivery)
            deadline = t + 30
            while not state["done"]:
                p.poll(0.0005)
                assert now() < deadline, "no delivery within 30 s"
            assert state["error"] is None, state["error"]
            lat[i] = now() - t
        elapsed = now() - start
    per = cpu.per_million(n, leader)
    return {
        "requests": n,
        "requests_per_s": n / elapsed,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "brokers_cpu_ms_per_request": per["brokers_s_per_M"] / 1e3,
        "leader_cpu_ms_per_request": per["leader_s_per_M"] / 1e3,
        "followers_cpu_ms_per_request": per["followers_s_per_M"] / 1e3,
        "brokers_cpu_wait_s": per["brokers_cpu_wait_s"],
    }


# ---------------------------------------------------------------------------
# py-spy
# ---------------------------------------------------------------------------


def py_spy_top(raw_path: Path, limit: int = 25) -> dict:
    """From py-spy's raw (collapsed) output, the broker's event-loop thread only (stacks
    through ``run_forever``): the share of its samples waiting in epoll (idle), and of the
    rest (busy) each frame's share as the leaf (self) and anywhere in the stack
    (inclusive). Native frames (``--native``) show the system calls under the Python."""
    self_n: Counter = Counter()
    incl_n: Counter = Counter()
    total = loop = idle = 0
    for line in raw_path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        n = int(n)
        total += n
        frames = [_frame(f) for f in stack.split(";")]
        if not any(f.startswith("BaseEventLoop.run_forever") for f in frames):
            continue  # another thread (ZooKeeper client, thread pools), mostly parked
        loop += n
        if frames[-1].startswith(("epoll_wait", "EpollSelector.select")):
            idle += n
            continue
        self_n[frames[-1]] += n
        for f in set(frames):
            incl_n[f] += n
    busy = loop - idle
    return {
        "samples": total,
        "loop_samples": loop,
        "idle_share": idle / loop if loop else float("nan"),
        "busy_samples": busy,
        "self": [(f, c / busy) for f, c in self_n.most_common(limit)] if busy else [],
        "inclusive": [(f, c / busy) for f, c in incl_n.most_common(limit * 3) if c / busy >= 0.02]
        if busy
        else [],
    }


def _frame(f: str) -> str:
    # "function (path/to/file.py:123)" -> "function (file.py)": lines differ per sample
    name, _, where = f.partition(" (")
    return f"{name} ({Path(where.rstrip(')').rsplit(':', 1)[0]).name})" if where else name


def profile_rf3(
    args,
    bootstrap: str,
    admin,
    leader: int,
    followers: list[int],
    pids: dict[int, int],
    out_dir: Path,
) -> dict:
    """One more RF 3 acks=all case with py-spy sampling the leader and one follower."""
    spy = shutil.which("py-spy")
    if spy is None:
        return {"error": "py-spy not found (pip install py-spy)"}
    topic = "profile-rf3-acksall"
    create_topic(admin, topic, [leader, *followers])
    seconds = int(min(10, args.case_seconds))
    procs = {}
    for role, bid in (("leader", leader), ("follower", followers[0])):
        path = out_dir / f"py-spy-{role}-b{bid}.txt"
        procs[role] = (
            path,
            subprocess.Popen(
                # --native (system calls and Rust frames) needs the blocking mode: py-spy stops
                # the process for each sample, which slows it down; hence after the measured cases.
                [
                    spy,
                    "record",
                    "--pid",
                    str(pids[bid]),
                    "--rate",
                    "200",
                    "--duration",
                    str(seconds + 2),
                    "--format",
                    "raw",
                    "--output",
                    str(path),
                    "--native",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            ),
        )
    time.sleep(1.0)
    res = produce_throughput(
        bootstrap, topic, "all", 10 * args.messages, seconds, args.linger_ms, pids, leader
    )
    out = {"throughput_under_py_spy": res}
    for role, (path, proc) in procs.items():
        try:
            _, err = proc.communicate(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if path.exists():
            out[role] = {"path": str(path), **py_spy_top(path)}
        else:
            out[role] = {"error": err.decode(errors="replace")[-2000:]}
    return out


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------


def run(args) -> dict:
    from tests.cluster.harness.cluster import wait_until

    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "argv": sys.argv[1:],
        "loadavg_start": os.getloadavg(),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "cpus": os.cpu_count(),
        "via_proxies": args.via_proxies,
        "netns": None,
        "kb_messages": args.kb_messages,
        "messages": args.messages,
        "rounds": args.rounds,
        "linger_ms": args.linger_ms,
    }
    workdir = Path(tempfile.mkdtemp(prefix="replication-bench-", dir=args.workdir))
    log(f"data under {workdir}")
    single = None
    pump = SocketPump()
    c = net = None
    try:
        if args.netns:
            net = Netns(3).__enter__()
            if net.stale:
                log(f"removed stale namespaces and links: {net.stale}")
            results["netns"] = {b: net.address(b) for b in (1, 2, 3)}
        c, admin, bootstrap = start_cluster(workdir / "cluster", args.via_proxies, net)
        pids = {b.id: b.pid for b in c.brokers}
        md = admin.list_topics(timeout=10)
        controller = md.controller_id
        leader = next(b for b in sorted(pids) if b != controller)
        followers = [b for b in sorted(pids) if b != leader]
        results.update(
            {
                "controller": controller,
                "leader": leader,
                "followers": followers,
                "broker_pids": pids,
            }
        )
        log(
            f"cluster up: brokers {sorted(pids)} (pids {pids}), controller {controller}; every "
            f"topic led by {leader}, followers {followers}"
        )
        if not args.no_single:
            single = BrokerProc(workdir / "single")
            single.start()
            log(f"single broker (no ZooKeeper) on {single.bootstrap}, pid {single.proc.pid}")

        # Set-up outside the timed cases: the consumer's coordinator (the offsets topic).
        create_topic(admin, "setup", [leader, *followers])
        errors: list[str] = []
        p = new_producer(bootstrap, "all", 0, errors)
        for _ in range(10):
            p.produce("setup", b"x" * SIZE, partition=0)
        assert p.flush(30) == 0, errors
        consume(bootstrap, "setup", 1, 10, timeout=60.0)
        wait_until(
            lambda: "__consumer_offsets" in admin.list_topics(timeout=5).topics,
            30,
            0.2,
            "the offsets topic",
        )
        del p
        delete_topic(admin, "setup")

        watermarks = Watermarks(bootstrap)
        # 1. Throughput: every case per round, the order reversed each round. Each case's
        # topic is deleted after it: a follower fetches every partition it follows in each
        # Fetch (no fetch sessions), so topics left behind would make later cases dearer.
        from tests.cluster.harness.replicas import compare_replicas

        checks: dict = {}
        rounds = []
        for r in range(args.rounds):
            cases = list(THROUGHPUT_CASES) + ([SINGLE] if single is not None else [])
            if r % 2:
                cases.reverse()
            rnd: dict = {"produce": {}, "consume": {}}
            for name, rf, acks in cases:
                topic = f"tp-{name}-r{r}"
                if rf:
                    create_topic(admin, topic, [leader, *followers][:rf])
                    target, target_pids, target_leader = bootstrap, pids, leader
                    hw = lambda topic=topic: watermarks.high(topic)  # noqa: E731
                else:
                    try:
                        single_create_topic(single.bootstrap, topic, 1)
                    except Exception:
                        print(single.log_text()[-4000:])
                        raise
                    target, target_pids, target_leader = single.bootstrap, {0: single.proc.pid}, 0
                    hw = None
                os.sync()
                pump_s = pump.pump(args.messages * SIZE)
                res = produce_throughput(
                    target,
                    topic,
                    acks,
                    args.messages,
                    args.case_seconds,
                    args.linger_ms,
                    target_pids,
                    target_leader,
                    hw,
                )
                res["pump_mb_per_s"] = args.messages * SIZE / pump_s / MB
                res["vs_pump"] = res["mb_per_s"] / res["pump_mb_per_s"]
                res["topic"] = topic
                res["loadavg"] = os.getloadavg()[0]
                part_dir = (
                    c.broker(leader).partition_dir(topic, 0)
                    if rf
                    else single.data_dir / f"{topic}-0"
                )
                res["batches"], records = count_batches(part_dir)
                res["records_per_batch"] = (
                    records / res["batches"] if res["batches"] else float("nan")
                )
                rnd["produce"][name] = res
                log(
                    f"round {r + 1} produce {LABELS[name]:<28} {res['msgs_per_s']:>11,.0f} msg/s "
                    f"{res['mb_per_s']:7.1f} MB/s"
                    f"{' (cut at the time limit)' if res['cut_at_limit'] else ''}; replicated "
                    f"{res['replicated_msgs_per_s']:,.0f} msg/s; brokers "
                    f"{res['brokers_s_per_M']:.2f} CPU s/M "
                    f"(leader {res['leader_s_per_M']:.2f}, followers "
                    f"{res['followers_s_per_M']:.2f}), client {res['client_s_per_M']:.2f}; "
                    f"brokers waited {res['brokers_cpu_wait_s']:.2f} s for a CPU in "
                    f"{res['wall_s']:.2f} s; steal {res['steal_s']:.2f} s; "
                    f"{res['records_per_batch']:,.0f} records/batch; pump "
                    f"{res['pump_mb_per_s']:,.0f} MB/s; load {res['loadavg']:.1f}"
                )
                if name in ("rf1-acks1", "rf3-acks1"):
                    os.sync()
                    cres = consume_throughput(bootstrap, topic, res["messages"] + 1, pids, leader)
                    rnd["consume"][name] = cres
                    log(
                        f"round {r + 1} consume {LABELS[name]:<28} {cres['msgs_per_s']:>11,.0f} "
                        f"msg/s {cres['mb_per_s']:7.1f} MB/s; "
                        f"brokers {cres['brokers_s_per_M']:.2f} CPU s/M (leader "
                        f"{cres['leader_s_per_M']:.2f}, followers "
                        f"{cres['followers_s_per_M']:.2f}), client {cres['client_s_per_M']:.2f}; "
                        f"brokers waited {cres['brokers_cpu_wait_s']:.2f} s "
                        f"for a CPU; steal {cres['steal_s']:.2f} s"
                    )
                if rf == 3:
                    # Correctness alongside: the replicas byte-identical below the high watermark.
                    high = watermarks.high(topic)
                    dirs = {f"b{b.id}": b.partition_dir(topic, 0) for b in c.brokers}
                    cmp = compare_replicas(dirs, high)
                    checks[topic] = {
                        "high_watermark": high,
                        "identical": cmp.identical,
                        "end_offsets": cmp.end_offsets,
                        "batches_compared": cmp.batches_compared,
                        "detail": cmp.detail,
                    }
                    log(
                        f"replicas of {topic}: "
                        f"{'identical' if cmp.identical else 'DIFFER: ' + cmp.detail} "
                        "below the high watermark "
                        f"{high:,} ({cmp.batches_compared:,} batches; log ends {cmp.end_offsets})"
                    )
                if rf:
                    delete_topic(admin, topic)
            # 1 KB records, RF 1 acks=1 and RF 3 acks=all: the CPU per message at that size.
            rnd["produce_1k"] = {}
            for name, rf, acks in KB_CASES[:: -1 if r % 2 else 1] if args.kb_messages else []:
                topic = f"tp1k-{name}-r{r}"
                create_topic(admin, topic, [leader, *followers][:rf])
                os.sync()
                res = produce_throughput(
                    bootstrap,
                    topic,
                    acks,
                    args.kb_messages,
                    args.case_seconds,
                    args.linger_ms,
                    pids,
                    leader,
                    lambda topic=topic: watermarks.high(topic),
                    size=KB_SIZE,
                )
                res["loadavg"] = os.getloadavg()[0]
                rnd["produce_1k"][name] = res
                log(
                    f"round {r + 1} produce 1 KB {LABELS[name]:<23} {res['msgs_per_s']:>11,.0f} "
                    f"msg/s {res['mb_per_s']:7.1f} MB/s; brokers {res['brokers_s_per_M']:.2f} "
                    f"CPU s/M (leader {res['leader_s_per_M']:.2f}, followers "
                    f"{res['followers_s_per_M']:.2f}); brokers waited "
                    f"{res['brokers_cpu_wait_s']:.2f} s for a CPU in {res['wall_s']:.2f} s; "
                    f"load {res['loadavg']:.1f}"
                )
                delete_topic(admin, topic)
            rounds.append(rnd)
        results["rounds_throughput"] = rounds
        results["replica_checks"] = checks
        watermarks.close()

        # 2. Latency: two passes, the second in the opposite order.
        passes = 2 if args.latency_seconds >= 8 else 1
        per_pass = args.latency_seconds / passes
        lat: dict = {name: [] for name, _, _, _ in LATENCY_CASES}
        for i in range(passes):
            cases = list(LATENCY_CASES)[:: -1 if i % 2 else 1]
            for name, rf, acks, extra in cases:
                topic = f"lat-{name}-p{i}"
                create_topic(admin, topic, [leader, *followers][:rf])
                os.sync()
                res = produce_latency(
                    bootstrap, topic, acks, args.rate, per_pass, pids, leader, extra
                )
                res["loadavg"] = os.getloadavg()[0]
                delete_topic(admin, topic)
                lat[name].append(res)
                log(
                    f"pass {i + 1} latency {LABELS[name]:<31} 1 KB at {res['rate']:,.0f} msg/s: "
                    f"p50 {res['p50_ms']:.2f} ms, "
                    f"p99 {res['p99_ms']:.2f} ms, p99.9 {res['p999_ms']:.2f} ms, max "
                    f"{res['max_ms']:.1f} ms; brokers "
                    f"{res['brokers_cores']:.2f} cores, waited {res['brokers_cpu_wait_s']:.2f} s "
                    f"for a CPU; steal {res['steal_s']:.2f} s; load {res['loadavg']:.1f}"
                )
        results["latency"] = {}
        for name, runs in lat.items():
            every = [x for r_ in runs for x in r_.pop("latencies")]
            results["latency"][name] = {
                "passes": runs,
                "p50_ms": percentile(every, 50) * 1e3,
                "p99_ms": percentile(every, 99) * 1e3,
                "p999_ms": percentile(every, 99.9) * 1e3,
                "max_ms": max(every) * 1e3,
                "samples": len(every),
                "rate": median([x["rate"] for x in runs]),
                "brokers_cores": median([x["brokers_cores"] for x in runs]),
                "steal_s": sum(x["steal_s"] for x in runs),
            }

        # 2b. One request at a time on one connection: the chain's round trip.
        results["serial"] = {}
        for name, rf, acks in SERIAL_CASES if args.serial else []:
            runs = []
            for i in range(2):
                topic = f"serial-{name}-{i}"
                create_topic(admin, topic, [leader, *followers][:rf])
                runs.append(produce_serial(bootstrap, topic, acks, args.serial, pids, leader))
                delete_topic(admin, topic)
            res = {**min(runs, key=lambda x: x["p50_ms"]), "runs": runs}
            results["serial"][name] = res
            log(
                f"serial {LABELS[name]:<20} {args.serial} one-record requests one at a time: "
                + "; ".join(
                    f"{x['requests_per_s']:,.0f}/s p50 {x['p50_ms']:.3f} ms p99 "
                    f"{x['p99_ms']:.2f} ms, brokers {x['brokers_cpu_ms_per_request']:.3f} "
                    f"ms CPU each (leader {x['leader_cpu_ms_per_request']:.3f})"
                    for x in runs
                )
            )

        # 3. Optional: where an RF 3 acks=all produce spends the brokers' time.
        if args.profile:
            log("profiling one more RF 3 acks=all case with py-spy (leader and one follower)")
            try:
                results["profile"] = profile_rf3(
                    args,
                    bootstrap,
                    admin,
                    leader,
                    followers,
                    pids,
                    Path(args.profile_dir or workdir),
                )
            except Exception:
                results["profile"] = {"error": traceback.format_exc()}
    finally:
        pump.close()
        if single is not None:
            single.stop()
        if c is not None:
            c.__exit__(None, None, None)
        if net is not None:
            net.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    results["loadavg_end"] = os.getloadavg()
    summarize(results)
    return results


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="500,000 messages per case, 1 round, 4 s of latency per case",
    )
    p.add_argument(
        "--messages",
        type=int,
        default=None,
        help="100 B messages per produce case (default 1,000,000; --quick 500,000)",
    )
    p.add_argument(
        "--rounds", type=int, default=None, help="throughput rounds (default 4; --quick 1)"
    )
    p.add_argument(
        "--case-seconds",
        type=float,
        default=None,
        help="a produce case stops producing after this (default 30; --quick 10)",
    )
    p.add_argument(
        "--latency-seconds",
        type=float,
        default=None,
        help="seconds of paced producing per latency case (default 20; --quick 4)",
    )
    p.add_argument("--rate", type=int, default=LATENCY_RATE)
    p.add_argument(
        "--serial",
        type=int,
        default=2000,
        help="one-record requests sent one at a time per serial run (0: none; two runs a case)",
    )
    p.add_argument("--linger-ms", type=int, default=20)
    p.add_argument(
        "--via-proxies",
        action="store_true",
        help="clients and followers through the harness's proxies",
    )
    p.add_argument("--no-single", action="store_true", help="skip the single-broker reference case")
    p.add_argument(
        "--netns",
        action="store_true",
        help="each broker in its own network namespace, joined by veth pairs and a bridge "
        "(root and `ip`; created and removed by the bench); the client and ZooKeeper stay on "
        "the host",
    )
    p.add_argument(
        "--kb-messages",
        type=int,
        default=None,
        help="1 KB messages per 1 KB produce case, RF 1 acks=1 and RF 3 acks=all each round "
        "(default --messages / 10, the same bytes as a 100 B case; 0: none)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="after the cases, py-spy the leader and a follower during one more RF 3 acks=all case",
    )
    p.add_argument(
        "--profile-dir",
        help="keep py-spy's output here (default: the data dir, removed unless --keep)",
    )
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--workdir", default=os.environ.get("LOGSTORE_BENCH_DIR"))
    p.add_argument("--keep", action="store_true", help="keep the data directories")
    args = p.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    args.messages = args.messages or (500_000 if args.quick else 1_000_000)
    args.rounds = args.rounds or (1 if args.quick else 4)
    if args.kb_messages is None:
        args.kb_messages = args.messages // 10
    if args.netns and args.via_proxies:
        p.error("--netns and --via-proxies exclude each other")
    args.case_seconds = args.case_seconds or (10.0 if args.quick else 30.0)
    args.latency_seconds = args.latency_seconds or (4.0 if args.quick else 20.0)
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.profile_dir:
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    try:
        results = run(args)
    except Exception:
        traceback.print_exc()
        return 1
    results["rate"] = args.rate
    results["elapsed_s"] = time.perf_counter() - t
    print_report(results)
    print(f"whole run {results['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
