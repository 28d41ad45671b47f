"""Runs bench selections on an earlier revision and on this tree, alternating, and
prints new/old ratios of the medians (what a change must show: ratio >= 0.95).

    python benches/compare_revisions.py BASE_REV [--iterations 3]

BASE_REV is checked out with ``git worktree`` into a temporary directory; its broker
runs from there, with the storage engine of the current install (the engine's Python
surface must be the same in both). Each iteration runs old then new, and the next one
new then old, so neither side always follows the other (the page cache and the host's
state favour whichever runs second). The benches are the end-to-end produce and
consume cases of 100 B messages, one-record Produce requests over a raw connection,
and the fetch-session bench. Figures are parsed from each run's summary table.

    python benches/compare_revisions.py BASE_REV --cpu [--iterations 5] [--messages N]

``--cpu`` measures instead the broker's CPU per message (user + system seconds of the
broker process, from its threads' ``/proc`` schedstat, per million messages): for each
side a single broker (no ZooKeeper) started from that side's tree (``broker_py`` and
``logstore`` both, the base's worktree with this install's engine ``.so`` linked in), a
one-partition topic per size, and four cases: produce (confluent-kafka ``produce_batch``,
acks=1) and consume (from offset 0, 500 per ``consume()``) of 100 B records
(``--messages``, default 1,000,000) and of 1 KB records (a quarter as many). The client
runs in this process, from this tree's bench helpers, on both sides. A consume case's
span starts after the consumer has connected and learnt the partition's offsets; the
offsets topic is created before any span. The table gives medians and new/old ratios of
the CPU per message (below 1 is cheaper) with the load average beside each run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpu_meter import proc_cpu
from e2e_helpers import BrokerProc, ThroughputProducer, consume, create_topic, end_offsets

REPO = Path(__file__).resolve().parent.parent
RUNS = [
    (
        "benches/test_end_to_end.py",
        "(test_produce and 100- and produce_batch) or (test_consume and 100- and on-500) or "
        "test_produce_request_rate",
    ),
    ("benches/test_fetch_sessions.py", None),
]
ROW_PATTERNS = [
    (
        re.compile(
            r"\s+(100 B, \d part(?:, acks=\w+)?)"
            r"\s+(produce_batch|consume 500/call, client gc on)\s+([\d,]+)"
        ),
        lambda m: {f"{m[1]} {m[2]} msg/s": float(m[3].replace(",", ""))},
    ),
    (
        re.compile(
            r"\s+1024 B, 1 record/request\s+raw produce\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)"
        ),
        lambda m: {
            f"raw produce, {float(m[1]):.0f} in flight, req/s": float(m[2].replace(",", "")),
            f"raw produce, {float(m[1]):.0f} in flight, broker CPU us/req": float(m[3])
            + float(m[4]),
        },
    ),
    (
        re.compile(
            r"\s+500 partitions\s+(sessionless|incremental)"
            r"\s+[\d.,]+\s+[\d.,]+\s+([\d.,]+)\s+([\d.,]+)"
        ),
        lambda m: {
            f"fetch {m[1]}, broker CPU us/fetch": float(m[2].replace(",", "")),
            f"fetch {m[1]}, us/fetch": float(m[3].replace(",", "")),
        },
    ),
]


def run(tree: Path, bench: str, select: str | None) -> dict[str, float]:
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        bench,
        "--benchmark-only",
        "-s",
    ]
    if select:
        args += ["-k", select]
    out = subprocess.run(args, cwd=tree, capture_output=True, text=True, timeout=1800).stdout
    found: dict[str, float] = {}
    for line in out.splitlines():
        for pattern, parse in ROW_PATTERNS:
            m = pattern.match(line)
            if m:
                found.update(parse(m))
    return found


def threads_cpu_ns(pid: int) -> dict[int, int]:
    """Nanoseconds on a CPU (user + system) of each live thread of a process: the first
    field of ``/proc/<pid>/task/<tid>/schedstat``."""
    out: dict[int, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, IndexError, ValueError):  # the thread ended meanwhile
            continue
    return out


class BrokerCpu:
    """A process's CPU seconds over a span, to the nanosecond from its threads' schedstat
    (``/proc/<pid>/stat`` counts in 10 ms ticks); if a thread alive at the start has ended
    by the end, its time is lost there, and the span falls back to ``/proc/<pid>/stat``.
    ``wait()`` starts the span: ``consume`` calls it as its ``go`` event once the consumer
    has connected, right before it assigns."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def wait(self) -> None:
        self.threads = threads_cpu_ns(self.pid)
        self.ticks = proc_cpu(self.pid)

    def seconds(self) -> float:
        now = threads_cpu_ns(self.pid)
        if self.threads.keys() - now.keys():
            return proc_cpu(self.pid) - self.ticks
        return sum(ns - self.threads.get(tid, 0) for tid, ns in now.items()) / 1e9


