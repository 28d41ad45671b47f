"""Share group bench (issue 35): five ``ShareConsumer`` processes on a one-partition topic
against five classic consumer-group members on a five-partition topic, in the same run,
and the redelivery latency once a record's acquisition lock expires.

    python benches/share_group_bench.py [--runs 3] [--records 20000] [--size 200]
        [--lock-ms 5000] [--json out.json] [--keep]

One broker (``python -m broker_py``, loopback, ``group.share.enable=true``) serves every
run. Per run:

- ``throughput``: two new topics, ``share-N`` (one partition) and ``classic-N`` (five),
  each given ``--records`` records of ``--size`` bytes before any consumer starts. Five
  processes (confluent-kafka 2.16 ``ShareConsumer``, implicit acknowledgement, one group
  whose ``share.auto.offset.reset`` is ``earliest``) read ``share-N``; then five processes
  (classic ``Consumer``, one group, ``auto.offset.reset=earliest``; the broker's
  ``group.initial.rebalance.delay.ms`` is 3 s, so all five are in the first generation)
  read ``classic-N``. Each process reports its count and the ``CLOCK_MONOTONIC`` times of
  its first and last record; the rate is the records delivered over [first record of any
  member, last record of any member], so group joining before the first record does not
  count. Both sides stop once the deliveries reach ``--records``.
- ``lock``: a new one-partition topic with 10 records, and a share group whose
  ``share.record.lock.duration.ms`` (a group config) is ``--lock-ms``. A holder process
  (explicit acknowledgement) polls until it gets records, notes the receive time, and
  then neither acknowledges nor polls again (it stays a member, heartbeating). A second
  consumer starts at once and polls; each record it receives was redelivered. The latency
  is its receive time minus (the holder's receive time + the lock duration): how long
  after the lock ran out, as seen from the holder, the record reached the other consumer.
  The holder's receive time is a little after the broker took the lock, so the figure
  is an upper bound by that much. ``--lock-ms`` must exceed the second consumer's join
  time (about a second here) for the latency to be measured from lock expiry.
- ``kill``: as ``lock``, but the holder is SIGKILLed half the lock duration after the
  second consumer starts (time for it to join; the lock has not run out). Its
  connection closes, which ends its share session and releases its records at once (as
  Kafka's share session cache does on disconnect): the figure is the time from the kill
  to the redelivery, and shows that a crashed consumer's records need not wait for the lock.

The load average is sampled before and after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import REPO_ROOT, BrokerProc, create_topic  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))

CONSUMERS = 5
GROUP_CONFIG = 32  # IncrementalAlterConfigs resource type GROUP
LOCK_RECORDS = 10


# ---------------------------------------------------------------------------
# the consumer processes (this file run with a role)
# ---------------------------------------------------------------------------


def _stop_on_term() -> list[bool]:
    stopping = [False]

    def handler(signum: int, frame: object) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, handler)
    return stopping


def run_reader(kind: str, bootstrap: str, group: str, topic: str) -> None:
    """Reads until SIGTERM, printing ``count first last`` after every non-empty batch."""
    from confluent_kafka import Consumer, ShareConsumer

    stopping = _stop_on_term()
    if kind == "share":
        share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        share.subscribe([topic])

        def batch() -> list:  # type: ignore[type-arg]
            return list(share.poll(0.5))

        close = share.close
    else:
        classic = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "group.protocol": "classic",
            }
        )
        classic.subscribe([topic])

        def batch() -> list:  # type: ignore[type-arg]
            return classic.consume(500, 0.5)

        close = classic.close
    count, first, last = 0, 0.0, 0.0
    while not stopping[0]:
        got = sum(1 for m in batch() if m.error() is None)
        if got:
            now = time.monotonic()
            if not count:
                first = now
            count, last = count + got, now
            print(count, first, last, flush=True)
    close()


def run_holder(bootstrap: str, group: str, topic: str) -> None:
    """Polls until records come, prints ``time offsets``, then only waits (no ack)."""
    from confluent_kafka import ShareConsumer

    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([topic])
    while True:
        got = [m.offset() for m in c.poll(0.5) if m.error() is None]
        if got:
            print(time.monotonic(), *got, flush=True)
            break
    sys.stdin.read()


def run_taker(bootstrap: str, group: str, topic: str) -> None:
    """Prints ``time offset delivery_count`` for every record, until SIGTERM."""
    from confluent_kafka import ShareConsumer

    stopping = _stop_on_term()
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    while not stopping[0]:
        for m in c.poll(0.2):
            if m.error() is None:
                print(time.monotonic(), m.offset(), m.delivery_count(), flush=True)
    c.close()


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------


def spawn(role: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, __file__, role, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )


def stop_all(procs: list[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def set_group(bootstrap: str, group: str, lock_ms: int | None = None) -> None:
    from tests.integration.clients import incremental_alter_configs

    ops = [("share.auto.offset.reset", 0, "earliest")]
    if lock_ms is not None:
        ops.append(("share.record.lock.duration.ms", 0, str(lock_ms)))
    error, message = incremental_alter_configs(bootstrap, GROUP_CONFIG, group, *ops)
    if error:
        raise RuntimeError(f"group config {group}: error {error} {message}")


def produce(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "none"})
    value = b"x" * size
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(60):
        raise RuntimeError(f"{topic}: records left unsent")


@dataclass
class Side:
    kind: str
    records_s: float
    delivered: int
    per_member: list[int]
    span_s: float
    wall_s: float


class Lines:
    """Whole lines from the processes' stdout pipes, read unbuffered, waits bounded."""

    def __init__(self, procs: list[subprocess.Popen[bytes]]) -> None:
        self.sel = selectors.DefaultSelector()
        self.partial: dict[int, bytes] = {}
        for i, proc in enumerate(procs):
            assert proc.stdout is not None
            self.sel.register(proc.stdout.fileno(), selectors.EVENT_READ, i)
            self.partial[i] = b""

    def read(self, wait: float) -> list[tuple[int, list[str]]]:
        """(process index, the line's fields) for every line complete within ``wait``."""
        out = []
        for key, _ in self.sel.select(max(wait, 0.0)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                self.sel.unregister(key.fd)
                continue
            *lines, self.partial[key.data] = (self.partial[key.data] + chunk).split(b"\n")
            out += [(key.data, line.decode().split()) for line in lines]
        return out


def read_side(kind: str, bootstrap: str, topic: str, records: int, timeout: float) -> Side:
    group = f"{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        set_group(bootstrap, group)
    start = time.monotonic()
    procs = [spawn(kind, bootstrap, group, topic) for _ in range(CONSUMERS)]
    state: dict[int, tuple[int, float, float]] = {}
    lines = Lines(procs)
    try:
        deadline = start + timeout
        while sum(n for n, _, _ in state.values()) < records:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{kind}: {state} after {timeout} s")
            for i, (n, first, last) in lines.read(min(left, 1.0)):
                state[i] = (int(n), float(first), float(last))
        wall = time.monotonic() - start
    finally:
        stop_all(procs)
    first = min(f for _, f, _ in state.values())
    last = max(t for _, _, t in state.values())
    delivered = sum(n for n, _, _ in state.values())
    return Side(
        kind,
        delivered / (last - first),
        delivered,
        [state.get(i, (0, 0.0, 0.0))[0] for i in range(CONSUMERS)],
        last - first,
        wall,
    )


@dataclass
class Redelivery:
    scenario: str
    held: int
    redelivered: int
    first_s: float
    last_s: float


def redelivery(bootstrap: str, scenario: str, lock_ms: int) -> Redelivery:
    topic = f"lock-{uuid.uuid4().hex[:8]}"
    group = f"lock-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 1, LOCK_RECORDS, 100)
    set_group(bootstrap, group, lock_ms)
    holder = spawn("hold", bootstrap, group, topic)
    procs = [holder]
    try:
        deadline = time.monotonic() + 60
        reported: list[tuple[int, list[str]]] = []
        holder_lines = Lines([holder])
        while not reported:
            if time.monotonic() > deadline:
                raise RuntimeError("the holder acquired nothing in 60 s")
            reported = holder_lines.read(1.0)
        acquired_at, *offsets = reported[0][1]
        held = {int(o) for o in offsets}
        taker = spawn("take", bootstrap, group, topic)
        procs.append(taker)
        taker_lines = Lines([taker])
        if scenario == "kill":
            time.sleep(lock_ms / 2000)  # the taker joins; the lock still has half to run
            holder.kill()
            holder.wait()
            origin = time.monotonic()
        else:
            origin = float(acquired_at) + lock_ms / 1000
        got: dict[int, float] = {}
        deadline = time.monotonic() + lock_ms / 1000 + 60
        while not held <= set(got):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{scenario}: redelivered {sorted(got)} of {sorted(held)}")
            for _, (at, offset, count) in taker_lines.read(1.0):
                if int(offset) in held and int(count) >= 2:
                    got.setdefault(int(offset), float(at))
        times = [got[o] - origin for o in held]
        return Redelivery(scenario, len(held), len(got), min(times), max(times))
    finally:
        stop_all(procs)


@dataclass
class RunResult:
    run: int
    share: Side
    classic: Side
    ratio: float
    lock: Redelivery
    kill: Redelivery
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)


