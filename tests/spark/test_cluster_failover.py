"""The Spark source's network reader against three real brokers and a real ZooKeeper
(tests/cluster/harness): a topic with replication factor 3, min.insync.replicas 2 and
three partitions, filled with acks=all; the leader of a partition is SIGKILLed while
its records are being read, and every acknowledged record is read exactly once
(the same set and count of (partition, offset, value) as produced).

Each fetch asks for one record batch (``kafka.max.partition.fetch.bytes=1``), so a
partition takes dozens of fetches. The reader's own iterator is stopped after a few
batches to kill the leader; the Spark query is slowed (every chunk between the
client and the brokers delayed) and the leader is killed once the client proxy of that
broker has delivered a quarter of the partition's bytes. Nothing here asserts timings.

A leader moved by a preferred-replica election, its old leader alive, answers the
client's next fetch with NOT_LEADER_OR_FOLLOWER and a KIP-951 hint, which the client
follows without asking for metadata.

Scripted leader changes (hints, epochs, a lagging high watermark):
tests/spark/test_leader_routing.py.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import logstore
from logstore.spark.kafka_client import KafkaClient
from logstore.spark.network_reader import NetworkLog
from logstore.spark.offset_range import OffsetRange, RecordBounds
from logstore.spark.options import NetworkSettings
from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.support.waiting import wait_until

SESSION_MS = 4000
OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
}
TOPIC = "spark-failover"
PARTITIONS = 3
PER_PARTITION = 600
VALUE_SIZE = 200
RETRY_BUDGET_MS = (
    120_000  # far longer than an election takes here (a 4 s ZooKeeper session, then the controller)
)

Record = tuple[int, int, bytes]  # (partition, offset, value)


@pytest.fixture
def filled(request, tmp_path):
    """The cluster and every record it acknowledged, as (partition, offset, value)."""
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=OVERRIDES)
    with c, logs_on_failure(request, c, 80):
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            30,
            message="three brokers registered",
        )
        c.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=3,
            config={"min.insync.replicas": "2"},
            timeout=60,
        )
        yield c, produce(c)


def produce(c: Cluster) -> list[Record]:
    """PER_PARTITION records into each partition with acks=all, in small batches."""
    p = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 2048,
            "message.timeout.ms": 60000,
        }
    )
    acked: list[Record] = []
    errors = []

    def done(err, msg) -> None:  # noqa: ANN001
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(err)

    for i in range(PER_PARTITION):
        for part in range(PARTITIONS):
            p.produce(
                TOPIC,
                value=f"p{part} r{i:05d} ".encode().ljust(VALUE_SIZE, b"."),
                partition=part,
                on_delivery=done,
            )
        p.poll(0)
    assert p.flush(120) == 0
    assert not errors, errors[:5]
    assert len(acked) == PARTITIONS * PER_PARTITION
    for part in range(PARTITIONS):
        wait_everywhere(
            c, part, lambda _leader, isr: isr == [1, 2, 3], f"{TOPIC}-{part} fully replicated"
        )
    return acked


def leader_of(c: Cluster, partition: int) -> int:
    return faults.target_broker(c, "leader", TOPIC, partition)


def views(c: Cluster, partition: int) -> list[tuple[int, list[int]] | None]:
    """(leader, sorted ISR) of the partition in each running broker's metadata; None
    where a broker does not answer for it (e.g. just started: no UpdateMetadata yet)."""
    out: list[tuple[int, list[int]] | None] = []
    for b in c.brokers:
        if not b.alive():
            continue
        try:
            md = (
                AdminClient({"bootstrap.servers": c.bootstrap(b.id)})
                .list_topics(TOPIC, timeout=5)
                .topics[TOPIC]
            )
            p = md.partitions[partition]
            out.append(
                None if md.error is not None or p.error is not None else (p.leader, sorted(p.isrs))
            )
        except Exception:  # noqa: BLE001 - a broker starting or stopping
            out.append(None)
    return out


def wait_everywhere(c: Cluster, partition: int, want, what: str) -> None:  # noqa: ANN001
    """Until every running broker's metadata of the partition satisfies ``want(leader, isr)``."""
    wait_until(lambda: all(v is not None and want(*v) for v in views(c, partition)), 90, 0.2, what)


def settings() -> NetworkSettings:
    return NetworkSettings(fetch_max_bytes=1, retry_timeout_s=RETRY_BUDGET_MS / 1000)


def check_exactly_once(read: list[Record], produced: list[Record]) -> None:
    assert len(read) == len(produced), (len(read), len(produced))
    assert len(set(read)) == len(read), "a record was read twice"
    assert set(read) == set(produced)


