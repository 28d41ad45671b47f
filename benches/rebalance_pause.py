"""Rebalance pause bench (issue 34): how long partitions go unconsumed when a consumer
group rebalances, on the classic protocol (eager ``range``, ``cooperative-sticky``) and
on KIP-848's consumer protocol (server assignor ``uniform``).

    python benches/rebalance_pause.py [--protocols classic-range,classic-coop,consumer]
        [--scenarios join,kill] [--runs 3] [--rate 2000] [--session-ms 10000]
        [--json out.json] [--keep]

Each run starts a fresh broker (``python -m broker_py``, loopback) and a 24-partition
topic. A producer process sends ``--rate`` records per second, round-robin over the
partitions, each record's value its produce time (``CLOCK_MONOTONIC``, which every
process on the host shares). Six member processes (confluent-kafka, one consumer each,
so a SIGKILL is real) join one group and log every record they receive as
``M partition offset receive_time produce_time``, and their assignment callbacks as
``A|R|L time partitions``. Once the group is steady (every partition delivered in the
last 1.5 s, no assignment change for 5 s), the event:

- ``join``: a seventh member starts; the event time is when it calls ``subscribe``;
- ``kill``: member 0 gets SIGKILL; its partitions move once its session expires.

Deliveries are then recorded for ``--window`` seconds (plus the session timeout for
``kill``), and the logs are read:

- per partition, the longest time without a record delivered to any member, over
  [event - 5 s, end] (the end counts as a delivery, so a partition never consumed
  again shows its whole wait); reported as the maximum over all partitions, over the
  partitions whose owner did not change and over those that moved (owner = the member
  that delivered its last record before the event, and before the end);
- the time from the event until every partition is consumed again: the end of the
  last gap over 1 s that ends after the event, the latest over partitions (0 if none
  paused); for ``kill`` also when the broker expired the killed member's session (its
  log line, ``on heartbeat expiration`` or ``removed (session timeout)``, taken onto
  the monotonic clock through a wall-clock reading at the event) and the time from
  that expiry until every partition is consumed again;
- the longest gap in the 5 s before the event (the steady jitter), and the records
  delivered more than once (what a moved partition's new owner reads again from the
  last commit).

Settings: Kafka's ``group.initial.rebalance.delay.ms`` (3 s); classic members with
``session.timeout.ms=--session-ms`` and librdkafka's default ``heartbeat.interval.ms``
(3 s); consumer-protocol members get the broker's ``group.consumer.session.timeout.ms``
(set to ``--session-ms``, its minimum lowered to allow it) and
``group.consumer.heartbeat.interval.ms`` (Kafka's default 5 s). Every member auto-commits
(librdkafka's 5 s interval) and starts from the earliest offset.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import BrokerProc, create_topic  # noqa: E402

PARTITIONS = 24
MEMBERS = 6
BASELINE_S = 5.0
PAUSE_S = 1.0
PROTOCOLS = {
    "classic-range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic-coop": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "consumer": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
}
HEARTBEAT_S = {"classic-range": 3.0, "classic-coop": 3.0, "consumer": 5.0}


# ---------------------------------------------------------------------------
# the producer and member processes
# ---------------------------------------------------------------------------


def run_producer(bootstrap: str, topic: str, rate: int) -> None:
    from confluent_kafka import Producer

    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    tick = 0.01
    per_tick = max(1, round(rate * tick))
    i = 0
    next_t = time.monotonic()
    while not stop:
        for _ in range(per_tick):
            value = f"{time.monotonic():.6f}".encode()
            while True:
                try:
                    p.produce(topic, value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
            i += 1
        p.poll(0)
        next_t += tick
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_t = time.monotonic()
    p.flush(10)


def run_member(
    bootstrap: str, group: str, topic: str, protocol: str, session_ms: int, log_path: str
) -> None:
    from confluent_kafka import Consumer

    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    log = open(log_path, "w")

    def callback(kind: str):
        def cb(consumer: object, partitions: list) -> None:
            parts = ",".join(str(tp.partition) for tp in partitions)
            log.write(f"{kind} {time.monotonic():.6f} {parts}\n")
            log.flush()

        return cb

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        **PROTOCOLS[protocol],
    }
    if protocol != "consumer":
        conf["session.timeout.ms"] = session_ms
    c = Consumer(conf)
    log.write(f"S {time.monotonic():.6f}\n")
    log.flush()
    c.subscribe([topic], on_assign=callback("A"), on_revoke=callback("R"), on_lost=callback("L"))
    while not stop:
        msgs = c.consume(500, 0.1)
        if not msgs:
            continue
        now = time.monotonic()
        lines = []
        for m in msgs:
            if m.error() is None:
                lines.append(f"M {m.partition()} {m.offset()} {now:.6f} {m.value().decode()}\n")
        log.write("".join(lines))
        log.flush()
    c.close()
    log.write(f"C {time.monotonic():.6f}\n")
    log.close()


# ---------------------------------------------------------------------------
# reading the logs
# ---------------------------------------------------------------------------


@dataclass
class MemberLog:
    """What one member's log says; ``read_more`` parses what was appended since."""

    path: Path
    pos: int = 0
    subscribed_at: float | None = None
    last_change: float = 0.0
    deliveries: list[tuple[int, int, float, float]] = field(default_factory=list)

    def read_more(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.pos += end
        for line in data[:end].decode().splitlines():
            kind, *rest = line.split()
            if kind == "M":
                p, off, recv, prod = rest
                self.deliveries.append((int(p), int(off), float(recv), float(prod)))
            elif kind == "S":
                self.subscribed_at = float(rest[0])
            elif kind in "ARL":
                self.last_change = max(self.last_change, float(rest[0]))


@dataclass
class RunResult:
    protocol: str
    scenario: str
    run: int
    max_gap_s: float
    max_gap_unmoved_s: float | None
    max_gap_moved_s: float | None
    moved: int
    all_consumed_again_s: float | None
    expiry_s: float | None
    after_expiry_s: float | None
    baseline_gap_s: float
    max_latency_s: float
    redelivered: int
    not_consumed_again: list[int]


def analyse(
    logs: list[MemberLog],
    protocol: str,
    scenario: str,
    run: int,
    event: float,
    end: float,
    expiry: float | None,
) -> RunResult:
    start = event - BASELINE_S
    times: dict[int, list[tuple[float, int]]] = {p: [] for p in range(PARTITIONS)}
    seen: set[tuple[int, int]] = set()
    redelivered = 0
    max_latency = 0.0
    for m, log in enumerate(logs):
        for p, off, recv, prod in log.deliveries:
            if (p, off) in seen:
                redelivered += 1
            seen.add((p, off))
            if start <= recv <= end:
                times[p].append((recv, m))
                max_latency = max(max_latency, recv - prod)
    gaps: dict[int, float] = {}
    baseline = 0.0
    recovered: dict[int, float] = {}
    moved: set[int] = set()
    never: list[int] = []
    for p, ts in times.items():
        ts.sort()
        before = [m for t, m in ts if t < event]
        owner_before = before[-1] if before else None
        owner_after = ts[-1][1] if ts and ts[-1][0] >= event else None
        if owner_before != owner_after:
            moved.add(p)
        points = [start] + [t for t, _ in ts] + [end]
        gap = 0.0
        for a, b in zip(points, points[1:]):
            gap = max(gap, b - a)
            if b <= event:
                baseline = max(baseline, b - a)
            if b - a > PAUSE_S and b > event:
                recovered[p] = b - event
        gaps[p] = gap
        if points[-2] < event or end - points[-2] > PAUSE_S:
            never.append(p)
    unmoved = [gaps[p] for p in gaps if p not in moved]
    moved_gaps = [gaps[p] for p in moved]
    all_again = None if never else max(recovered.values(), default=0.0)
    return RunResult(
        protocol=protocol,
        scenario=scenario,
        run=run,
        max_gap_s=max(gaps.values()),
        max_gap_unmoved_s=max(unmoved) if unmoved else None,
        max_gap_moved_s=max(moved_gaps) if moved_gaps else None,
        moved=len(moved),
        all_consumed_again_s=all_again,
        expiry_s=None if expiry is None else expiry - event,
        after_expiry_s=(
            None if expiry is None or all_again is None else all_again - (expiry - event)
        ),
        baseline_gap_s=baseline,
        max_latency_s=max_latency,
        redelivered=redelivered,
        not_consumed_again=never,
    )


# ---------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------


EXPIRY = re.compile(
    rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*"
    rb"(?:on heartbeat expiration|removed \(session timeout\))",
    re.M,
)


def session_expiry(broker_log: Path, event_wall: float, event: float) -> float | None:
    """The first session expiry the broker logged after the event, on the monotonic
    clock (the log's wall-clock milliseconds shifted by the event's two readings)."""
    for m in EXPIRY.finditer(broker_log.read_bytes()):
        wall = datetime.datetime.strptime(m[1].decode(), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if wall >= event_wall:
            return event + (wall - event_wall)
    return None


def spawn(role: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, role, *args])


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


def one_run(
    args: argparse.Namespace, protocol: str, scenario: str, run: int, workdir: Path
) -> RunResult:
    broker = BrokerProc(
        workdir,
        {
            "group.initial.rebalance.delay.ms": "3000",
            "group.consumer.min.session.timeout.ms": str(min(args.session_ms, 45000)),
            "group.consumer.session.timeout.ms": str(args.session_ms),
        },
    )
    broker.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        topic, group = "pause", f"pause-{protocol}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        procs.append(spawn("produce", broker.bootstrap, topic, str(args.rate)))
        logs: list[MemberLog] = []

        def add_member() -> None:
            path = workdir / f"member-{len(logs)}.log"
            logs.append(MemberLog(path))
            procs.append(
                spawn(
                    "member",
                    broker.bootstrap,
                    group,
                    topic,
                    protocol,
                    str(args.session_ms),
                    str(path),
                )
            )

        for _ in range(MEMBERS):
            add_member()
        members = procs[1:]
        deadline = time.monotonic() + args.settle_timeout
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError("the group did not settle: " + broker.log_text()[-3000:])
            last: dict[int, float] = {}
            for log in logs:
                log.read_more()
                for p, _, recv, _ in log.deliveries[-2000:]:
                    last[p] = max(last.get(p, 0.0), recv)
            changes = max(log.last_change for log in logs)
            if (
                len(last) == PARTITIONS
                and min(last.values()) > now - 1.5
                and 0 < changes < now - 5.0
            ):
                break
        time.sleep(BASELINE_S)
        if scenario == "join":
            add_member()
            event = time.monotonic()
        else:
            event_wall, event = time.time(), time.monotonic()
            members[0].kill()
            members[0].wait()
        session_s = args.session_ms / 1000
        time.sleep(args.window + (session_s if scenario == "kill" else 0.0))
        end = time.monotonic()
        for log in logs:
            log.read_more()
        expiry = None
        if scenario == "join" and logs[-1].subscribed_at is not None:
            event = logs[-1].subscribed_at
        elif scenario == "kill":
            expiry = session_expiry(broker.log_path, event_wall, event)
        return analyse(logs, protocol, scenario, run, event, end, expiry)
    finally:
        stop_all(procs)
        broker.stop()


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_table(results: list[RunResult]) -> None:
    head = (
        "protocol",
        "event",
        "run",
        "max gap",
        "unmoved",
        "moved",
        "#moved",
        "all again",
        "expiry",
        "after expiry",
        "steady gap",
        "max lat",
        "again rd",
    )
    rows = [
        (
            r.protocol,
            r.scenario,
            str(r.run),
            fmt(r.max_gap_s),
            fmt(r.max_gap_unmoved_s),
            fmt(r.max_gap_moved_s),
            str(r.moved),
            fmt(r.all_consumed_again_s)
            if not r.not_consumed_again
            else f"never: {r.not_consumed_again}",
            fmt(r.expiry_s),
            fmt(r.after_expiry_s),
            fmt(r.baseline_gap_s),
            fmt(r.max_latency_s),
            str(r.redelivered),
        )
        for r in results
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        print("  ".join(x.rjust(w) for x, w in zip(row, widths)))
    print("\nmedians over runs (seconds):")
    cells: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        cells.setdefault((r.protocol, r.scenario), []).append(r)
    for (protocol, scenario), rs in cells.items():

        def med(vals: list[float | None]) -> str:
            xs = [v for v in vals if v is not None]
            return fmt(statistics.median(xs)) if xs else "-"

        print(
            f"  {protocol:13} {scenario:4}  max gap {med([r.max_gap_s for r in rs])}"
            f"  unmoved {med([r.max_gap_unmoved_s for r in rs])}"
            f"  moved {med([r.max_gap_moved_s for r in rs])}"
            f"  all again {med([r.all_consumed_again_s for r in rs])}"
            f"  (heartbeat {HEARTBEAT_S[protocol]:.0f} s)"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "produce":
        run_producer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "member":
        b, g, t, proto, session_ms, log_path = sys.argv[2:8]
        run_member(b, g, t, proto, int(session_ms), log_path)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--scenarios", default="join,kill")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000, help="records per second")
    ap.add_argument("--session-ms", type=int, default=10000)
    ap.add_argument("--window", type=float, default=30.0, help="seconds after the event")
    ap.add_argument("--settle-timeout", type=float, default=120.0)
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--keep", action="store_true", help="keep the logs and broker data")
    args = ap.parse_args()
    protocols = args.protocols.split(",")
    scenarios = args.scenarios.split(",")
    for name in protocols:
        if name not in PROTOCOLS:
            ap.error(f"unknown protocol {name}; known: {', '.join(PROTOCOLS)}")
    base = Path(
        tempfile.mkdtemp(prefix="rebalance-pause-", dir=os.environ.get("LOGSTORE_BENCH_DIR"))
    )
    results: list[RunResult] = []
    try:
        # runs interleaved (every cell once, then again) so drift on the host spreads
        for run in range(1, args.runs + 1):
            for scenario in scenarios:
                for protocol in protocols:
                    workdir = base / f"{protocol}-{scenario}-{run}"
                    try:
                        r = one_run(args, protocol, scenario, run, workdir)
                    except Exception as e:
                        print(f"{protocol} {scenario} run {run} failed: {e}", flush=True)
                        continue
                    results.append(r)
                    print(json.dumps(asdict(r)), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"logs kept in {base}")
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
