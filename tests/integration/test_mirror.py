"""``logstore mirror`` between two real brokers on loopback: topics, configs, new
partitions and topics, MM2's internal topics, checkpoints and group offset sync,
exactly-once across SIGKILLs, and two processes sharing (and taking over) the work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from logstore.cli.app import main
from logstore.mirror.checkpoints import Checkpoint
from logstore.mirror.heartbeats import Heartbeat
from logstore.mirror.offset_syncs import OffsetSync
from tests.integration.conftest import BrokerProcess
from tests.support import processes
from tests.support.ports import free_port
from tests.support.waiting import wait_until

FAST = [
    "refresh.topics.interval.seconds=1",
    "sync.topic.configs.interval.seconds=1",
    "emit.checkpoints.interval.seconds=1",
    "sync.group.offsets.interval.seconds=1",
    "offset.flush.interval.ms=500",
]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    # short consumer-group sessions: a killed mirror process's partitions move quickly
    a = BrokerProcess(
        str(tmp_path_factory.mktemp("source")), {"group.min.session.timeout.ms": "1000"}
    )
    b = BrokerProcess(str(tmp_path_factory.mktemp("target")))
    a.start()
    b.start()
    yield a, b
    a.kill()
    b.kill()


class Mirror:
    def __init__(self, workdir, args):
        self.args = args
        self.err = os.path.join(workdir, f"mirror-{time.monotonic_ns()}.log")
        self.proc = None

    def launch(self):
        with open(self.err, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logstore", "mirror", *self.args],
                stdout=subprocess.PIPE,
                stderr=err,
                env=processes.repo_env(),
            )
        return self

    def running(self):
        ok, out = processes.wait_for_output(self.proc, b": running", 60)
        assert ok, (out, self.log())
        return self

    def start(self):
        return self.launch().running()

    def log(self):
        with open(self.err, errors="replace") as f:
            return f.read()[-4000:]

    def kill(self):
        processes.kill(self.proc)

    def stop(self):
        assert processes.terminate(self.proc) == 0, self.log()


def mirror_args(a, b, src, tgt, topics, *extra):
    args = ["--source", a.bootstrap, "--target", b.bootstrap, "--source-alias", src]
    args += ["--target-alias", tgt, "--topics", topics]
    for s in [*FAST, *extra]:
        args += ["--set", s]
    return args


def create(bootstrap, topic, partitions, configs=None):
    adm = AdminClient({"bootstrap.servers": bootstrap})
    for f in adm.create_topics([NewTopic(topic, partitions, 1, config=configs or {})]).values():
        f.result()


def read_all(bootstrap, topic, partitions, timeout=30.0):
    """Every record of ``topic`` per partition, read_committed, to the end offsets."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
    c.assign(tps)
    out = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            pos = {tp.partition: tp.offset for tp in c.position(tps)}
            if all(ends[p] == 0 or pos[p] >= ends[p] for p in ends):
                break
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                out[m.partition()].append(m)
    finally:
        c.close()
    return out


