"""What every chaos scenario shares: the gate that keeps the scenarios out of the quick
suite, the cluster they run on, and the check-and-report step that ends each of them.

- :data:`chaos_only`: the scenarios run only when ``CHAOS_SEED`` is set, as
  ``scripts/chaos.sh`` does; a plain ``python -m pytest tests/`` collects and skips
  them.
- :func:`chaos_cluster`: one ZooKeeper and three brokers (session timeout
  :data:`SESSION_MS`, ``replica.lag.time.max.ms`` :data:`LAG_MS`, optional settings
  per broker), waiting until all three are registered; the topic is created with
  :func:`create_topic` (RF 3, ``min.insync.replicas`` 2).
- :func:`workload`: producers and consumers of the three clients with a count and a
  time bound; the scenario's ``during`` sets ``stop`` to end the producers once its
  faults are over.
- :func:`finish`: settles the cluster (every broker running, every ISR full), compares
  the replicas below the high watermark live and again after stopping the brokers,
  runs the checker over the history plus the replicas' records, prints the one-line
  summary, appends it as JSON to ``CHAOS_RESULTS`` (when set) and asserts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster
from tests.cluster.harness.replicas import compare_replicas, replica_reads
from tests.cluster.harness.workload import History, Workload
from tests.support.waiting import wait_until

ENABLED = "CHAOS_SEED" in os.environ
chaos_only = pytest.mark.skipif(
    not ENABLED, reason="a chaos scenario: run scripts/chaos.sh (or set CHAOS_SEED)"
)

MINUTES = float(os.environ.get("CHAOS_MINUTES", "1"))
SECONDS = MINUTES * 60.0
# A scenario's own hard bound (pytest-timeout): its fault phase plus the workload's
# flush and drain, settling, the replica comparison and the brokers' shutdown.
TIMEOUT = int(SECONDS + 900)

SESSION_MS = 6000
LAG_MS = 3000
OVERRIDES = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
}
TOPIC_CONFIG = {"min.insync.replicas": "2"}
PARTITIONS = 6
INTERVAL = 0.01  # between one producer's sends: at most 100 records/s per client
WARMUP = 3.0  # seconds of writes before the first fault
TAIL = 5.0  # seconds of writes after the last fault is undone


@contextlib.contextmanager
def chaos_cluster(
    tmp_path: Path, broker_overrides: dict[int, dict[str, str]] | None = None
) -> Iterator[Cluster]:
    """Three brokers and ZooKeeper (``broker_overrides``: settings per broker id, e.g.
    its ``log.dirs``); the ``with`` kills everything on the way out and prints every
    log's tail when the block raised."""
    c = Cluster(
        tmp_path,
        n_brokers=3,
        zk_session_timeout_ms=SESSION_MS,
        overrides=OVERRIDES,
        broker_overrides=broker_overrides,
    )
    with c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            30,
            0.2,
            "three brokers registered",
        )
        yield c


def create_topic(c: Cluster, topic: str, partitions: int = PARTITIONS) -> None:
    c.create_topic(topic, partitions=partitions, replication_factor=3, config=TOPIC_CONFIG)
    faults.wait_full_isr(c, topic, 60)


def workload(c: Cluster, topic: str, seconds: float, partitions: int = PARTITIONS) -> Workload:
    """The three clients' producers and consumers, bounded by ``seconds`` and a count;
    ``during`` should set ``stop`` once its faults are over (see :func:`faults_then_tail`)."""
    return Workload(
        c.bootstrap_servers,
        topic,
        partitions=partitions,
        count=int(seconds / INTERVAL) + 1,
        seconds=seconds,
        interval=INTERVAL,
        flush_seconds=30,
        drain_seconds=60,
        producer_config=_client_debug(c),
    )


