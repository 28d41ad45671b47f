"""Startup time of one broker holding many partitions (issue 37, goal 5).

    python benches/partition_startup_bench.py [--partitions 20000] [--per-topic 1000]
        [--workdir /tmp/pstart] [--py-spy out.svg] [--py-spy-create out.svg]
        [--py-spy-clean out.svg] [--py-spy-native] [--recovery-threads 1] [--keep]
        [--tree CHECKOUT]

Creates ``--partitions`` partitions in topics of ``--per-topic`` through CreateTopics
(one AdminClient request per topic, timed together as "create"), writes one record to
each partition, stops the broker cleanly ("clean shutdown", timed from SIGTERM until
the process is gone) and times a start until "listening on" ("clean start"), then
SIGKILLs it and times the next start ("start after SIGKILL"), and last times the clean
shutdown of that broker. ``--tree`` runs the broker from another checkout (its
``python`` and root first on ``PYTHONPATH``, engine ``.so`` included), for a base
revision measured in the same minutes.
Prints the broker's CPU seconds (user + system; for "create" those of the creation only)
and the load average with each figure, and descriptors, RSS and memory maps after each
start. ``--py-spy`` records the
SIGKILL-restart broker with ``py-spy record -r 20`` into the given SVG
(``--py-spy-create`` the broker while it creates, ``--py-spy-clean`` the clean start;
``--py-spy-native`` adds native frames, which slows the broker several times over); a
name ending in ``.txt`` gets py-spy's collapsed stacks (``--format raw``) instead, for
a summary by function.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import BrokerProc  # noqa: E402


def _stats(pid: int) -> str:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    load = os.getloadavg()[0]
    return f"CPU {_cpu(pid):.1f} s, load {load:.1f}, fds {fds}, RSS {rss} MB, maps {maps}"


def _cpu(pid: int) -> float:
    """User + system CPU seconds of the process so far."""
    with open(f"/proc/{pid}/stat") as f:
        utime, stime = f.read().rsplit(")", 1)[1].split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def _create(bootstrap: str, topics: list[str], per_topic: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in topics:
        admin.create_topics([NewTopic(name, per_topic, 1)], request_timeout=600)[name].result(600)


def _write_one_each(bootstrap: str, topics: list[str], per_topic: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for name in topics:
        for i in range(per_topic):
            p.produce(name, b"x" * 100, partition=i)
            p.poll(0)
        p.flush(120)
    assert p.flush(120) == 0


def _timed_start(broker: BrokerProc) -> float:
    started = time.monotonic()
    broker.start(timeout=600)
    return time.monotonic() - started


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_stop(broker: BrokerProc) -> str:
    """Stops the broker with SIGTERM; its wall and CPU seconds from the signal on (the
    CPU from its rusage once reaped, less what /proc showed at the signal)."""
    assert broker.proc is not None
    before, cpu0 = _children_cpu(), _cpu(broker.proc.pid)
    started = time.monotonic()
    broker.stop(timeout=600)
    took = time.monotonic() - started
    broker.proc = None  # so that a py-spy waiting for the next start attaches to it
    cpu = _children_cpu() - before - cpu0
    return f"{took:.1f} s (CPU {cpu:.1f} s, load {os.getloadavg()[0]:.1f})"


NATIVE: list[str] = []  # ["--native"] with --py-spy-native


def _spy_on(broker: BrokerProc, out: str, spies: list[subprocess.Popen[bytes]]) -> None:
    """py-spy attached to the broker as soon as its process exists."""
    deadline = time.monotonic() + 60
    while broker.proc is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if broker.proc is not None:
        fmt = ["--format", "raw"] if out.endswith(".txt") else []
        cmd = ["py-spy", "record", "-r", "20", *NATIVE, *fmt, "-o", out]
        cmd += ["--pid", str(broker.proc.pid)]
        spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


def _stop_spies(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        spy.wait(120)
    spies.clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--per-topic", type=int, default=1_000)
    parser.add_argument("--workdir", default="/tmp/partition-startup-bench")
    parser.add_argument("--py-spy", default=None, help="SVG of the restart after SIGKILL")
    parser.add_argument("--py-spy-create", default=None, help="SVG of the creation")
    parser.add_argument("--py-spy-clean", default=None, help="SVG of the clean start")
    parser.add_argument("--py-spy-native", action="store_true")
    parser.add_argument("--recovery-threads", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="reuse the data of an earlier run")
    parser.add_argument("--tree", default=None, help="run the broker from this checkout")
    args = parser.parse_args()
    if args.py_spy_native:
        NATIVE.append("--native")
    workdir = Path(args.workdir)
    if workdir.exists() and not args.keep:
        shutil.rmtree(workdir)
    overrides = {"num.recovery.threads.per.data.dir": str(args.recovery_threads)}
    broker = BrokerProc(workdir, overrides, tree=Path(args.tree) if args.tree else None)
    topics = [f"t{i}" for i in range(args.partitions // args.per_topic)]
    spies: list[subprocess.Popen[bytes]] = []
    if not args.keep:
        broker.start(timeout=60)
        if args.py_spy_create:
            _spy_on(broker, args.py_spy_create, spies)
        assert broker.proc is not None
        t0, cpu0 = time.monotonic(), _cpu(broker.proc.pid)
        _create(broker.bootstrap, topics, args.per_topic)
        took, cpu = time.monotonic() - t0, _cpu(broker.proc.pid) - cpu0
        load = os.getloadavg()[0]
        print(
            f"create {args.partitions}: {took:.1f} s (CPU {cpu:.1f} s, load {load:.1f})", flush=True
        )
        _stop_spies(spies)
        _write_one_each(broker.bootstrap, topics, args.per_topic)
        print(f"clean shutdown after create: {_timed_stop(broker)}", flush=True)
    if args.py_spy_clean:
        threading.Thread(
            target=_spy_on, args=(broker, args.py_spy_clean, spies), daemon=True
        ).start()
    took = _timed_start(broker)
    _stop_spies(spies)
    assert broker.proc is not None
    print(f"clean start: {took:.1f} s ({_stats(broker.proc.pid)})", flush=True)
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait()
    broker.proc = None
    if args.py_spy:
        threading.Thread(target=_spy_on, args=(broker, args.py_spy, spies), daemon=True).start()
    took = _timed_start(broker)
    assert broker.proc is not None
    print(f"start after SIGKILL: {took:.1f} s ({_stats(broker.proc.pid)})", flush=True)
    _stop_spies(spies)
    print(f"clean shutdown after start: {_timed_stop(broker)}", flush=True)


if __name__ == "__main__":
    main()
