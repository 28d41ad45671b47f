"""The nemesis scenarios of issue 22 on three brokers and ZooKeeper, each under the
three clients' acks=all idempotent producers and their consumers (topic of 6
partitions, RF 3, ``min.insync.replicas`` 2), for ``CHAOS_MINUTES``:

- ``isolated_leader``: the leader of partition 0 cut off from everyone (ZooKeeper, the
  other brokers and, every other round, the clients too: a leader that clients still
  reach but that can reach no follower is the zombie Jepsen looks for), for twice the
  session timeout plus 4 s, healed, full ISRs awaited; repeated.
- ``paused_follower``: a follower of partition 0 SIGSTOPped until the leader dropped it
  from the ISR (past ``replica.lag.time.max.ms``), every other round also past the
  ZooKeeper session timeout, then SIGCONTed and awaited back in every ISR; repeated.
- ``zookeeper_restart``: ZooKeeper stopped (SIGTERM, or SIGKILL every other round), down
  for 1 s or past the session timeout, started again on the same data; repeated.
- ``zookeeper_outage``: ZooKeeper SIGKILLed for 20 s (past the session timeout) and
  started again on the same data; after each round every broker still holds the
  registration it had before the first (same czxid: no session expired); repeated.
- ``rolling_restart``: every broker in turn SIGTERMed and started again, each waiting
  for full ISRs before the next; whole rounds until the time is up.
- ``random_nemesis``: :func:`~tests.cluster.harness.nemesis.schedule` from the seed over
  every fault kind and every node, ZooKeeper included.

Each ends like the matrix (tests/cluster/chaos/test_replication_matrix.py): settle,
replicas compared below the high watermark, every acknowledged record consumed once, in
order. Run by scripts/chaos.sh; skipped without ``CHAOS_SEED``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.chaos import scenario
from tests.cluster.harness import faults
from tests.cluster.harness.nemesis import KINDS, Nemesis, schedule
from tests.support.waiting import wait_until

SESSION_S = scenario.SESSION_MS / 1000
LAG_S = scenario.LAG_MS / 1000
MAX_ROUNDS = 50
QUIET = 2.0  # seconds between rounds
TOPIC = "nemesis"


_stamp = scenario.stamp
_time_left = scenario.time_left


def _run(tmp_path, name: str, seed: int, seconds: float, rounds) -> None:
    """Runs ``rounds(c, note, t0)`` under the workload (:func:`scenario.run_rounds`)."""
    started = time.monotonic()
    with scenario.chaos_cluster(tmp_path) as c:
        scenario.run_rounds(c, f"nemesis/{name}", seed, TOPIC, seconds, rounds, started)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_isolated_leader(tmp_path, chaos_seed, chaos_seconds):
    hold = SESSION_S * 2 + 4

    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < hold:
                return
            leader = faults.target_broker(c, "leader", TOPIC)
            keep_clients = i % 2 == 1
            but_for = " but for clients" if keep_clients else ""
            note(f"{_stamp()} isolate b{leader} (leader of p0){but_for} for {hold:.0f}s")
            c.net.isolate(f"b{leader}", keep_clients=keep_clients)
            try:
                time.sleep(hold)
            finally:
                c.net.heal()
            note(
                f"{_stamp()} healed; new leader of p0: b{faults.target_broker(c, 'leader', TOPIC)}"
            )
            faults.wait_full_isr(c, TOPIC, 60)
            note(f"{_stamp()} full ISRs")
            time.sleep(QUIET)

    _run(tmp_path, "isolated_leader", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_paused_follower(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < LAG_S + SESSION_S:
                return
            leader = faults.target_broker(c, "leader", TOPIC)
            followers = [b.id for b in c.brokers if b.id != leader]
            follower = followers[i % len(followers)]
            past_session = i % 2 == 1
            past = ", past the session timeout" if past_session else ""
            note(f"{_stamp()} SIGSTOP b{follower} (follower of p0; leader b{leader}){past}")
            paused = time.monotonic()
            c.broker(follower).pause()
            try:
                wait_until(
                    lambda follower=follower: follower not in faults.isrs(c, TOPIC)[0],
                    LAG_S * 3 + 15,
                    0.2,
                    f"b{follower} out of the ISR of p0",
                )
                note(
                    f"{_stamp()} b{follower} out of the ISR of p0 after "
                    f"{time.monotonic() - paused:.1f}s"
                )
                if past_session:
                    time.sleep(max(0.0, SESSION_S + 2 - (time.monotonic() - paused)))
            finally:
                c.broker(follower).resume()
            note(f"{_stamp()} SIGCONT b{follower} after {time.monotonic() - paused:.1f}s")
            faults.wait_full_isr(c, TOPIC, 60)
            note(f"{_stamp()} full ISRs")
            time.sleep(QUIET)

    _run(tmp_path, "paused_follower", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_zookeeper_restart(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        zk = c.zookeeper
        assert zk is not None
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        for i in range(MAX_ROUNDS):
            down = 1.0 if i % 2 == 0 else SESSION_S + 2
            hard = i % 4 in (1, 2)
            if i > 0 and _time_left(t0, chaos_seconds) < down + 5:
                return
            note(f"{_stamp()} ZooKeeper {'SIGKILL' if hard else 'SIGTERM'}, down {down:.0f}s")
            if hard:
                zk.kill()
            else:
                zk.terminate()
            time.sleep(down)
            zk.start()
            note(f"{_stamp()} ZooKeeper started")
            wait_until(
                lambda: len(admin.list_topics(timeout=5).brokers) == 3,
                60,
                0.2,
                "three brokers registered",
            )
            faults.wait_full_isr(c, TOPIC, 60)
            note(f"{_stamp()} three brokers registered, full ISRs")
            time.sleep(QUIET)

    _run(tmp_path, "zookeeper_restart", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_zookeeper_outage(tmp_path, chaos_seed, chaos_seconds):
    down = 20.0  # past SESSION_S: the brokers must resume their sessions, not wait them out

    def rounds(c, note, t0):
        zk = c.zookeeper
        assert zk is not None
        registered = faults.registrations(c)
        note(f"{_stamp()} registrations (czxid, session) {registered}")
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < down + SESSION_S:
                return
            note(f"{_stamp()} ZooKeeper SIGKILL, down {down:.0f}s")
            zk.kill()
            time.sleep(down)
            zk.start()
            note(f"{_stamp()} ZooKeeper started")
            time.sleep(SESSION_S + 2)  # a session not resumed by now has expired
            now = faults.registrations(c)
            if now != registered:
                raise AssertionError(f"brokers registered again: {registered} -> {now}")
            note(f"{_stamp()} every broker kept its session")
            faults.wait_full_isr(c, TOPIC, 60)
            time.sleep(QUIET)

    _run(tmp_path, "zookeeper_outage", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 600)
def test_rolling_restart(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        for i in range(MAX_ROUNDS):
            if i > 0 and _time_left(t0, chaos_seconds) < 0:
                return
            for b in c.brokers:
                began = time.monotonic()
                code = b.terminate()
                b.start()
                faults.wait_full_isr(c, TOPIC, 60)
                note(
                    f"{_stamp()} round {i + 1}: b{b.id} SIGTERM (exit {code}) and back in every "
                    f"ISR in {time.monotonic() - began:.1f}s"
                )

    _run(tmp_path, "rolling_restart", chaos_seed, chaos_seconds, rounds)


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + 300)
def test_random_nemesis(tmp_path, chaos_seed, chaos_seconds):
    def rounds(c, note, t0):
        plan = schedule(chaos_seed, chaos_seconds - scenario.WARMUP, c.node_names, kinds=KINDS)
        for f in plan:
            note(f"planned {f.describe()}")
        nemesis = Nemesis(c)
        try:
            nemesis.run(plan)
        finally:
            for line in nemesis.log:
                note(line)

    _run(tmp_path, "random_nemesis", chaos_seed, chaos_seconds, rounds)
