"""Full log dirs (KIP-112) on three brokers and ZooKeeper, each under the three clients'
acks=all idempotent producers and their consumers (topic of 6 partitions, RF 3,
``min.insync.replicas`` 2), for ``CHAOS_MINUTES``. Every broker's ``log.dirs`` are two
tmpfs mounts of :data:`DISK_MB` the scenario makes under its run dir (root only), one
pair per broker, unmounted on the way out; :func:`tests.support.tmpfs.fill` fills one
with a filler file until it answers ENOSPC.

- ``leader_disk_full``: the dir holding ``nemesis-0`` on the leader of partition 0
  filled; awaited: that broker out of the ISR of partition 0 and another leader (within
  :data:`MOVE_S`); the workload runs :data:`HOLD` s more; the filler removed and the
  broker SIGTERMed and started again (an offline dir comes back only through a
  restart); full ISRs awaited; repeated.
- ``follower_disk_full``: the same on a follower of partition 0 (the followers in
  turn); awaited: that follower out of the ISR of partition 0, whose leader is in it.
- ``all_dirs_full``: the leader of partition 0's dir holding ``nemesis-0`` filled, then
  (once leadership of partition 0 moved) its other dir; awaited: the broker halts with
  exit status 1 and leads nothing and is in no ISR; both dirs freed, the broker
  started again; full ISRs awaited; repeated.

Each round's notes give the seconds from the fill to the ISR shrunk and the leadership
moved. After the faults no broker may have a partition's directory in both of its log
dirs (a replica in a failed dir is not created again in a live one). Each scenario
ends like the matrix (tests/cluster/chaos/test_replication_matrix.py): settle, replicas
compared below the high watermark, every acknowledged record consumed once, in order.
Run by scripts/chaos.sh; skipped without ``CHAOS_SEED``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.chaos import scenario
from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster
from tests.support import tmpfs
from tests.support.waiting import wait_until

DISK_MB = 64
MOVE_S = 30.0  # bound on the ISR shrink and the leadership move after a fill
HOLD = 3.0  # seconds of workload with the dir offline before the restart
ROUND_S = 20.0  # a round is started only with this much of the fault phase left
MAX_ROUNDS = 50
QUIET = 2.0  # seconds between rounds
TOPIC = "nemesis"
DIRS = ("a", "b")  # each broker's two log dirs: <run dir>/disks/b<id>-a, -b
_PARTITION_DIR = re.compile(r"^.+-\d+$")  # <topic>-<n>; not -delete, -stray, -future


_stamp = scenario.stamp
_time_left = scenario.time_left


def _disks(root: Path, broker: int) -> list[Path]:
    return [root / "disks" / f"b{broker}-{name}" for name in DIRS]


@contextlib.contextmanager
def _mounted(root: Path, brokers: list[int]):
    """Two tmpfs mounts per broker; on the way out each dir's contents but the filler
    are copied to ``<run dir>/b<id>/disk-<name>`` (the run's data, kept like the other
    scenarios'), then everything is unmounted, also when the block raised."""
    with contextlib.ExitStack() as stack:
        for b in brokers:
            for disk in _disks(root, b):
                stack.enter_context(tmpfs.mounted_tmpfs(disk, DISK_MB))
                stack.callback(_keep, disk, root / f"b{b}" / f"disk-{disk.name[-1]}")
        yield


def _keep(disk: Path, to: Path) -> None:
    with contextlib.suppress(OSError):
        shutil.copytree(disk, to, ignore=shutil.ignore_patterns(tmpfs.FILLER))


def _p0(c: Cluster) -> tuple[int, list[int]] | None:
    """Partition 0's (leader, ISR) as the metadata says now; None when no broker
    answers for it."""
    try:
        md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(TOPIC, timeout=5)
        p = md.topics[TOPIC].partitions[0]
    except Exception:  # noqa: BLE001 - a broker going down or up; ask again
        return None
    return p.leader, sorted(p.isrs)


def _holder(c: Cluster, broker: int) -> Path:
    """The log dir of ``broker`` whose ``nemesis-0`` the broker reads: the first of its
    ``log.dirs`` holding one, as the log manager places a partition it opens."""
    held = [d for d in _disks(c.workdir, broker) if (d / f"{TOPIC}-0").is_dir()]
    assert held, f"b{broker} holds no {TOPIC}-0"
    return held[0]


def _duplicates(c: Cluster) -> list[str]:
    """Each partition directory (``<topic>-<n>``) that one broker has in both of its log
    dirs, as ``b<id>:<topic>-<n>``. A broker must have none: Kafka refuses to start on
    duplicate log directories, and a broker that opens the first it finds may take an
    empty copy over the replica's records."""
    out = []
    for b in c.brokers:
        a, other = (
            {n.name for n in d.iterdir() if _PARTITION_DIR.match(n.name) and n.is_dir()}
            for d in _disks(c.workdir, b.id)
        )
        out += [f"b{b.id}:{name}" for name in sorted(a & other)]
    return out


def _out_of_p0(c: Cluster, broker: int, leader_moves: bool) -> Callable[[], bool]:
    """``broker`` is out of the ISR of partition 0, whose leader is another broker (and,
    with ``leader_moves``, no longer ``broker``)."""

    def done() -> bool:
        state = _p0(c)
        if state is None:
            return False
        leader, isr = state
        moved = leader >= 0 and leader != broker
        return moved and broker not in isr and (leader_moves or leader in isr)

    return done


def _out_of_everything(c: Cluster, broker: int) -> bool:
    """``broker`` leads no partition of the topic and is in no ISR of it."""
    try:
        md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(TOPIC, timeout=5)
        parts = md.topics[TOPIC].partitions.values()
    except Exception:  # noqa: BLE001 - a broker going down or up; ask again
        return False
    return bool(parts) and all(
        p.leader >= 0 and p.leader != broker and broker not in p.isrs for p in parts
    )


def _restart(c: Cluster, note, broker: int, disks: list[Path]) -> None:
    """Frees ``disks``, restarts ``broker`` (SIGTERM unless it already exited) and waits
    for full ISRs."""
    for d in disks:
        tmpfs.free(d)
    b = c.broker(broker)
    began = time.monotonic()
    code = b.terminate() if b.alive() else None
    b.start()
    how = f"SIGTERM (exit {code}) and start" if code is not None else "start"
    note(f"{_stamp()} freed {', '.join(d.name for d in disks)}; b{broker} {how}")
    faults.wait_full_isr(c, TOPIC, 60)
    note(f"{_stamp()} full ISRs {time.monotonic() - began:.1f}s after the restart")


def _run(tmp_path: Path, name: str, seed: int, seconds: float, rounds) -> None:
    """Runs ``rounds(c, note, t0)`` under the workload (:func:`scenario.run_rounds`) on
    brokers whose log dirs are the tmpfs mounts; a partition directory left in both log
    dirs of a broker fails the scenario."""
    started = time.monotonic()
    brokers = [1, 2, 3]
    per_broker = {b: {"log.dirs": ",".join(str(d) for d in _disks(tmp_path, b))} for b in brokers}

    def check(c: Cluster) -> list[BaseException]:
        twice = _duplicates(c)
        if not twice:
            return []
        return [
            AssertionError(
                f"{len(twice)} partition directories in both log dirs of a broker: "
                f"{', '.join(twice[:12])}{' ...' if len(twice) > 12 else ''}"
            )
        ]

    with _mounted(tmp_path, brokers), scenario.chaos_cluster(tmp_path, per_broker) as c:
        scenario.run_rounds(
            c, f"disk_full/{name}", seed, TOPIC, seconds, rounds, started, check=check
        )


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_leader_disk_full(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < ROUND_S:
                return
            leader = faults.target_broker(c, "leader", TOPIC)
            disk = _holder(c, leader)
            note(f"{_stamp()} round {i + 1}: fill {disk.name} of b{leader} (leader of p0)")
            filled = time.monotonic()
            tmpfs.fill(disk)
            try:
                wait_until(_out_of_p0(c, leader, True), MOVE_S, 0.1, f"p0 moved off b{leader}")
                after = time.monotonic() - filled
                new_leader, isr = _p0(c) or (-1, [])
                note(
                    f"{_stamp()} b{leader} out of the ISR of p0, leader b{new_leader} "
                    f"(ISR {isr}) {after:.1f}s after the fill"
                )
                time.sleep(HOLD)
            finally:
                _restart(c, note, leader, [disk])
            time.sleep(QUIET)

    _run(tmp_path, "leader_disk_full", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_follower_disk_full(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < ROUND_S:
                return
            leader = faults.target_broker(c, "leader", TOPIC)
            followers = [b.id for b in c.brokers if b.id != leader]
            follower = followers[i % len(followers)]
            disk = _holder(c, follower)
            note(
                f"{_stamp()} round {i + 1}: fill {disk.name} of b{follower} "
                f"(follower of p0; leader b{leader})"
            )
            filled = time.monotonic()
            tmpfs.fill(disk)
            try:
                wait_until(
                    _out_of_p0(c, follower, False),
                    MOVE_S,
                    0.1,
                    f"b{follower} out of the ISR of p0",
                )
                after = time.monotonic() - filled
                now_leader, isr = _p0(c) or (-1, [])
                note(
                    f"{_stamp()} b{follower} out of the ISR of p0, leader b{now_leader} "
                    f"(ISR {isr}) {after:.1f}s after the fill"
                )
                time.sleep(HOLD)
            finally:
                _restart(c, note, follower, [disk])
            time.sleep(QUIET)

    _run(tmp_path, "follower_disk_full", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_all_dirs_full(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < ROUND_S + scenario.SESSION_MS / 1000:
                return
            leader = faults.target_broker(c, "leader", TOPIC)
            first = _holder(c, leader)
            (second,) = [d for d in _disks(c.workdir, leader) if d != first]
            b = c.broker(leader)
            note(f"{_stamp()} round {i + 1}: fill {first.name} of b{leader} (leader of p0)")
            filled = time.monotonic()
            tmpfs.fill(first)
            try:
                wait_until(_out_of_p0(c, leader, True), MOVE_S, 0.1, f"p0 moved off b{leader}")
                new_leader, isr = _p0(c) or (-1, [])
                note(
                    f"{_stamp()} b{leader} out of the ISR of p0, leader b{new_leader} "
                    f"(ISR {isr}) {time.monotonic() - filled:.1f}s after the fill; "
                    f"fill {second.name}"
                )
                assert b.alive(), f"b{leader} exited with one log dir still live"
                filled = time.monotonic()
                tmpfs.fill(second)
                wait_until(lambda b=b: not b.alive(), MOVE_S, 0.1, f"b{leader} halted")
                halted = time.monotonic() - filled
                assert b.proc is not None
                code = b.proc.wait(10)
                wait_until(
                    lambda leader=leader: _out_of_everything(c, leader),
                    MOVE_S,
                    0.1,
                    f"b{leader} out of every ISR, leading nothing",
                )
                note(
                    f"{_stamp()} b{leader} halted (exit {code}) {halted:.1f}s after the "
                    f"second fill; out of every ISR, leading nothing after "
                    f"{time.monotonic() - filled:.1f}s"
                )
                assert code == 1, f"b{leader} exited with {code}, not 1 (halt)"
            finally:
                _restart(c, note, leader, [first, second])
            time.sleep(QUIET)

    _run(tmp_path, "all_dirs_full", chaos_seed, chaos_seconds, rounds)
