"""The cluster harness itself, with real processes on loopback: the proxies relay Kafka
traffic, partitions (both ways and one way) hold it and heal releases it, delays are
lower bounds on latency, sources are told apart by client_id, a cut ZooKeeper proxy
suspends exactly its kazoo client, and broker processes pause, die and restart.

The brokers run as independent single brokers (``zookeeper=False``); the ZooKeeper
tests start the harness's own ZooKeeper. Time figures are only lower bounds (a delay of
d ms means no answer before d ms), or generous upper bounds for what must happen.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.harness.checker import check
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.cluster.harness.proxy import STALL_S, Network, source_of
from tests.cluster.harness.replicas import compare_replicas, read_batches, replica_reads
from tests.cluster.harness.workload import Workload
from tests.support.waiting import wait_until

API_VERSIONS = 18


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("cluster"), n_brokers=2, zookeeper=False) as c:
        yield c


def _recover(cluster: Cluster) -> None:
    cluster.net.reset()
    for b in cluster.brokers:
        if not b.alive():
            b.start()
        elif b.paused:
            b.resume()


@pytest.fixture
def c(request, cluster):
    """The module's cluster, healed and every broker running, before and after."""
    _recover(cluster)
    with logs_on_failure(request, cluster):
        yield cluster
    _recover(cluster)


