"""Seeded, bounded fault schedules (the "nemesis") and their execution on a Cluster.

:func:`schedule` is pure: the same arguments give the same list of :class:`Fault`.
Invariants of its result:

- faults are sorted by ``start`` and do not overlap: each fault ends (``start +
  duration``) at least ``quiet`` seconds before the next one starts, so the cluster
  recovers between faults;
- every fault ends by ``seconds`` (the run's length) and there are at most
  ``max_faults``;
- targets are drawn from ``nodes`` (``"zk"``, ``"b1"`` ..): process faults (``kill``,
  ``terminate``, ``pause``) name one node; ``partition`` splits the nodes in two
  non-empty sides (both ways); ``partition-one-way`` holds bytes from ``targets`` to
  ``others`` only; ``isolate`` cuts one broker from everything, clients included;
  ``delay`` slows every link of one node by ``ms``.

:class:`Nemesis` applies a schedule to a :class:`~tests.cluster.harness.cluster.Cluster`
in real time, undoing each fault when its duration is up (restart after a kill or
terminate, SIGCONT after a pause, heal after a partition or delay), and stops early when
asked; whatever happens it leaves every process running and the network healed.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("kill", "terminate", "pause", "partition", "partition-one-way", "isolate", "delay")
PROCESS_KINDS = ("kill", "terminate", "pause")


@dataclass(frozen=True)
class Fault:
    """``start`` and ``duration`` in seconds from the run's start."""

    start: float
    duration: float
    kind: str
    targets: tuple[str, ...]
    others: tuple[str, ...] = ()
    ms: float = 0.0

    @property
    def end(self) -> float:
        return self.start + self.duration

    def describe(self) -> str:
        what = f"{self.kind} {','.join(self.targets)}"
        if self.others:
            what += f" | {','.join(self.others)}"
        if self.ms:
            what += f" {self.ms:.0f}ms"
        return f"t={self.start:.1f}s +{self.duration:.1f}s: {what}"


def schedule(
    seed: int,
    seconds: float,
    nodes: Sequence[str],
    kinds: Sequence[str] = KINDS,
    max_faults: int = 1000,
    fault_seconds: tuple[float, float] = (1.0, 10.0),
    quiet: tuple[float, float] = (1.0, 5.0),
    delay_ms: tuple[float, float] = (20.0, 500.0),
) -> list[Fault]:
    """A random fault schedule for a run of ``seconds`` (see the module invariants)."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}")
    if not nodes or not kinds:
        return []
    brokers = [n for n in nodes if n != "zk"]
    rng = random.Random(seed)
    out: list[Fault] = []
    t = rng.uniform(*quiet)
    while len(out) < max_faults:
        kind = rng.choice(list(kinds))
        duration = rng.uniform(*fault_seconds)
        if t + duration > seconds:
            break
        fault = _fault(rng, kind, t, duration, list(nodes), brokers, delay_ms)
        if fault is not None:
            out.append(fault)
            t = fault.end + rng.uniform(*quiet)
        else:
            t += 0.1  # the kind does not fit these nodes: try another
    return out


def _fault(
    rng: random.Random,
    kind: str,
    t: float,
    duration: float,
    nodes: list[str],
    brokers: list[str],
    delay_ms: tuple[float, float],
) -> Fault | None:
    if kind in PROCESS_KINDS:
        return Fault(t, duration, kind, (rng.choice(nodes),))
    if kind == "isolate":
        return Fault(t, duration, kind, (rng.choice(brokers),)) if brokers else None
    if kind == "delay":
        return Fault(t, duration, kind, (rng.choice(nodes),), ms=round(rng.uniform(*delay_ms), 1))
    if len(nodes) < 2:
        return None
    shuffled = nodes[:]
    rng.shuffle(shuffled)
    cut = rng.randint(1, len(shuffled) - 1)
    a, b = tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:]))
    return Fault(t, duration, kind, a, b)


@dataclass
class Nemesis:
    """Applies faults to ``cluster`` (a Cluster) and logs what it did (``log``: lines
    ``"<seconds> <what>"``)."""

    cluster: Any
    log: list[str] = field(default_factory=list)
    _t0: float = 0.0

    def run(self, faults: Sequence[Fault], stop: threading.Event | None = None) -> None:
        """Runs ``faults`` on their schedule from now; returns after the last one is
        undone, or soon after ``stop`` is set (undoing the fault in progress)."""
        stop = stop or threading.Event()
        self._t0 = time.monotonic()
        try:
            for f in faults:
                if stop.wait(max(0.0, self._t0 + f.start - time.monotonic())):
                    return
                self.apply(f)
                try:
                    stop.wait(max(0.0, self._t0 + f.end - time.monotonic()))
                finally:
                    self.undo(f)
        finally:
            self.recover()

    def _note(self, what: str) -> None:
        self.log.append(f"{time.monotonic() - self._t0:7.2f} {what}")

    def apply(self, f: Fault) -> None:
        self._note(f"start {f.describe()}")
        net = self.cluster.net
        if f.kind in PROCESS_KINDS:
            proc = self.cluster.node(f.targets[0])
            {"kill": proc.kill, "terminate": proc.terminate, "pause": proc.pause}[f.kind]()
        elif f.kind == "partition":
            net.partition(f.targets, f.others)
        elif f.kind == "partition-one-way":
            net.partition(f.targets, f.others, direction="a_to_b")
        elif f.kind == "isolate":
            net.isolate(f.targets[0])
        elif f.kind == "delay":
            net.delay(f.targets, sorted(net.nodes - set(f.targets)), f.ms)

    def undo(self, f: Fault) -> None:
        self._note(f"end {f.kind} {','.join(f.targets)}")
        if f.kind in PROCESS_KINDS:
            proc = self.cluster.node(f.targets[0])
            if f.kind == "pause":
                proc.resume()
            elif not proc.alive():
                proc.start()
        elif f.kind == "delay":
            self.cluster.net.clear_delays()
        else:
            self.cluster.net.heal()

    def recover(self) -> None:
        """Heals the network, resumes paused processes and starts dead ones."""
        self.cluster.net.reset()
        for name in self.cluster.node_names:
            proc = self.cluster.node(name)
            if proc.alive():
                proc.resume()
            else:
                proc.start()