def _client_debug(c: Cluster, name: str = "producer") -> dict[str, dict]:
    """With ``CHAOS_CLIENT_DEBUG`` (librdkafka debug contexts, e.g. ``eos,msg,protocol``)
    the confluent-kafka client logs them to ``confluent-<name>.log`` in the cluster's
    dir, next to the brokers' logs."""
    contexts = os.environ.get("CHAOS_CLIENT_DEBUG")
    if not contexts:
        return {}
    logger = logging.getLogger(f"chaos.confluent.{c.workdir.name}.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = logging.FileHandler(c.workdir / f"confluent-{name}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return {"confluent": {"debug": contexts, "logger": logger}}


def faults_then_tail(
    body: Callable[[float], None], errors: list[BaseException], at_least: float = SECONDS
) -> Callable:
    """A workload's ``during``: after :data:`WARMUP` runs ``body(t0)`` (the faults;
    ``t0`` is the monotonic start), keeps the producers going until ``at_least``
    seconds since the start and :data:`TAIL` seconds after the faults, then stops them.
    An exception of ``body`` goes to ``errors`` (the history is still checked)."""

    def during(stop) -> None:
        t0 = time.monotonic()
        try:
            if stop.wait(WARMUP):
                return
            body(t0)
        except Exception as e:  # noqa: BLE001 - reported after the checks
            errors.append(e)
        stop.wait(max(TAIL, at_least - (time.monotonic() - t0)))
        stop.set()

    return during


def stamp() -> str:
    """The wall-clock time of a note."""
    return time.strftime("%H:%M:%S")


def time_left(t0: float, seconds: float) -> float:
    """What is left of a fault phase of ``seconds`` that began at monotonic ``t0``."""
    return seconds - (time.monotonic() - t0)


def run_rounds(
    c: Cluster,
    name: str,
    seed: int,
    topic: str,
    seconds: float,
    rounds: Callable[[Cluster, Callable[[str], None], float], None],
    started: float,
    check: Callable[[Cluster], list[BaseException]] | None = None,
) -> None:
    """Creates ``topic``, runs ``rounds(c, note, t0)`` (the faults; returns when they
    are over) under the workload, adds what ``check(c)`` finds to the errors, then
    :func:`finish` (``started``: when the scenario began)."""
    notes: list[str] = []
    errors: list[BaseException] = []
    create_topic(c, topic)
    wl = workload(c, topic, seconds + 300)
    t = time.monotonic()
    history = wl.run(
        during=faults_then_tail(lambda t0: rounds(c, notes.append, t0), errors, seconds)
    )
    if check is not None:
        errors.extend(check(c))
    finish(c, name, seed, topic, wl, history, started, time.monotonic() - t, notes, errors)


def _ack_stall(history: History) -> tuple[float, str]:
    """What ``longest_ack_gap`` leaves out: the longest time a producer kept sending
    after its last acknowledgement (seconds, and which producer); 0 when every producer
    was acknowledged to the end."""
    first_send: dict[str, float] = {}
    last_send: dict[str, float] = {}
    last_ack: dict[str, float] = {}
    for s in history.sends:
        first_send.setdefault(s.process, s.invoked)
        last_send[s.process] = max(last_send.get(s.process, 0.0), s.invoked)
        if s.outcome == "ok" and s.completed is not None:
            last_ack[s.process] = max(last_ack.get(s.process, 0.0), s.completed)
    stall, who = 0.0, ""
    for process, sent in last_send.items():
        gap = sent - last_ack.get(process, first_send[process])
        if gap > stall:
            stall, who = gap, process
    return round(stall, 2), who if stall > 1.0 else ""


def _retry(fn: Callable, attempts: int = 4, pause: float = 5.0):
    """``fn()``, asked again on an exception: a broker started a moment ago may answer
    Metadata before the controller told it about the topic (``_UNKNOWN_PARTITION``)."""
    for i in range(attempts):
        try:
            return fn()
        except Exception:  # noqa: BLE001 - the last one propagates
            if i == attempts - 1:
                raise
            time.sleep(pause)
    return None


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        return "?"


@dataclass
class Outcome:
    scenario: str
    seed: int
    minutes: float
    acked: int = 0
    sends: int = 0
    unknown: int = 0
    failed: int = 0
    lost: int = 0
    unseen: int = 0
    duplicates: int = 0
    inconsistent_offsets: int = 0
    anomalies: dict[str, int] = field(default_factory=dict)
    final_reads_complete: bool = False
    longest_ack_gap: float = 0.0
    ack_stall: float = 0.0
    ack_stall_producer: str = ""
    replicas_identical: bool = False
    replica_detail: str = ""
    workload_seconds: float = 0.0
    total_seconds: float = 0.0
    ok: bool = False
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checker: str = ""
    workdir: str = ""
    date: str = ""
    commit: str = ""

    def line(self) -> str:
        stall_producer = f"({self.ack_stall_producer})" if self.ack_stall_producer else ""
        return (
            f"chaos: {self.scenario} seed={self.seed} acked={self.acked} lost={self.lost} "
            f"unseen={self.unseen} "
            f"duplicates={self.duplicates} inconsistent={self.inconsistent_offsets} "
            f"longest_ack_gap={self.longest_ack_gap:.1f}s "
            f"ack_stall={self.ack_stall:.1f}s{stall_producer} "
            f"replicas_identical={'yes' if self.replicas_identical else 'NO'} "
            f"workload={self.workload_seconds:.0f}s total={self.total_seconds:.0f}s "
            f"{'OK' if self.ok else 'FAILED'}"
        )


def finish(
    c: Cluster,
    scenario: str,
    seed: int,
    topic: str,
    wl: Workload,
    history: History,
    started: float,
    workload_seconds: float,
    notes: list[str],
    errors: list[BaseException] = (),
    partitions: int = PARTITIONS,
) -> Outcome:
    """Settles the cluster, compares the replicas, checks the history, reports, asserts."""
    out = Outcome(
        scenario, seed, MINUTES, notes=list(notes), date=time.strftime("%Y-%m-%d"), commit=commit()
    )
    out.workload_seconds = workload_seconds
    out.errors = [repr(e) for e in errors] + list(wl.errors)
    try:
        faults.settle(c, topic)
    except Exception as e:  # noqa: BLE001 - reported; the checks still run
        out.errors.append(f"settle: {e!r}")
    details = []
    extra = []
    try:
        hws = _retry(lambda: faults.high_watermarks(c, topic, partitions))
        live = _retry(lambda: faults.replica_check(c, topic, partitions))
        for b in c.brokers:
            b.terminate(20)
        identical = True
        for p, hw in hws.items():
            dirs = {f"b{b.id}": b.partition_dir(topic, p) for b in c.brokers}
            stopped = compare_replicas(dirs, hw)
            short = {n: e for n, e in stopped.end_offsets.items() if e < hw}
            if not (live[p].identical and stopped.identical) or short:
                identical = False
                details.append(
                    f"p{p} hw={hw}: live {live[p].detail or 'identical'}; "
                    f"stopped {stopped.detail or 'identical'}; ends {stopped.end_offsets}"
                )
            extra += replica_reads(dirs, p, hw)
        out.replicas_identical = identical
    except Exception as e:  # noqa: BLE001 - reported
        out.errors.append(f"replica check: {e!r}")
    out.replica_detail = "; ".join(details)
    result = history.check(extra)
    out.sends, out.acked, out.unknown, out.failed = (
        result.sends,
        result.acked,
        result.unknown,
        result.failed,
    )
    out.lost, out.unseen, out.duplicates, out.inconsistent_offsets = (
        result.lost,
        result.unseen,
        result.duplicates,
        result.inconsistent_offsets,
    )
    out.anomalies = result.anomalies()
    out.final_reads_complete = result.final_reads_complete
    out.checker = result.summary()
    out.workdir = str(c.workdir)
    _dump(c.workdir / "history.jsonl", history.ops + extra)
    out.longest_ack_gap = round(history.longest_ack_gap(), 2)
    out.ack_stall, out.ack_stall_producer = _ack_stall(history)
    out.total_seconds = round(time.monotonic() - started, 1)
    # Every acknowledged record consumed: also when the final reads did not reach the
    # end offsets (then the checker does not count ``unseen`` as an anomaly).
    out.ok = (
        result.ok
        and out.unseen == 0
        and out.replicas_identical
        and not out.errors
        and out.acked > 0
    )
    print(out.line())
    _record(out)
    report = "\n".join(
        [
            out.line(),
            f"seed={seed} (repeat: scripts/chaos.sh --seed {seed} --minutes {MINUTES:g} "
            f"-k '{scenario.split('/')[-1]}')",
            "faults:",
            *(f"  {n}" for n in notes),
            result.summary(),
            *out.errors,
            out.replica_detail,
        ]
    )
    assert not out.errors, report
    assert result.ok, report
    assert out.unseen == 0, report
    assert out.replicas_identical, report
    assert out.acked > 0, report
    return out


def _dump(path: Path, ops) -> None:
    """The history (and the replicas' reads), one JSON object per operation, for
    looking into a failure afterwards."""
    with open(path, "w") as f:
        # Op times are monotonic seconds; this pair maps them to the brokers' log times.
        f.write(
            json.dumps({"op": "Clock", "time": time.time(), "monotonic": time.monotonic()}) + "\n"
        )
        for op in ops:
            f.write(json.dumps({"op": type(op).__name__, **asdict(op)}) + "\n")


def _record(out: Outcome) -> None:
    path = os.environ.get("CHAOS_RESULTS")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(asdict(out)) + "\n")