def one_run(args: argparse.Namespace, bootstrap: str, run: int) -> RunResult:
    load_before = list(os.getloadavg())
    suffix = uuid.uuid4().hex[:8]
    share_topic, classic_topic = f"share-{suffix}", f"classic-{suffix}"
    create_topic(bootstrap, share_topic, 1)
    create_topic(bootstrap, classic_topic, CONSUMERS)
    produce(bootstrap, share_topic, 1, args.records, args.size)
    produce(bootstrap, classic_topic, CONSUMERS, args.records, args.size)
    share = read_side("share", bootstrap, share_topic, args.records, args.timeout)
    classic = read_side("classic", bootstrap, classic_topic, args.records, args.timeout)
    lock = redelivery(bootstrap, "lock", args.lock_ms)
    kill = redelivery(bootstrap, "kill", args.lock_ms)
    return RunResult(
        run,
        share,
        classic,
        share.records_s / classic.records_s,
        lock,
        kill,
        load_before,
        list(os.getloadavg()),
    )


def print_table(results: list[RunResult]) -> None:
    print(
        "run | share rec/s | classic rec/s | share/classic | share per member"
        " | lock expiry -> redelivery first/last s | kill -> redelivery first/last s"
        " | load 1m before/after"
    )
    for r in results:
        print(
            f"{r.run} | {r.share.records_s:.0f} | {r.classic.records_s:.0f} | {r.ratio:.2f}"
            f" | {r.share.per_member} | {r.lock.first_s:.3f}/{r.lock.last_s:.3f}"
            f" | {r.kill.first_s:.3f}/{r.kill.last_s:.3f}"
            f" | {r.load_before[0]:.2f}/{r.load_after[0]:.2f}"
        )
    if len(results) > 1:
        ratios = [r.ratio for r in results]
        lock = [r.lock.last_s for r in results]
        print(
            f"median share/classic {statistics.median(ratios):.2f}"
            f" (min {min(ratios):.2f}, max {max(ratios):.2f});"
            f" median lock expiry -> last redelivery {statistics.median(lock):.3f} s"
        )


def main() -> None:
    roles = {"share": run_reader, "classic": run_reader}
    if len(sys.argv) > 1 and sys.argv[1] in roles:
        run_reader(sys.argv[1], *sys.argv[2:5])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "hold":
        run_holder(*sys.argv[2:5])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "take":
        run_taker(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--lock-ms", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="share-bench-"))
    broker = BrokerProc(
        workdir,
        {
            "group.share.enable": "true",
            "group.initial.rebalance.delay.ms": "3000",
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "1000",
            "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        },
    )
    broker.start()
    results: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            results.append(one_run(args, broker.bootstrap, run))
            print_table(results[-1:])
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
