"""Live brokers keep their ZooKeeper sessions across a ZooKeeper outage longer than the
session timeout (issue 32): ZooKeeper SIGKILLed under an acks=all idempotent producer and
started again on the same data, which restores every session with a full timeout; each
broker reconnects within it (about once a second, as Kafka's ClientCnxn does), so no
registration is replaced, no leader moves, no ISR shrinks and every record is
acknowledged and read back.

Three brokers, a topic of 3 partitions, RF 3, ``min.insync.replicas`` 2. The cases are
the issue's: a 20 s outage with a 6 s session and a 40 s one with Kafka's default 18 s.
Also: a session request that a paused ZooKeeper holds unanswered is given up after
:func:`~broker_py.zk.zk_session.session_request_timeout_s` and made again, not waited on for
the whole session timeout.
"""

from __future__ import annotations

import datetime
import json
import re
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from broker_py.zk.zk_session import ZkSession, session_request_timeout_s
from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster, ClusterZooKeeper
from tests.cluster.harness.proxy import Network
from tests.cluster.harness.workload import Workload
from tests.support.waiting import wait_until

TOPIC = "outage"
PARTITIONS = 3
TAIL_S = 2.0  # writes after every broker reconnected
# The controller's line on a change of /brokers/ids that names a dead broker.
DEAD = re.compile(r"brokers: new \[[^\]]*\], dead \[\d")


def partition_states(c: Cluster) -> dict[int, tuple[int, int, list[int]]]:
    """Each partition's (leader, leader_epoch, isr) as its state znode holds it."""
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=15)
    try:
        out = {}
        for p in range(PARTITIONS):
            data, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
            state = json.loads(data)
            out[p] = (state["leader"], state["leader_epoch"], sorted(state["isr"]))
        return out
    finally:
        zk.stop()
        zk.close()


def session_events(text: str, session: int) -> dict[str, float]:
    """When (epoch seconds) the broker's log says ``session`` reconnected or expired;
    the log lines start with ``%Y-%m-%d %H:%M:%S,mmm``."""
    out: dict[str, float] = {}
    for event in ("reconnected", "expired"):
        m = re.search(rf"^(\S+ \S+) .*ZooKeeper session 0x{session:x} {event}", text, re.M)
        if m:
            when = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
            out[event] = when.timestamp()
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("outage_s", "session_ms"),
    [(20, 6000), (40, 18000)],
    ids=["20s-outage-6s-session", "40s-outage-18s-session"],
)
def test_live_brokers_keep_their_sessions_across_a_zookeeper_outage(tmp_path, outage_s, session_ms):
    c = Cluster(
        tmp_path,
        n_brokers=3,
        zk_session_timeout_ms=session_ms,
        overrides={"auto.leader.rebalance.enable": "false"},
    )
    with c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30, 0.2, "three brokers")
        c.create_topic(TOPIC, PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
        faults.wait_full_isr(c, TOPIC, 30)
        registered = faults.registrations(c)
        assert sorted(registered) == [1, 2, 3]
        states = partition_states(c)
        zk = c.zookeeper
        assert zk is not None
        marks = {b.id: len(b.log_text()) for b in c.brokers}
        events: dict[int, dict[str, float]] = {}
        back: list[float] = []

        def outage(stop) -> None:
            time.sleep(1.0)  # records acknowledged before the outage too
            zk.kill()
            time.sleep(outage_s)
            zk.start()
            back.append(time.time())

            def settled() -> bool:
                for b in c.brokers:
                    events[b.id] = session_events(b.log_text()[marks[b.id] :], registered[b.id][1])
                return all(events[b.id] for b in c.brokers)

            try:
                wait_until(settled, session_ms / 1000 + 30, 0.2, "every broker reconnected")
            finally:
                stop.wait(TAIL_S)
                stop.set()

        wl = Workload(
            c.bootstrap_servers,
            TOPIC,
            partitions=PARTITIONS,
            producers=("confluent",),
            consumers=("confluent",),
            count=100_000,
            seconds=outage_s + session_ms / 1000 + 60,
            interval=0.01,
            flush_seconds=20,
            drain_seconds=30,
        )
        history = wl.run(during=outage)

        assert back, f"ZooKeeper did not come back: {wl.errors}"
        after = {
            b: {k: round(t - back[0], 1) for k, t in e.items()} for b, e in sorted(events.items())
        }
        print(
            f"outage {outage_s}s, session {session_ms}ms: seconds after ZooKeeper answered ruok "
            f"again {after}"
        )
        assert not [b for b, e in events.items() if "expired" in e], after
        assert all("reconnected" in e for e in events.values()), after
        assert faults.registrations(c) == registered
        assert partition_states(c) == states
        for b in c.brokers:
            assert not DEAD.search(b.log_text()[marks[b.id] :]), f"b{b.id} logged a dead broker"
        result = history.check()
        assert not wl.errors, wl.errors
        assert result.ok and result.final_reads_complete, result.summary()
        assert result.sends > 0 and result.acked == result.sends, result.summary()
        assert result.unseen == 0, result.summary()


@pytest.mark.timeout(120)
def test_a_session_request_a_paused_zookeeper_holds_is_given_up_and_made_again(tmp_path):
    session_ms = 18000
    zk = ClusterZooKeeper(tmp_path / "zookeeper")
    zk.start()
    net = Network()
    session = None
    try:
        proxy = net.add_zk_proxy("b1", zk.port)  # counts the connections made through it
        zk.pause()  # the kernel still accepts its connections; nothing answers them
        session = ZkSession(f"127.0.0.1:{proxy.port}", session_ms, connection_timeout_ms=60000)
        starting = threading.Thread(target=session.start, daemon=True)
        starting.start()
        # kazoo alone would wait the whole session timeout on the first one.
        wait_until(
            lambda: proxy.stats.connections >= 2,
            session_ms / 1000 - 3,
            0.1,
            f"a second attempt {session_request_timeout_s(session_ms)} s after the first "
            "and a little, within the session",
        )
        zk.resume()
        starting.join(30)
        assert session.connected
    finally:
        zk.resume()
        if session is not None:
            session.close()
        net.close()
        zk.kill()