def _topic(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


class Wire:
    """A raw Kafka connection sending ApiVersions v0 with a chosen client_id."""

    def __init__(self, address: str, client_id: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.client_id = client_id.encode()
        self.corr = 0

    def send(self) -> int:
        self.corr += 1
        body = (
            struct.pack(">hhih", API_VERSIONS, 0, self.corr, len(self.client_id)) + self.client_id
        )
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self.corr

    def recv(self, timeout: float) -> int | None:
        """The correlation id of the next response, None if none came within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            head = self._exactly(4)
        except TimeoutError:
            return None
        (size,) = struct.unpack(">i", head)
        self.sock.settimeout(10)
        body = self._exactly(size)
        return struct.unpack_from(">i", body)[0]

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def roundtrip(self, timeout: float = 10.0) -> float:
        t = time.monotonic()
        corr = self.send()
        assert self.recv(timeout) == corr
        return time.monotonic() - t

    def close(self) -> None:
        self.sock.close()


def _producer(bootstrap: str, **conf) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            **conf,
        }
    )


def test_source_of_reads_the_broker_id_from_the_client_id():
    assert source_of("broker-2-fetcher-0") == "b2"
    assert source_of("broker-3-controller-to-broker-1") == "b3"
    assert source_of("broker-12-x") == "b12"
    assert source_of("rdkafka") == "client"
    assert source_of("broker-x-1") == "client"
    assert source_of("") == "client"
    assert source_of(None) == "client"


def test_the_proxies_relay_kafka_traffic_and_brokers_advertise_them(c):
    topic = _topic("relay")
    c.create_topic(topic, bootstrap=c.bootstrap(1))
    p = _producer(c.bootstrap(1))
    for i in range(20):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(15) == 0
    cons = Consumer(
        {"bootstrap.servers": c.bootstrap(1), "group.id": topic, "auto.offset.reset": "earliest"}
    )
    cons.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.value() for m in cons.consume(100, 0.5) if m.error() is None]
    md = cons.list_topics(topic, timeout=5)
    cons.close()
    assert got == [f"v{i}".encode() for i in range(20)]
    # The broker hands out its client proxy, never its own port.
    assert {f"{b.host}:{b.port}" for b in md.brokers.values()} == {c.bootstrap(1)}
    stats = c.client_proxies[1].stats
    assert stats.connections >= 2 and stats.sources == {"client"}
    assert stats.delivered[("client", "b1")] > 0 and stats.delivered[("b1", "client")] > 0


def test_a_partition_holds_traffic_and_heal_delivers_it(c):
    w = Wire(c.bootstrap(1), "tester")
    try:
        w.roundtrip()
        c.net.partition(["client"], ["b1"])
        corr = w.send()
        assert w.recv(1.0) is None
        fresh = Wire(c.bootstrap(1), "tester-2")  # accepted, but silent
        fresh.send()
        assert fresh.recv(0.5) is None
        other = Wire(c.bootstrap(2), "tester-3")  # b2 is not cut off
        other.roundtrip(5)
        c.net.heal()
        assert w.recv(10) == corr  # the held request and its answer flow after heal
        assert fresh.recv(10) == 1
        w.roundtrip()
        fresh.close()
        other.close()
    finally:
        w.close()


def test_produce_under_partition_is_acknowledged_after_heal(c):
    topic = _topic("held")
    c.create_topic(topic, bootstrap=c.bootstrap(1))
    p = _producer(c.bootstrap(1))
    p.produce(topic, b"before", partition=0)
    assert p.flush(15) == 0
    reports: list = []
    c.net.partition("client", "b1")
    p.produce(
        topic,
        b"during",
        partition=0,
        on_delivery=lambda err, msg: reports.append((err, msg.offset())),
    )
    assert p.flush(1.5) == 1 and reports == []
    c.net.heal()
    assert p.flush(15) == 0
    assert reports == [(None, 1)]


def test_one_way_partitions(c):
    topic = _topic("oneway")
    c.create_topic(topic, bootstrap=c.bootstrap(1))
    part_dir = c.broker(1).partition_dir(topic, 0)
    p = _producer(c.bootstrap(1))
    p.produce(topic, b"warm-up", partition=0)
    assert p.flush(15) == 0
    reports: list = []

    def report(err, msg):
        reports.append((err, msg.offset()))

    # Requests do not reach b1: nothing is appended, nothing answered.
    c.net.partition("client", "b1", direction="a_to_b")
    assert c.net.is_blocked("client", "b1") and not c.net.is_blocked("b1", "client")
    p.produce(topic, b"one", partition=0, on_delivery=report)
    assert p.flush(1.0) == 1
    assert len(read_batches(part_dir)) == 1
    c.net.heal()
    assert p.flush(15) == 0 and reports == [(None, 1)]

    # Requests reach b1 (it appends) but its answers do not come back until heal.
    c.net.partition("b1", "client", direction="a_to_b")
    p.produce(topic, b"two", partition=0, on_delivery=report)
    wait_until(lambda: len(read_batches(part_dir)) == 3, 10, message="the append on b1")
    assert p.flush(0.5) == 1 and len(reports) == 1
    c.net.heal()
    assert p.flush(15) == 0 and reports[-1] == (None, 2)


def test_delay_is_a_lower_bound_on_latency(c):
    w = Wire(c.bootstrap(1), "tester")
    try:
        baseline = min(w.roundtrip() for _ in range(3))
        c.net.delay("client", "b1", 250)  # both ways: a round trip crosses it twice
        both = w.roundtrip()
        c.net.delay("client", "b1", 0)
        c.net.delay("client", "b1", 250, direction="a_to_b")
        one = w.roundtrip()
        c.net.clear_delays()
        after = w.roundtrip()
        other = Wire(c.bootstrap(2), "tester")
        c.net.delay("client", "b1", 250)
        unaffected = other.roundtrip()  # b2's link is not delayed
        other.close()
    finally:
        c.net.clear_delays()
        w.close()
    assert both >= 0.5 and one >= 0.25
    assert both > one > baseline
    assert after < 0.25 and unaffected < 0.25


def test_sources_are_told_apart_by_client_id(c):
    fetcher = Wire(c.bootstrap(1), "broker-2-fetcher-0")
    client = Wire(c.bootstrap(1), "rdkafka")
    try:
        fetcher.roundtrip()
        client.roundtrip()
        c.net.partition("b2", "b1")
        corr = fetcher.send()
        assert fetcher.recv(1.0) is None
        client.roundtrip(5)  # the plain client is not cut
        c.net.heal()
        assert fetcher.recv(10) == corr
    finally:
        fetcher.close()
        client.close()
    assert {"b2", "client"} <= c.client_proxies[1].stats.sources


def test_isolate_cuts_a_node_from_everything_or_keeps_clients():
    with Network() as net:
        net.add_kafka_proxy("b1", 1, "CLIENT")
        net.add_kafka_proxy("b2", 1, "CLIENT")
        net.add_zk_proxy("b1", 1)
        net.add_zk_proxy("b2", 1)
        assert net.nodes == {"b1", "b2", "zk", "client"}
        net.isolate("b1")
        assert net.blocked == {
            (x, y) for o in ("b2", "zk", "client") for x, y in (("b1", o), (o, "b1"))
        }
        net.heal()
        net.isolate("b1", keep_clients=True)
        assert not net.is_blocked("b1", "client") and not net.is_blocked("client", "b1")
        assert net.is_blocked("b1", "zk") and net.is_blocked("b2", "b1")
        net.partition(["b1", "b2"], ["b1"])
        assert not net.is_blocked("b1", "b1")  # never from itself
        net.reset()
        assert net.blocked == frozenset() and net.delays == {}
        with pytest.raises(ValueError):
            net.partition("b1", "b2", direction="b_to_a")


def test_a_stalled_proxy_loop_is_recorded():
    with Network() as net:
        assert net.stalls == []
        blocked = threading.Event()
        net._loop.call_soon_threadsafe(lambda: (blocked.set(), time.sleep(STALL_S + 0.5)))
        assert blocked.wait(10)
        wait_until(lambda: len(net.stalls) == 1, timeout=10, message="the stall recorded")
        assert "proxy loop" in net.stalls[0] and "s late" in net.stalls[0]


def test_pause_and_resume_a_broker(c):
    b = c.broker(2)
    w = Wire(c.bootstrap(2), "tester")
    try:
        w.roundtrip()
        b.pause()
        corr = w.send()
        assert w.recv(1.0) is None
        b.resume()
        assert w.recv(10) == corr
    finally:
        w.close()


def test_kill_terminate_and_restart_a_broker(c):
    b = c.broker(2)
    topic = _topic("restart")
    c.create_topic(topic, bootstrap=c.bootstrap(2))
    p = _producer(c.bootstrap(2))
    p.produce(topic, b"before", partition=0)
    assert p.flush(15) == 0
    pid = b.pid
    b.kill()
    assert not b.alive() and b.exit_codes[-1] == -9
    # Through the proxy, the dead broker's port closes the connection at once.
    s = socket.create_connection(("127.0.0.1", c.client_proxies[2].port), timeout=5)
    s.sendall(struct.pack(">i", 12) + struct.pack(">hhih", API_VERSIONS, 0, 1, 0))
    s.settimeout(5)
    try:
        assert s.recv(10) == b""
    except ConnectionResetError:
        pass
    s.close()
    b.start()
    assert b.alive() and b.pid != pid
    p.produce(topic, b"after", partition=0)
    assert p.flush(20) == 0
    assert b.terminate() == 0
    b.restart()  # not running: just starts
    assert b.alive()
    b.restart(hard=True)
    assert b.alive() and b.exit_codes[-2:] == [0, -9]
    batches = read_batches(b.partition_dir(topic, 0))
    assert [x.base_offset for x in batches] == [0, 1]


def test_workload_under_a_partition_and_replica_comparison(c, tmp_path):
    topic = _topic("workload")
    c.create_topic(topic, partitions=2, bootstrap=c.bootstrap(1))
    wl = Workload(c.bootstrap(1), topic, partitions=2, count=300, seconds=20, interval=0.01)

    def cut(stop: threading.Event) -> None:
        if not stop.wait(1.0):
            c.net.partition("client", "b1")
            stop.wait(2.0)
            c.net.heal()

    history = wl.run(during=cut)
    assert wl.errors == []
    result = history.check()
    assert result.ok and result.final_reads_complete, result.summary()
    assert result.acked == 900 and result.values_read == 900
    assert history.longest_ack_gap() >= 1.0
    assert {p.process for p in history.polls} == {"confluent", "kafka-python", "aiokafka"}

    # Replicas: copies of b1's partition dir are identical; a changed value and a
    # shortened log are reported at the offset concerned.
    src = c.broker(1).partition_dir(topic, 0)
    hw = max(x.last_offset for x in read_batches(src)) + 1
    a, bad, short = (tmp_path / n for n in ("a", "bad", "short"))
    for d in (a, bad, short):
        shutil.copytree(src, d)
    same = compare_replicas({"b1": src, "a": a}, hw)
    assert (
        same.identical
        and same.batches_compared == len(read_batches(src))
        and same.end_offsets == {"b1": hw, "a": hw}
    )

    batches = read_batches(bad)
    victim = batches[len(batches) // 2]
    seg = bad / victim.segment
    data = bytearray(seg.read_bytes())
    value = next(v for o, v in replica_reads({"x": bad}, 0)[0].records if o == victim.base_offset)
    at = data.index(value.encode(), victim.position)
    data[at] ^= 0x01  # same length, different value: the CRC no longer matches
    seg.write_bytes(bytes(data))
    diff = compare_replicas({"b1": src, "bad": bad}, hw)
    assert diff.first_divergence == victim.base_offset, diff.detail
    reads = replica_reads({"b1": src, "bad": bad}, 0, hw)
    assert check(history.ops + reads).inconsistent_offsets >= 1

    last = read_batches(short)[-1]
    with open(short / last.segment, "r+b") as f:
        f.truncate(last.position)
    cut_short = compare_replicas({"b1": src, "short": short}, hw)
    assert cut_short.first_divergence == last.base_offset and "short" in cut_short.detail
    assert compare_replicas({"b1": src, "short": short}, last.base_offset).identical
    assert os.path.getsize(short / last.segment) == last.position


@pytest.fixture(scope="module")
def zk_cluster(tmp_path_factory):
    with Cluster(
        tmp_path_factory.mktemp("zkcluster"),
        n_brokers=2,
        zookeeper=True,
        zk_session_timeout_ms=6000,
    ) as c:
        yield c


def test_zookeeper_mode_gives_each_broker_its_own_zookeeper_proxy(zk_cluster):
    c = zk_cluster
    # The failure report has the proxy loop's stalls and the ZooKeeper JVM's pauses.
    tails = c.log_tails()
    assert "==== the test process's proxy loop: stalls over 1 s ====" in tails
    assert "==== zookeeper JVM pauses over 0.5 s" in tails
    assert c.zookeeper.gc_log.exists()  # written from the JVM's start
    assert all("Safepoint" in line for line in c.zookeeper.long_pauses(0.0))
    assert c.zookeeper is not None and c.zookeeper.ok()
    for i in (1, 2):
        o = c.broker(i).overrides
        assert o["zookeeper.connect"] == f"127.0.0.1:{c.zk_proxies[i].port}{c.chroot}"
        assert o["zookeeper.session.timeout.ms"] == "6000"
        assert o["broker.id"] == str(i) and o["inter.broker.listener.name"] == "INTERNAL"
        assert (
            o["advertised.listeners"]
            == f"CLIENT://{c.bootstrap(i)},INTERNAL://{c.internal_proxies[i].address}"
        )
        assert c.broker(i).alive()
    assert c.node_names == ["zk", "b1", "b2"]


def test_a_cut_zookeeper_proxy_suspends_only_its_client(zk_cluster):
    from kazoo.client import KazooClient, KazooState

    c = zk_cluster
    clients, states = {}, {}
    for node in ("b1", "b2"):
        proxy = c.add_zk_proxy(node)
        k = KazooClient(
            hosts=proxy.address,
            timeout=1.5,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5},
        )
        states[node] = []
        k.add_listener(states[node].append)
        k.start(10)
        clients[node] = k
    try:
        c.net.partition("b1", "zk")
        wait_until(
            lambda: KazooState.SUSPENDED in states["b1"], 15, message="b1's kazoo client suspended"
        )
        assert clients["b2"].get_children("/") is not None
        assert KazooState.SUSPENDED not in states["b2"] and clients["b2"].connected
        c.net.heal()
        wait_until(lambda: clients["b1"].connected, 20, message="b1's kazoo client connected again")
        assert clients["b1"].get_children("/") is not None
    finally:
        c.net.heal()
        for k in clients.values():
            k.stop()
            k.close()


def test_zookeeper_process_pauses_and_restarts(zk_cluster):
    from kazoo.client import KazooClient

    c = zk_cluster
    zk = c.node("zk")
    k = KazooClient(
        hosts=c.add_zk_proxy("client").address,
        timeout=3,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5},
    )
    k.start(10)
    try:
        k.ensure_path("/harness")
        zk.pause()
        assert not zk.ok()
        zk.resume()
        wait_until(zk.ok, 10, message="ZooKeeper answering after SIGCONT")
        zk.restart()
        assert zk.ok()
        zk.restart(hard=True)
        assert zk.ok()
        wait_until(lambda: k.connected, 20, message="kazoo reconnected")
        assert k.exists("/harness") is not None  # the data dir survived both restarts
    finally:
        k.stop()
        k.close()