def test_network_reader_rides_over_a_killed_leader(filled):
    c, produced = filled
    victim = leader_of(c, 0)
    log = NetworkLog(c.bootstrap_servers, settings())
    spans = {p: log.offsets(TOPIC, p) for p in range(PARTITIONS)}
    log.close()
    assert spans == {p: (0, PER_PARTITION) for p in range(PARTITIONS)}

    read: list[Record] = []
    killed_at = None
    for p in range(PARTITIONS):
        r = OffsetRange(TOPIC, p, *spans[p])
        for batch in log.read(
            r, RecordBounds(), include_headers=False, fail_on_data_loss=True, max_rows=65536
        ):
            rows = batch.to_pydict()
            read += [(p, o, v) for o, v in zip(rows["offset"], rows["value"], strict=True)]
            if p == 0 and killed_at is None and rows["offset"][-1] >= 50:
                killed_at = rows["offset"][-1] + 1
                c.broker(victim).kill()
    assert killed_at is not None and killed_at < PER_PARTITION  # the kill came mid-read
    check_exactly_once(read, produced)
    assert leader_of(c, 0) != victim


def test_spark_read_rides_over_a_killed_leader(spark, filled):
    c, produced = filled
    victim = leader_of(c, 0)
    led = [p for p in range(PARTITIONS) if leader_of(c, p) == victim]
    proxy = c.client_proxies[victim]

    def delivered() -> int:
        return proxy.stats.delivered.get((f"b{victim}", "client"), 0)

    c.net.delay("client", [b.name for b in c.brokers], 20)  # every fetch takes a while
    df = (
        spark.read.format("logstore")
        .option("kafka.bootstrap.servers", c.bootstrap_servers)
        .option("topics", TOPIC)
        .option("kafka.max.partition.fetch.bytes", "1")
        .option("kafka.default.api.timeout.ms", str(RETRY_BUDGET_MS))
        .load()
        .select("partition", "offset", "value")
    )
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["rows"] = df.collect()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            outcome["error"] = e

    partition_bytes = PER_PARTITION * VALUE_SIZE
    before = delivered()
    reader = threading.Thread(target=run, name="spark-collect", daemon=True)
    reader.start()
    wait_until(
        lambda: delivered() - before >= partition_bytes // 4 or not reader.is_alive(),
        240,
        0.01,
        f"a quarter of b{victim}'s partition read",
    )
    at_kill = delivered() - before
    assert reader.is_alive(), f"the read ended before the kill: {outcome.get('error')!r}"
    others = {
        b.id: c.client_proxies[b.id].stats.delivered.get((b.name, "client"), 0)
        for b in c.brokers
        if b.id != victim
    }
    c.broker(victim).kill()
    assert at_kill < len(led) * partition_bytes  # some of what b{victim} leads was still unread
    reader.join(280)
    assert not reader.is_alive(), "the Spark read did not finish"
    assert "error" not in outcome, outcome.get("error")
    rows = outcome["rows"]
    check_exactly_once([(r["partition"], r["offset"], bytes(r["value"])) for r in rows], produced)  # type: ignore[union-attr]
    new_leaders = {p: leader_of(c, p) for p in led}
    assert victim not in new_leaders.values()
    for b in set(new_leaders.values()):  # the reader went on at the new leaders
        assert c.client_proxies[b].stats.delivered.get((f"b{b}", "client"), 0) > others[b]


class CountingClient(KafkaClient):
    """Counts its Metadata rounds."""

    metadata_rounds = 0

    def _refresh_metadata(self, topics):  # noqa: ANN001, ANN202
        self.metadata_rounds += 1
        return super()._refresh_metadata(topics)


def test_client_follows_a_real_brokers_leader_hint(filled):
    c, produced = filled
    values = {(p, o): v for p, o, v in produced}
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    preferred = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].replicas[0]

    def first_value(fetched) -> tuple[int, bytes]:  # noqa: ANN001
        [batch, *_] = logstore.decode_batches(fetched.records)
        return batch.records[0].offset, batch.records[0].value

    with CountingClient(
        c.bootstrap_servers, max_attempts=None, retry_timeout_s=RETRY_BUDGET_MS / 1000
    ) as kc:
        fetched = kc.fetch_records(TOPIC, 0, 0, 1)
        if fetched.leader == preferred:  # move the leadership away: a controlled shutdown
            c.broker(preferred).terminate()
            fetched = kc.fetch_records(TOPIC, 0, 0, 1)
            assert fetched.leader != preferred
            c.broker(preferred).start()
            wait_everywhere(
                c,
                0,
                lambda _leader, isr: preferred in isr,
                f"b{preferred} back in the ISR of {TOPIC}-0",
            )
        interim = fetched.leader
        assert first_value(fetched) == (0, values[(0, 0)])
        elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
        assert all(error is None for error in elected.values()), elected
        wait_everywhere(
            c,
            0,
            lambda leader, _isr: leader == preferred,
            f"b{preferred} leading {TOPIC}-0 everywhere",
        )
        before = kc.metadata_rounds
        fetched = kc.fetch_records(TOPIC, 0, 100, 1)  # asked of the interim leader first
        assert (fetched.leader, kc.metadata_rounds) == (preferred, before)
        offset, value = first_value(fetched)
        assert offset <= 100 and value == values[(0, offset)]
        assert interim != preferred