def test_mirror_topics_configs_offsets_and_internal_topics(clusters, tmp_path, capsys):
    a, b = clusters
    create(a.bootstrap, "orders", 2, {"retention.ms": "86400000", "cleanup.policy": "delete"})
    p = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True})
    for i in range(400):
        p.produce(
            "orders",
            b"v%d" % i,
            b"k%d" % i,
            partition=i % 2,
            timestamp=1_700_000_000_000 + i,
            headers=[("h", b"%d" % i)],
        )
    p.flush(10)
    # a consumer group on the source has read partition 0 up to offset 150
    src_admin = AdminClient({"bootstrap.servers": a.bootstrap})
    g = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "billing"})
    g.commit(offsets=[TopicPartition("orders", 0, 150)], asynchronous=False)
    g.close()

    port = free_port()
    args = mirror_args(a, b, "A1", "B1", "orders.*", "offset.lag.max=10")
    args += ["--set", "sync.group.offsets.enabled=true", "--metrics-port", str(port)]
    m = Mirror(str(tmp_path), args).start()
    tgt_admin = AdminClient({"bootstrap.servers": b.bootstrap})
    try:
        got = wait_until(
            lambda: (
                (r := read_all(b.bootstrap, "A1.orders", 2))
                and sum(map(len, r.values())) == 400
                and r
            ),
            30,
            message="400 records on the target",
        )
        want = read_all(a.bootstrap, "orders", 2)
        for part in (0, 1):
            assert [(x.key(), x.value(), x.headers(), x.timestamp()) for x in got[part]] == [
                (x.key(), x.value(), x.headers(), x.timestamp()) for x in want[part]
            ]

        def target_configs(topic):
            res = ConfigResource(ResourceType.TOPIC, topic)
            return {k: e.value for k, e in tgt_admin.describe_configs([res])[res].result().items()}

        assert target_configs("A1.orders")["retention.ms"] == "86400000"

        # a config change, new partitions and a new matching topic while it runs
        op = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[op])
        for f in src_admin.incremental_alter_configs([res]).values():
            f.result()
        for f in src_admin.create_partitions([NewPartitions("orders", 3)]).values():
            f.result()
        create(a.bootstrap, "orders-eu", 1, {"cleanup.policy": "compact"})
        p = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True})
        p.produce("orders", b"late", partition=2)
        p.produce("orders-eu", b"eu", b"k")
        p.flush(10)
        wait_until(
            lambda: target_configs("A1.orders").get("retention.ms") == "3600000",
            20,
            message="the config change on the target",
        )
        wait_until(
            lambda: [x.value() for x in read_all(b.bootstrap, "A1.orders", 3)[2]] == [b"late"],
            20,
            message="the new partition's record on the target",
        )
        wait_until(
            lambda: [x.value() for x in read_all(b.bootstrap, "A1.orders-eu", 1)[0]] == [b"eu"],
            20,
            message="the new topic on the target",
        )
        assert target_configs("A1.orders-eu")["cleanup.policy"] == "compact"

        # checkpoints on the target; group offsets synced to the idle target group
        def checkpoint():
            recs = read_all(b.bootstrap, "A1.checkpoints.internal", 1)[0]
            cps = [Checkpoint.decode(r.key(), r.value()) for r in recs]
            return [c for c in cps if c.group == "billing" and c.topic == "A1.orders"]

        cp = wait_until(checkpoint, 20, message="a checkpoint of billing")[-1]
        assert (cp.partition, cp.upstream_offset) == (0, 150)
        assert 150 - 11 <= cp.downstream_offset <= 150  # never past: nothing skipped

        def synced():
            from confluent_kafka import ConsumerGroupTopicPartitions

            r = tgt_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("billing")])
            return {
                (t.topic, t.partition): t.offset
                for t in r["billing"].result().topic_partitions
                if t.offset >= 0
            }

        assert wait_until(synced, 20, message="billing's offsets on the target") == {
            ("A1.orders", 0): cp.downstream_offset
        }
        cli = ["mirror", "translate-offsets", "--json", "--group", "billing", *args[:6]]
        assert main(cli) == 0
        out = capsys.readouterr()
        rows = json.loads(out.out)["offsets"]
        assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
            ("A1.orders", 0, cp.downstream_offset)
        ]

        # MM2's internal topics parse as MM2 writes them
        hb = [
            Heartbeat.decode(r.key(), r.value()) for r in read_all(b.bootstrap, "heartbeats", 1)[0]
        ]
        assert any((h.source, h.target) == ("A1", "B1") for h in hb)
        syncs = [
            OffsetSync.decode(r.key(), r.value())
            for r in read_all(a.bootstrap, "mm2-offset-syncs.B1.internal", 1)[0]
        ]
        assert {(s.topic, s.partition) for s in syncs} >= {("orders", 0), ("orders", 1)}
        assert all(s.upstream_offset == s.downstream_offset for s in syncs)
        # offset.lag.max=10: syncs at 0, 11, ..., 198; the last record's pair is the
        # delayed sync, sent at a commit while no record comes
        assert {(s.upstream_offset, s.partition) for s in syncs if s.topic == "orders"} >= {
            (0, 0),
            (11, 0),
            (198, 0),
            (199, 0),
        }

        def status():
            assert main(["mirror", "status", "--json", *args[:10]]) == 0
            out = capsys.readouterr()
            topics = {t["topic"]: t for t in json.loads(out.out)["topics"]}
            return topics["orders"]["lag"] == 0 and topics

        # the mirror's group commits what the target acknowledged, also when idle
        topics = wait_until(status, 20, message="no lag")
        assert set(topics) == {"orders", "orders-eu"}
        assert topics["orders"]["remote"] == "A1.orders"
        assert topics["orders"]["source_end"] == topics["orders"]["target_end"] == 401
        assert topics["orders"]["copied"] == 401

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        for name in (
            "record_count",
            "record_age_ms",
            "replication_latency_ms",
            "byte_rate",
        ):
            assert f"kafka_connect_mirror_mirrorsourceconnector_{name}{{" in text
        assert "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms{" in text
        assert 'topic="A1.orders"' in text
    finally:
        m.stop()


