"""A log dir that fills up (KIP-112), on three real brokers and a real ZooKeeper: the
broker takes the dir offline, tells the controller through
``/log_dir_event_notification``, and the controller moves leadership to another in-sync
replica and drops the broker from the ISRs at once; with every dir failed the broker
halts. The disks are small tmpfs mounts the test makes (root), filled by the test while
an acks=all idempotent producer writes; afterwards every acknowledged record is read
back from the new leader.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from tests.cluster.harness.cluster import Cluster
from tests.support import tmpfs
from tests.support.ports import free_port
from tests.support.waiting import wait_until

SESSION_MS = 6000
TMPFS_MB = 24
RESUME_S = 15  # acknowledgements resume within this long after the disk fills
KAFKA_STORAGE_ERROR = 56

pytestmark = pytest.mark.timeout(240)


class AckedProducer:
    """An acks=all idempotent producer writing to ``partitions`` of ``topic`` on its own
    thread; every acknowledgement is kept as (monotonic time, partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.acked: list[tuple[float, int, int, bytes]] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acked-producer", daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append((time.monotonic(), msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and i < 200_000:
            for p in self.partitions:
                self.producer.produce(
                    self.topic, b"v%08d" % i, partition=p, on_delivery=self._on_delivery
                )
            i += 1
            self.producer.poll(0.005)
        self.producer.flush(120)

    def __enter__(self) -> AckedProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)

    def acks_since(self, t: float, partition: int) -> int:
        return sum(1 for at, p, _, _ in self.acked if at >= t and p == partition)

    def longest_gap_after(self, t: float, partition: int) -> float:
        """The longest time without an acknowledgement of ``partition`` from ``t`` on."""
        times = [t] + sorted(at for at, p, _, _ in self.acked if at >= t and p == partition)
        return max(b - a for a, b in zip(times, times[1:])) if len(times) > 1 else float("inf")


def _cluster(tmp_path: Path, log_dirs: dict[int, list[Path]], metrics: dict[int, int]) -> Cluster:
    per_broker: dict[int, dict[str, str]] = {}
    for b, dirs in log_dirs.items():
        per_broker[b] = {"log.dirs": ",".join(str(d) for d in dirs)}
    for b, port in metrics.items():
        per_broker.setdefault(b, {})["metrics.port"] = str(port)
    return Cluster(
        tmp_path / "cluster",
        n_brokers=3,
        zk_session_timeout_ms=SESSION_MS,
        overrides={
            "replica.lag.time.max.ms": "30000",  # Kafka's: only the failure channel is quick
            "auto.leader.rebalance.enable": "false",
            "controlled.shutdown.retry.backoff.ms": "200",
            "log.segment.bytes": str(1 << 20),
        },
        broker_overrides=per_broker,
    )


def _create(c: Cluster, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30, 0.2, "3 brokers")
    admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=len(assignment),
                replication_factor=-1,
                replica_assignment=assignment,
                config={"min.insync.replicas": "2"},
            )
        ]
    )[topic].result(20)
    wait_until(lambda: _full_isrs(c, topic, len(assignment)), 30, 0.2, f"full ISRs of {topic}")


