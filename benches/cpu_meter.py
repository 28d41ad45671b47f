"""CPU accounting for the replication bench: each broker process's user + system seconds
(``/proc/<pid>/stat``), this process's, the VM's steal and the brokers' run-queue wait over a
span, and those figures per million messages."""

from __future__ import annotations

import os
import time

from e2e_helpers import run_queue_wait_seconds, steal_seconds

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """user + system CPU seconds of a process (every thread), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


class CpuMeter:
    """CPU of each broker process and of this process, and the VM's steal, over a span."""

    def __init__(self, pids: dict[int, int]) -> None:
        self.pids = pids

    def __enter__(self) -> CpuMeter:
        self.w0 = {i: run_queue_wait_seconds(pid) for i, pid in self.pids.items()}
        self.b0 = {i: proc_cpu(pid) for i, pid in self.pids.items()}
        self.c0 = self_cpu()
        self.s0 = steal_seconds()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.brokers = {i: proc_cpu(pid) - self.b0[i] for i, pid in self.pids.items()}
        self.waited = {i: run_queue_wait_seconds(pid) - self.w0[i] for i, pid in self.pids.items()}
        self.client = self_cpu() - self.c0
        self.steal = steal_seconds() - self.s0

    def per_million(self, messages: int, leader: int) -> dict:
        m = messages / 1e6
        followers = sum(v for i, v in self.brokers.items() if i != leader)
        return {
            "brokers_cpu_s": sum(self.brokers.values()),
            "brokers_s_per_M": sum(self.brokers.values()) / m,
            "leader_s_per_M": self.brokers.get(leader, 0.0) / m,
            "followers_s_per_M": followers / m,
            "client_s_per_M": self.client / m,
            "per_broker_cpu_s": dict(self.brokers),
            "steal_s": self.steal,
            "wall_s": self.wall,
            "brokers_cores": sum(self.brokers.values()) / self.wall if self.wall else float("nan"),
            # seconds the brokers' threads were runnable but waited for a CPU (schedstat)
            "brokers_cpu_wait_s": sum(self.waited.values()),
            "brokers_cpu_wait_share": sum(self.waited.values()) / self.wall / len(self.pids)
            if self.wall
            else float("nan"),
        }