def cpu_per_message(tree: Path, messages: int) -> dict[str, float]:
    """One broker from ``tree``; the broker's CPU seconds per million messages for each
    case, and the load average (1 min) at the start and end of the run."""
    found: dict[str, float] = {"load average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="logstore-cpu-") as tmp:
        broker = BrokerProc(Path(tmp), tree=tree)
        broker.start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            for size, count in ((100, messages), (1024, messages // 4)):
                topic = f"cpu-{size}"
                create_topic(broker.bootstrap, topic, 1)
                producer = ThroughputProducer(broker.bootstrap, "1")
                producer.warm_up(topic)
                # A first consumer with a group id makes the broker create the offsets
                # topic (FindCoordinator); that must not fall in a measured span.
                consume(broker.bootstrap, topic, 1, 1)
                settle(pid)
                payload = os.urandom(size)
                meter = BrokerCpu(pid)
                meter.wait()
                producer.run(topic, payload, count, 1, "produce_batch")
                found[f"{_label(size)} produce"] = meter.seconds() / count * 1e6
                del producer
                assert end_offsets(broker.bootstrap, topic, 1) == [count + 1]
                os.sync()  # the write-back must not share the CPUs with the read
                meter = BrokerCpu(pid)
                consume(broker.bootstrap, topic, 1, count + 1, go=meter)
                found[f"{_label(size)} consume"] = meter.seconds() / (count + 1) * 1e6
        finally:
            broker.stop()
    found["load average, end"] = os.getloadavg()[0]
    return found


def settle(pid: int, timeout: float = 15.0) -> None:
    """Waits (at most ``timeout`` s) until the broker spends under 2% of a CPU over 0.5 s:
    creating and loading the offsets topic's partitions must not fall in a span."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meter = BrokerCpu(pid)
        meter.wait()
        time.sleep(0.5)
        if meter.seconds() < 0.01:
            return


def _label(size: int) -> str:
    return "1 KB" if size == 1024 else f"{size} B"


def linked_engine(base: Path) -> None:
    """Links this install's engine into the base worktree's ``logstore`` package."""
    import logstore._native as native

    so = Path(native.__file__)
    (base / "python" / "logstore" / so.name).symlink_to(so)


def print_cpu_table(figures: dict[str, dict[str, list[float]]]) -> None:
    print(
        "| broker CPU s per M messages | runs | old: median (range) | new: median (range) "
        "| new/old | new/old per iteration: median (range) |"
    )
    print("|---|---|---|---|---|---|")
    for key, old in figures["old"].items():
        new = figures["new"].get(key)
        if not new or key.startswith("load"):
            continue
        ratio = statistics.median(new) / statistics.median(old)
        # each iteration ran both sides one right after the other
        paired = [n / o for n, o in zip(new, old)]
        print(
            f"| {key} | {len(old)} | {statistics.median(old):.3f} "
            f"({min(old):.3f}-{max(old):.3f}) | "
            f"{statistics.median(new):.3f} ({min(new):.3f}-{max(new):.3f}) | {ratio:.2f} | "
            f"{statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f}) |"
        )
    for side in ("old", "new"):
        loads = zip(figures[side]["load average"], figures[side]["load average, end"])
        print(
            f"load average (start-end) per {side} run: "
            + ", ".join(f"{a:.1f}-{b:.1f}" for a, b in loads)
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--cpu", action="store_true", help="the broker's CPU per message")
    p.add_argument("--messages", type=int, default=1_000_000, help="100 B messages (--cpu)")
    args = p.parse_args()
    figures: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory(prefix="logstore-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        try:
            if args.cpu:
                linked_engine(base)
            for i in range(args.iterations):
                order = [("old", base), ("new", REPO)]
                for side, tree in order if i % 2 == 0 else reversed(order):
                    if args.cpu:
                        for key, value in cpu_per_message(tree, args.messages).items():
                            figures[side].setdefault(key, []).append(value)
                        print(f"{side}: {figures[side]}", file=sys.stderr)
                        continue
                    for bench, select in RUNS:
                        for key, value in run(tree, bench, select).items():
                            figures[side].setdefault(key, []).append(value)
                print(f"iteration {i + 1} of {args.iterations} done", file=sys.stderr)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False
            )
    if args.cpu:
        print_cpu_table(figures)
        return 0
    print("| case | runs | old: median (range) | new: median (range) | new/old |")
    print("|---|---|---|---|---|")
    for key, old in figures["old"].items():
        new = figures["new"].get(key)
        if not new:
            continue
        ratio = statistics.median(new) / statistics.median(old)
        if " us/" in key:  # lower is better: report speed
            ratio = 1 / ratio
        print(
            f"| {key} | {len(old)} | {statistics.median(old):,.0f} "
            f"({min(old):,.0f}-{max(old):,.0f}) | "
            f"{statistics.median(new):,.0f} ({min(new):,.0f}-{max(new):,.0f}) | {ratio:.2f} |"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LOGSTORE_E2E_RAW_REQUESTS", "20000")
    sys.exit(main())