class SteadyProducer(threading.Thread):
    """An idempotent producer writing numbered values round-robin over partitions."""

    def __init__(self, bootstrap, topic, partitions, pause=0.01):
        super().__init__(daemon=True)
        self.pause = pause
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.topic = topic
        self.partitions = partitions
        self.halt = threading.Event()
        self.sent = 0

    def run(self):
        while not self.halt.is_set():
            for _ in range(50):
                self.p.produce(self.topic, b"%d" % self.sent, partition=self.sent % self.partitions)
                self.sent += 1
            self.p.poll(0)
            time.sleep(self.pause)
        self.p.flush(30)

    def stop(self):
        self.halt.set()
        self.join(30)


def test_exactly_once_survives_sigkill_with_an_exact_copy(clusters, tmp_path):
    a, b = clusters
    create(a.bootstrap, "payments", 2)
    prod = SteadyProducer(a.bootstrap, "payments", 2)
    prod.start()
    args = mirror_args(a, b, "A2", "B2", "payments", "emit.checkpoints.enabled=false")
    args.append("--exactly-once")
    m = Mirror(str(tmp_path), args).start()
    try:
        for _ in range(2):
            wait_until(
                lambda: sum(map(len, read_all(b.bootstrap, "A2.payments", 2).values())) > 0,
                20,
                message="records copied",
            )
            time.sleep(0.5)  # let transactions be in flight when the kill lands
            m.kill()
            m = Mirror(str(tmp_path), args).start()
        prod.stop()
        want = read_all(a.bootstrap, "payments", 2)
        total = sum(map(len, want.values()))
        assert total == prod.sent

        def copied():
            got = read_all(b.bootstrap, "A2.payments", 2)
            return sum(map(len, got.values())) >= total and got

        got = wait_until(copied, 30, message=f"{total} records on the target")
        for part in (0, 1):
            assert [x.value() for x in got[part]] == [x.value() for x in want[part]]
    finally:
        prod.stop()
        m.stop()


def test_two_processes_share_partitions_and_one_takes_over(clusters, tmp_path):
    a, b = clusters
    create(a.bootstrap, "clicks", 4)
    prod = SteadyProducer(a.bootstrap, "clicks", 4, pause=0.05)
    prod.start()
    args = mirror_args(
        a,
        b,
        "A3",
        "B3",
        "clicks",
        "emit.checkpoints.enabled=false",
        "A3.consumer.session.timeout.ms=2000",
        "A3.consumer.heartbeat.interval.ms=300",
    )
    m1 = Mirror(str(tmp_path), [*args, "--instance-id", "1"]).launch()
    m2 = Mirror(str(tmp_path), [*args, "--instance-id", "2"]).launch()
    m1.running()
    m2.running()
    adm = AdminClient({"bootstrap.servers": a.bootstrap})
    group = "logstore-mirror-A3-B3"

    def assignments():
        d = adm.describe_consumer_groups([group])[group].result()
        return sorted(len(mem.assignment.topic_partitions) for mem in d.members)

    try:
        wait_until(
            lambda: assignments() == [2, 2], 30, message="two processes, two partitions each"
        )
        m1.kill()
        wait_until(lambda: assignments() == [4], 30, message="the survivor owns all four")
        prod.stop()
        want = read_all(a.bootstrap, "clicks", 4)

        def arrived():
            got = read_all(b.bootstrap, "A3.clicks", 4)
            complete = all(
                {x.value() for x in got[p]} >= {x.value() for x in want[p]} for p in range(4)
            )
            return complete and got

        got = wait_until(arrived, 30, message="every record on the target")
        for part in range(4):
            values = [x.value() for x in got[part]]
            source = [x.value() for x in want[part]]
            # at-least-once: every record, in order; duplicates only as one re-copied
            # stretch, where the killed process's uncommitted records were copied again
            assert list(dict.fromkeys(values)) == source
            index = {v: i for i, v in enumerate(source)}
            steps = [index[b] - index[a] for a, b in zip(values, values[1:])]
            assert all(s <= 1 for s in steps) and sum(1 for s in steps if s < 1) <= 1
    finally:
        prod.stop()
        m1.kill()
        m2.stop()
