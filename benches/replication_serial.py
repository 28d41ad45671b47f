"""One-record requests one at a time on a fresh three-broker cluster: the leader's and the
followers' CPU per request, and, with ``--cprofile``, the leader's Python calls per request.

    python benches/replication_serial.py [--requests 2000] [--runs 1] [--cprofile leader.prof]

Per run: three brokers and ZooKeeper (``tests/cluster/harness``, the brokers' own
listeners, as ``replication_bench.py`` starts them); a topic at RF 1 on broker 1 and
one at RF 3 led by broker 1; 200 warm-up requests, then ``--requests`` one-record 1 KB
requests with acks=1 (RF 1) and acks=all (RF 3), each sent once the one before was
acknowledged (``replication_bench.produce_serial``). Prints one JSON line per run:
requests/s, p50, and the brokers' (leader's, followers') user + system CPU per request
from ``/proc``, with the load average at the start and end.

``--cprofile PATH`` runs broker 1 under cProfile, on its event-loop thread, for the RF 3
requests only (started and stopped by SIGUSR1 and SIGUSR2 around them), and prints the
calls per request and the counts of a few event-loop and replication functions (event
loop turns, callbacks, timers set, tasks created, follower reads, sends).

To compare two revisions, run it from a ``git worktree`` of each with
``PYTHONPATH=<tree>/python:<tree>`` (the engine's ``.so`` copied in), alternating.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import runpy
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNTED = {
    "event-loop turns": "base_events.py:_run_once",
    "callbacks": "events.py:_run",
    "timers set": "base_events.py:call_at",
    "timer-heap comparisons": "events.py:__lt__",
    "tasks created": "base_events.py:create_task",
    "follower reads": "local_log_read.py:_read_for_follower",
    "socket sends": "~:<method 'send' of '_socket.socket' objects>",
}


def wrapped_broker() -> None:
    """``replication_serial.py --wrap OUT -m broker_py ARGS``: the broker, with SIGUSR1
    starting cProfile on the main thread and SIGUSR2 stopping it and writing OUT."""
    out = sys.argv[2]
    prof = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *_: prof.enable())

    def stop(*_: object) -> None:
        prof.disable()
        prof.dump_stats(out)

    signal.signal(signal.SIGUSR2, stop)
    # argv: this file, --wrap, OUT, the broker's python, -m, broker_py, its arguments
    assert sys.argv[4:6] == ["-m", "broker_py"], sys.argv
    sys.argv = ["broker_py", *sys.argv[6:]]
    runpy.run_module("broker_py", run_name="__main__", alter_sys=True)


def counts(path: str, requests: int) -> dict:
    stats = pstats.Stats(path)
    per: dict[str, float] = {}
    for (file, _, fn), (_, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{Path(file).name}:{fn}"
        per[key] = per.get(key, 0) + calls / requests
    out = {"python calls": stats.total_calls / requests}  # type: ignore[attr-defined]
    out.update({name: per.get(key, 0.0) for name, key in COUNTED.items()})
    return {k: round(v, 2) for k, v in out.items()}


def run(requests: int, profile: str | None) -> dict:
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    import replication_bench as rb

    from tests.cluster.harness import cluster as harness

    if profile:
        enter = harness.Cluster.__enter__

        def profiled(self):  # broker 1 under the wrapper (sys.executable is the prefix's)
            self.brokers[0].command_prefix = [sys.executable, __file__, "--wrap", profile]
            return enter(self)

        harness.Cluster.__enter__ = profiled
    workdir = Path(tempfile.mkdtemp(prefix="replication-serial-"))
    out: dict = {"load": os.getloadavg()[0], "time": time.strftime("%H:%M:%S")}
    c, admin, bootstrap = rb.start_cluster(workdir, False)
    try:
        pids = {b.id: b.pid for b in c.brokers}
        for name, replicas, acks in (("rf1_acks1", [1], "1"), ("rf3_acksall", [1, 2, 3], "all")):
            rb.create_topic(admin, name, replicas)
            rb.produce_serial(bootstrap, name, acks, 200, pids, 1)
            if profile and replicas != [1]:
                os.kill(pids[1], signal.SIGUSR1)
            r = rb.produce_serial(bootstrap, name, acks, requests, pids, 1)
            if profile and replicas != [1]:
                os.kill(pids[1], signal.SIGUSR2)
                time.sleep(1.0)
            out[name] = {k: round(v, 4) for k, v in r.items() if isinstance(v, float)}
    finally:
        c.__exit__(None, None, None)
        shutil.rmtree(workdir, ignore_errors=True)
    out["load_end"] = os.getloadavg()[0]
    if profile:
        out["leader_per_request"] = counts(profile, requests)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--wrap":
        wrapped_broker()
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--cprofile", help="profile the leader's RF 3 requests into this file")
    args = p.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run(args.requests, args.cprofile)), flush=True)


if __name__ == "__main__":
    main()