def _state(c: Cluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(topic, timeout=5)
    return {p.id: (p.leader, sorted(p.isrs)) for p in md.topics[topic].partitions.values()}


def _full_isrs(c: Cluster, topic: str, partitions: int) -> bool:
    try:
        state = _state(c, topic)
    except Exception:  # noqa: BLE001 - a broker going down or up; ask again
        return False
    return len(state) == partitions and all(len(isr) == 3 for _, isr in state.values())


def _moved_off(c: Cluster, topic: str, partition: int, broker: int) -> bool:
    try:
        leader, isr = _state(c, topic)[partition]
    except Exception:  # noqa: BLE001
        return False
    return leader >= 0 and leader != broker and broker not in isr


def _read_back(c: Cluster, topic: str, partition: int) -> dict[int, bytes]:
    """Every record of the partition, offset -> value, read from its leader."""
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "group.id": f"check-{topic}-{partition}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            for m in consumer.consume(1000, 1.0):
                if m.error() is None:
                    out[m.offset()] = m.value()
        return out
    finally:
        consumer.close()


def _check_nothing_lost(c: Cluster, topic: str, producer: AckedProducer, partition: int) -> None:
    acked = {o: v for _, p, o, v in producer.acked if p == partition}
    assert acked, "nothing was acknowledged"
    stored = _read_back(c, topic, partition)
    missing = [o for o in acked if stored.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"


def _dir_errors(c: Cluster, broker: int) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap(broker))
    try:
        described = admin.describe_log_dirs()
    finally:
        admin.close()
    (mine,) = [d for d in described if d.get("broker", broker) == broker][:1]
    return {d["log_dir"]: d["error_code"] for d in mine["log_dirs"]}


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def _metric_lines(port: int, name: str) -> list[str]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return [line for line in text.splitlines() if line.startswith((name + " ", name + "{"))]


def _elections(ports: dict[int, int]) -> float:
    """Leader elections (broker changes) the controllers of the cluster handled."""
    name = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
    return sum(_metric(p, name) for p in ports.values())


def test_leader_disk_full_moves_leadership_and_acks_resume(tmp_path):
    disk = tmp_path / "b1-small"
    other = tmp_path / "b1-other"
    other.mkdir()
    ports = {b: free_port() for b in (1, 2, 3)}
    port = ports[1]
    with tmpfs.mounted_tmpfs(disk, TMPFS_MB):
        with _cluster(tmp_path, {1: [disk, other]}, ports) as c:
            _create(c, "df", [[1, 2, 3]])
            assert (disk / "df-0").is_dir(), "the partition went to the first (emptiest) dir"
            with AckedProducer(c.bootstrap_servers, "df", [0]) as producer:
                wait_until(lambda: producer.acks_since(0, 0) > 200, 30, 0.1, "acks before")
                filled = time.monotonic()
                tmpfs.fill(disk)
                wait_until(
                    lambda: _moved_off(c, "df", 0, 1), RESUME_S, 0.1, "leadership moved off b1"
                )
                moved = time.monotonic() - filled
                wait_until(
                    lambda: producer.acks_since(filled + moved, 0) > 100,
                    RESUME_S,
                    0.1,
                    "acks from the new leader",
                )
                time.sleep(1)
            gap = producer.longest_gap_after(filled, 0)
            print(f"leader disk full: leadership moved in {moved:.2f} s, acks paused {gap:.2f} s")
            assert gap < RESUME_S, f"acks stalled {gap:.1f} s"
            assert c.broker(1).alive(), "b1 keeps its other, healthy log dir"
            assert not (other / "df-0").exists(), "the failed dir's partition is not made anew"
            errors = _dir_errors(c, 1)
            assert errors == {str(disk): KAFKA_STORAGE_ERROR, str(other): 0}
            assert _metric(port, "kafka_log_logmanager_offlinelogdirectorycount") == 1
            assert f"log dir {disk} is offline" in c.broker(1).log_text()
            _check_nothing_lost(c, "df", producer, 0)
            assert not producer.failed, producer.failed[:3]
            # Back only through a restart, with room again: recovered and caught up.
            tmpfs.free(disk)
            elections = _elections({b: p for b, p in ports.items() if b != 1})
            c.broker(1).restart()
            wait_until(lambda: _full_isrs(c, "df", 1), 60, 0.2, "b1 back in the ISR")
            assert _dir_errors(c, 1) == {str(disk): 0, str(other): 0}
            # The controller handled b1's restart as a broker change (its election timer),
            # and b1 follows df-0 again: its fetcher reports the partition's lag.
            wait_until(lambda: _elections(ports) > elections, 30, 0.5, "an election counted")
            lags = wait_until(
                lambda: _metric_lines(port, "kafka_server_fetcherlagmetrics_consumerlag"),
                30,
                0.5,
                "b1's fetcher lag of df-0",
            )
            assert any('topic="df"' in line and 'partition="0"' in line for line in lags), lags
            assert _metric(port, "kafka_server_replicafetchermanager_maxlag") >= 0


def test_follower_disk_full_leaves_the_isr_and_acks_resume(tmp_path):
    disk = tmp_path / "b3-small"
    other = tmp_path / "b3-other"
    other.mkdir()
    with tmpfs.mounted_tmpfs(disk, TMPFS_MB):
        with _cluster(tmp_path, {3: [disk, other]}, {}) as c:
            _create(c, "ff", [[1, 2, 3]])
            assert (disk / "ff-0").is_dir()
            with AckedProducer(c.bootstrap_servers, "ff", [0]) as producer:
                wait_until(lambda: producer.acks_since(0, 0) > 200, 30, 0.1, "acks before")
                filled = time.monotonic()
                tmpfs.fill(disk)
                wait_until(
                    lambda: _state(c, "ff")[0] == (1, [1, 2]), RESUME_S, 0.1, "b3 out of the ISR"
                )
                wait_until(
                    lambda: producer.acks_since(time.monotonic() - 1, 0) > 50,
                    RESUME_S,
                    0.1,
                    "acks go on",
                )
            gap = producer.longest_gap_after(filled, 0)
            print(f"follower disk full: acks paused {gap:.2f} s")
            assert gap < RESUME_S, f"acks stalled {gap:.1f} s"
            assert c.broker(3).alive(), "b3 keeps its other, healthy log dir"
            assert not (other / "ff-0").exists(), "the failed dir's partition is not made anew"
            assert _dir_errors(c, 3) == {str(disk): KAFKA_STORAGE_ERROR, str(other): 0}
            _check_nothing_lost(c, "ff", producer, 0)
            tmpfs.free(disk)
            c.broker(3).restart()
            wait_until(lambda: _full_isrs(c, "ff", 1), 60, 0.2, "b3 back in the ISR")


def test_both_dirs_of_a_broker_fail_one_after_the_other(tmp_path):
    first, second = tmp_path / "b1-first", tmp_path / "b1-second"
    with tmpfs.mounted_tmpfs(first, TMPFS_MB), tmpfs.mounted_tmpfs(second, TMPFS_MB):
        with _cluster(tmp_path, {1: [first, second]}, {}) as c:
            _create(c, "two", [[1, 2, 3], [1, 3, 2]])
            on_first = 0 if (first / "two-0").is_dir() else 1
            assert (second / f"two-{1 - on_first}").is_dir(), "one partition per dir"
            with AckedProducer(c.bootstrap_servers, "two", [0, 1]) as producer:
                wait_until(lambda: producer.acks_since(0, 1) > 200, 30, 0.1, "acks before")
                filled = time.monotonic()
                tmpfs.fill(first)
                wait_until(
                    lambda: _moved_off(c, "two", on_first, 1), RESUME_S, 0.1, "first dir's move"
                )
                state = _state(c, "two")
                assert state[1 - on_first][0] == 1, "the second dir's partition stays on b1"
                assert c.broker(1).alive()
                second_filled = time.monotonic()
                tmpfs.fill(second)
                wait_until(lambda: not c.broker(1).alive(), RESUME_S, 0.1, "b1 halted")
                wait_until(
                    lambda: _moved_off(c, "two", 1 - on_first, 1),
                    RESUME_S,
                    0.1,
                    "second dir's move",
                )
                wait_until(
                    lambda: producer.acks_since(time.monotonic() - 1, 1 - on_first) > 50,
                    RESUME_S,
                    0.1,
                    "acks go on",
                )
            gaps = (
                producer.longest_gap_after(filled, on_first),
                producer.longest_gap_after(second_filled, 1 - on_first),
            )
            print(f"both dirs: acks paused {gaps[0]:.2f} s, then {gaps[1]:.2f} s (halt)")
            assert max(gaps) < RESUME_S, f"acks stalled {gaps}"
            assert c.broker(1).proc.wait(10) == 1, "halted with status 1"
            assert "all log dirs" in c.broker(1).log_text()
            for p in (0, 1):
                _check_nothing_lost(c, "two", producer, p)
