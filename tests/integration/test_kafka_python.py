"""kafka-python against a real broker: produce/consume with every codec, admin (topics,
partitions, configs), offsets for times, fetch edge cases, DeleteRecords and restarts."""

from __future__ import annotations

import os
import re
import threading
import time

import kafka.codec
import kafka.errors as Errors
import pytest
from kafka import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
    TopicPartitionReplica,
)
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.structs import OffsetAndMetadata

from tests.integration.clients import (
    Rec,
    assert_partition_contents,
    assert_stored_codec,
    now_ms,
    sample_records,
    stored_batches,
    topic_name,
    wait_until,
    wire_call,
)

CODEC_LIBS = {
    "none": (lambda: True, None),
    "gzip": (kafka.codec.has_gzip, None),
    "snappy": (kafka.codec.has_snappy, "python-snappy"),
    "lz4": (kafka.codec.has_lz4, "lz4"),
    "zstd": (kafka.codec.has_zstd, "zstandard"),
}


# --- helpers ---------------------------------------------------------------------------


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def create(bootstrap: str, name: str, partitions: int, configs: dict | None = None) -> None:
    a = admin(bootstrap)
    try:
        a.create_topics(
            {
                name: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs or {},
                }
            },
            wait_for_metadata=True,
        )
    finally:
        a.close()


def producer(bootstrap: str, **extra) -> KafkaProducer:
    return KafkaProducer(
        **{"bootstrap_servers": bootstrap, "linger_ms": 20, "request_timeout_ms": 15000, **extra}
    )


def produce(
    bootstrap: str,
    topic: str,
    records,
    flush_every: int | None = None,
    p: KafkaProducer | None = None,
    **extra,
) -> list:
    """Sends ``records`` and returns their RecordMetadata in produce order."""
    own = p is None
    p = p or producer(bootstrap, **extra)
    try:
        futures = []
        for n, r in enumerate(records):
            futures.append(
                p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=list(r.headers),
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                )
            )
            if flush_every and (n + 1) % flush_every == 0:
                p.flush(30)
        p.flush(30)
        return [f.get(timeout=30) for f in futures]
    finally:
        if own:
            p.close(timeout=10)


def consumer(bootstrap: str, **extra) -> KafkaConsumer:
    conf = {
        "bootstrap_servers": bootstrap,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 15000,
    }
    conf.update(extra)
    return KafkaConsumer(**conf)


def drain(c: KafkaConsumer, count: int, timeout: float = 30) -> dict:
    """Polls until ``count`` records arrived; partition -> [(offset, key, value, headers, ts)]."""
    out: dict[int, list] = {}
    n = 0
    deadline = time.monotonic() + timeout
    while n < count:
        assert time.monotonic() < deadline, f"consumed {n}/{count}"
        for tp, recs in c.poll(timeout_ms=200).items():
            for r in recs:
                assert r.timestamp_type == 0  # CreateTime
                out.setdefault(tp.partition, []).append(
                    (r.offset, r.key, r.value, list(r.headers or []), r.timestamp)
                )
                n += 1
    # Nothing more arrives.
    assert not c.poll(timeout_ms=300), "more records than produced"
    return out


def consume_partitions(
    bootstrap: str, topic: str, partitions: int, count: int, start: int | None = None, **extra
) -> dict:
    c = consumer(bootstrap, **extra)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        if start is None:
            c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, start)
        return drain(c, count)
    finally:
        c.close()


def kp_records(partitions: int, per_partition: int, base_ts: int) -> list[Rec]:
    # kafka-python refuses null header values and records with neither key nor value.
    return sample_records(
        partitions, per_partition, base_ts, null_header_values=False, null_key_and_value=False
    )


# --- produce / consume -----------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CODEC_LIBS))
def test_round_trip_every_codec(module_broker, codec):
    has, package = CODEC_LIBS[codec]
    assert has(), f"kafka-python needs the {package!r} package for {codec} (part of the test extra)"
    topic = topic_name(f"kp-rt-{codec}")
    create(module_broker.bootstrap, topic, 3)
    records = kp_records(3, 24, now_ms() - 3_600_000)
    metas = produce(
        module_broker.bootstrap, topic, records, compression_type=None if codec == "none" else codec
    )
    per_partition: dict[int, list] = {}
    for r, m in zip(records, metas):
        assert (m.topic, m.partition, m.timestamp) == (topic, r.partition, r.timestamp)
        per_partition.setdefault(r.partition, []).append(m.offset)
    assert all(offs == list(range(len(offs))) for offs in per_partition.values()), per_partition
    consumed = consume_partitions(module_broker.bootstrap, topic, 3, len(records))
    assert_partition_contents(records, consumed)
    if codec == "none":
        assert {
            b.codec for p in range(3) for b in stored_batches(module_broker.data_dir, topic, p)
        } == {0}
    else:
        assert_stored_codec(module_broker.data_dir, topic, 3, codec)


# --- admin -----------------------------------------------------------------------------


def test_create_and_delete_topics_with_errors(module_broker):
    a = admin(module_broker.bootstrap)
    try:
        name = topic_name("kp-admin")
        r = a.create_topics(
            {name: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True
        )
        [t] = r["topics"]
        assert (t["name"], t["error_code"], t["num_partitions"], t["replication_factor"]) == (
            name,
            0,
            3,
            1,
        )
        assert t["configs"]["retention.ms"]["value"] == "604800000"
        [desc] = a.describe_topics([name])
        assert desc["error_code"] == 0 and sorted(
            p["partition_index"] for p in desc["partitions"]
        ) == [0, 1, 2]
        assert name in a.list_topics()

        with pytest.raises(Errors.TopicAlreadyExistsError):
            a.create_topics({name: {"num_partitions": 3, "replication_factor": 1}})
        for bad in ["bad name!", "x" * 250, "..", "a/b"]:
            with pytest.raises(Errors.InvalidTopicError):
                a.create_topics({bad: {"num_partitions": 1, "replication_factor": 1}})
        with pytest.raises(Errors.InvalidPartitionsError):
            a.create_topics({topic_name("kp-zero"): {"num_partitions": 0, "replication_factor": 1}})
        with pytest.raises(Errors.InvalidReplicationFactorError):
            a.create_topics({topic_name("kp-rf"): {"num_partitions": 1, "replication_factor": 2}})
        # Without a partition count the broker default (num.partitions=1) applies.
        dflt = topic_name("kp-default")
        [t] = a.create_topics({dflt: {}}, wait_for_metadata=True)["topics"]
        assert (t["error_code"], t["num_partitions"]) == (0, 1)
        # validate_only creates nothing.
        vo = topic_name("kp-vo")
        a.create_topics({vo: {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
        assert vo not in a.list_topics()

        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            a.delete_topics([topic_name("kp-nosuch")])
        r = a.delete_topics([name, dflt])
        assert sorted((t["name"], t["error_code"]) for t in r["topics"]) == sorted(
            [(name, 0), (dflt, 0)]
        )
        wait_until(lambda: name not in a.list_topics(), message="topic gone")
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            a.delete_topics([name])
        # Invalid topic configs (Kafka's validators: min.insync.replicas >= 1, ratio in [0, 1]).
        for cfg in (
            {"retention.ms": "abc"},
            {"no.such.config": "1"},
            {"min.insync.replicas": "0"},
            {"min.cleanable.dirty.ratio": "1.5"},
        ):
            with pytest.raises(Errors.InvalidConfigurationError):
                a.create_topics(
                    {
                        topic_name("kp-badcfg"): {
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "configs": cfg,
                        }
                    }
                )
    finally:
        a.close()


def test_create_partitions(module_broker):
    name = topic_name("kp-parts")
    create(module_broker.bootstrap, name, 2)
    a = admin(module_broker.bootstrap)
    try:
        r = a.create_partitions({name: 4})
        assert [x.error_code for x in r.results] == [0]
        wait_until(
            lambda: len(a.describe_topics([name])[0]["partitions"]) == 4, message="4 partitions"
        )
        for count in (1, 4):
            with pytest.raises(Errors.InvalidPartitionsError):
                a.create_partitions({name: count})
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            a.create_partitions({topic_name("kp-parts-none"): 3})
    finally:
        a.close()
    metas = produce(
        module_broker.bootstrap, name, [Rec(p, None, b"v%d" % p, [], now_ms()) for p in range(4)]
    )
    assert [(m.partition, m.offset) for m in metas] == [(0, 0), (1, 0), (2, 0), (3, 0)]


def _topic_configs(a: KafkaAdminClient, name: str) -> dict:
    r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
    return r["topic"][name]


def _logger_levels(a: KafkaAdminClient) -> dict:
    r = a.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")], config_filter="all"
    )
    return {name: (c["value"], c["config_source"]) for name, c in r["broker_logger"]["0"].items()}


def test_broker_logger_levels_change_at_runtime(module_broker):
    a = admin(module_broker.bootstrap)
    try:
        levels = _logger_levels(a)
        assert levels["root"][0] == "INFO" and levels[
            "broker_py.coordinator.group.group_coordinator"
        ] == ("INFO", "DYNAMIC_BROKER_LOGGER_CONFIG")
        r = a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER_LOGGER,
                    "0",
                    configs={
                        "broker_py.coordinator.group.group_coordinator": (
                            AlterConfigOp.SET,
                            "DEBUG",
                        )
                    },
                )
            ],
            incremental=True,
        )
        assert r == {"broker_logger": {"0": "OK"}}, r
        assert _logger_levels(a)["broker_py.coordinator.group.group_coordinator"][0] == "DEBUG"
        # A bad level or logger changes nothing, even beside a good change.
        bad = {
            "broker_py.network.socket_server": (AlterConfigOp.SET, "WARN"),
            "broker_py.coordinator.group.group_coordinator": (AlterConfigOp.SET, "LOUD"),
        }
        r = a.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=bad)], incremental=True
        )
        assert "InvalidConfigurationError" in r["broker_logger"]["0"], r
        assert _logger_levels(a)["broker_py.network.socket_server"][0] == "INFO"
        a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER_LOGGER,
                    "0",
                    configs={
                        "broker_py.coordinator.group.group_coordinator": (
                            AlterConfigOp.DELETE,
                            None,
                        )
                    },
                )
            ],
            incremental=True,
        )
        assert (
            _logger_levels(a)["broker_py.coordinator.group.group_coordinator"][0] == "INFO"
        )  # the root's again
    finally:
        a.close()


def _request_log(broker) -> list[dict]:
    """The broker's ``kafka.request.logger`` lines, parsed: api, version, client id, phases."""
    pattern = re.compile(
        r"Completed request:\{apiKey:(\w+),apiVersion:(\d+),correlationId:(\d+),"
        r"clientId:([^}]*)\} from connection \S+;(.*)"
    )
    out = []
    for line in broker.log_text().splitlines():
        if m := pattern.search(line):
            fields = dict(kv.split(":", 1) for kv in m.group(5).split(","))
            phases = {k: float(v) for k, v in fields.items() if k.endswith("Time")}
            out.append(
                {"api": m.group(1), "version": int(m.group(2)), "client": m.group(4), **phases}
            )
    return out


def _set_request_logger(a: KafkaAdminClient, level: str | None) -> None:
    op = (AlterConfigOp.SET, level) if level is not None else (AlterConfigOp.DELETE, None)
    r = a.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.BROKER_LOGGER, "0", configs={"kafka.request.logger": op}
            )
        ],
        incremental=True,
    )
    assert r == {"broker_logger": {"0": "OK"}}, r


def test_request_log_times_each_request_while_turned_on(broker):
    name = topic_name("kp-reqlog")
    create(broker.bootstrap, name, 1)
    a = admin(broker.bootstrap)
    try:
        assert _logger_levels(a)["kafka.request.logger"][0] == "INFO"
        _set_request_logger(a, "DEBUG")
        assert _logger_levels(a)["kafka.request.logger"][0] == "DEBUG"

        produce(
            broker.bootstrap,
            name,
            [Rec(0, None, b"v%d" % i) for i in range(5)],
            client_id="reqlog-producer",
            acks="all",
        )
        # An idle partition: the Fetch waits out fetch.max.wait.ms, which is remote time.
        c = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, client_id="reqlog-consumer", fetch_max_wait_ms=300
        )
        try:
            c.assign([TopicPartition(name, 0)])
            c.seek(TopicPartition(name, 0), 5)
            assert not c.poll(timeout_ms=1500)
        finally:
            c.close()

        lines = _request_log(broker)
        produces = [r for r in lines if r["api"] == "Produce" and r["client"] == "reqlog-producer"]
        assert produces and all(r["totalTime"] < 250 for r in produces), produces
        for r in lines:
            parts = (
                r["requestQueueTime"]
                + r["localTime"]
                + r["remoteTime"]
                + r["responseQueueTime"]
                + r["sendTime"]
            )
            assert all(r[k] >= 0 for k in r if k.endswith("Time")), r
            assert abs(r["totalTime"] - parts) < 0.01, r  # each phase is printed to 3 decimals
        waits = [
            r
            for r in lines
            if r["api"] == "Fetch" and r["client"] == "reqlog-consumer" and r["remoteTime"] >= 250
        ]
        assert waits, [r for r in lines if r["api"] == "Fetch"]

        _set_request_logger(a, None)
        before = len(_request_log(broker))
        produce(broker.bootstrap, name, [Rec(0, None, b"after")], client_id="reqlog-producer")
        assert len(_request_log(broker)) == before
    finally:
        a.close()


def _placement(a: KafkaAdminClient, name: str, index: int) -> list[tuple[str, bool]]:
    """(log dir, is future) of each log of one partition, from DescribeLogDirs."""
    (described,) = a.describe_log_dirs(topic_partitions={name: [index]})
    return [
        (d["log_dir"], p["is_future_key"])
        for d in described["log_dirs"]
        for t in d["topics"]
        for p in t["partitions"]
        if t["name"] == name and p["partition_index"] == index
    ]


def test_log_dirs_described_and_a_partition_moved_while_it_takes_writes(broker_factory, tmp_path):
    dirs = [str(tmp_path / "dir-a"), str(tmp_path / "dir-b")]
    b = broker_factory({"log.dirs": ",".join(dirs), "log.segment.bytes": "65536"})
    name = topic_name("kp-logdirs")
    create(b.bootstrap, name, 2)  # a new partition goes to the dir holding the fewest
    first = [Rec(0, b"k%d" % i, b"v%d-" % i + b"x" * 1000, [("h", b"%d" % i)]) for i in range(300)]
    produce(b.bootstrap, name, first)
    a = admin(b.bootstrap)
    try:
        (described,) = a.describe_log_dirs()
        assert described["broker"] == 0
        by_dir = {d["log_dir"]: d for d in described["log_dirs"]}
        assert sorted(by_dir) == dirs and all(d["error_code"] == 0 for d in by_dir.values())
        placed = {}
        for d in by_dir.values():
            assert d["total_bytes"] >= d["usable_bytes"] > 0
            for t in d["topics"]:
                for p in t["partitions"]:
                    assert p["offset_lag"] == 0 and p["is_future_key"] is False
                    placed[(t["name"], p["partition_index"])] = (d["log_dir"], p["partition_size"])
        assert {placed[(name, 0)][0], placed[(name, 1)][0]} == set(dirs)
        assert placed[(name, 0)][1] > 300 * 1000 and placed[(name, 1)][1] == 0
        (only,) = a.describe_log_dirs(topic_partitions={name: [1]})
        assert [
            (t["name"], [p["partition_index"] for p in t["partitions"]])
            for d in only["log_dirs"]
            for t in d["topics"]
        ] == [(name, [1])]

        here, there = placed[(name, 0)][0], placed[(name, 1)][0]
        result = a.alter_replica_log_dirs(
            {
                TopicPartitionReplica(name, 1, 0): there,  # already there
                TopicPartitionReplica(name, 1, 0): str(tmp_path / "not-a-log-dir"),
                TopicPartitionReplica(name, 7, 0): here,  # no such partition
            }
        )
        assert result == {
            TopicPartitionReplica(name, 1, 0): Errors.LogDirNotFoundError,
            TopicPartitionReplica(name, 7, 0): Errors.ReplicaNotAvailableError,
        }
        assert a.alter_replica_log_dirs({TopicPartitionReplica(name, 1, 0): there}) == {
            TopicPartitionReplica(name, 1, 0): Errors.NoError
        }

        # Move partition 0 while a producer keeps writing to it.
        stop, more, errors = threading.Event(), [], []

        def keep_producing():
            p = producer(b.bootstrap, acks="all", linger_ms=0)
            try:
                i = 0
                while not stop.is_set() and i < 3000:
                    rec = Rec(0, b"m%d" % i, b"w%d" % i, [])
                    p.send(name, key=rec.key, value=rec.value, partition=0).get(timeout=30)
                    more.append(rec)
                    i += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
            finally:
                p.close(timeout=10)

        writer = threading.Thread(target=keep_producing)
        writer.start()
        wait_until(lambda: len(more) >= 50, message="the producer got going")
        assert a.alter_replica_log_dirs({TopicPartitionReplica(name, 0, 0): there}) == {
            TopicPartitionReplica(name, 0, 0): Errors.NoError
        }
        wait_until(
            lambda: _placement(a, name, 0) == [(there, False)],
            timeout=60,
            message="the move to finish",
        )
        time.sleep(0.3)  # the producer goes on writing to the moved log
        stop.set()
        writer.join(60)
        assert not errors, errors
        assert os.listdir(here) == [
            d for d in os.listdir(here) if not d.startswith(f"{name}-0")
        ]  # nothing left behind

        # A second request redirects a move under way: the partition ends where the
        # last request asked (here, back in its own dir), with no future log left.
        for dest in (here, there):
            assert a.alter_replica_log_dirs({TopicPartitionReplica(name, 1, 0): dest}) == {
                TopicPartitionReplica(name, 1, 0): Errors.NoError
            }
        wait_until(
            lambda: (
                _placement(a, name, 1) == [(there, False)]
                and not [n for d in dirs for n in os.listdir(d) if n.endswith("-future")]
            ),
            timeout=60,
            message="partition 1 to settle in its own dir, with no future log",
        )
        assert _placement(a, name, 1) == [(there, False)]
    finally:
        a.close()
    got = consume_partitions(b.bootstrap, name, 1, len(first) + len(more))
    assert [(r[1], r[2]) for r in got[0]] == [(r.key, r.value) for r in first + more]
    assert [r[0] for r in got[0]] == list(range(len(first) + len(more)))
    b.restart()
    a = admin(b.bootstrap)
    try:
        assert _placement(a, name, 0) == [(there, False)]
    finally:
        a.close()
    got = consume_partitions(b.bootstrap, name, 1, len(first) + len(more))
    assert [(r[1], r[2]) for r in got[0]] == [(r.key, r.value) for r in first + more]


def test_elect_leaders_and_reassignments_on_the_only_replica(module_broker):
    name = topic_name("kp-replicas")
    create(module_broker.bootstrap, name, 2)
    a = admin(module_broker.bootstrap)
    try:
        r = a.elect_leaders(0, {name: [0, 1]})
        assert [(t, sorted((p[0], p[1]) for p in ps)) for t, ps in r.replica_election_results] == [
            (
                name,
                [
                    (0, Errors.ElectionNotNeededError.errno),
                    (1, Errors.ElectionNotNeededError.errno),
                ],
            )
        ]
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            a.elect_leaders(1, {name: [5]})
        # Every partition (kafka-python lists them itself; kafka-leader-election.sh
        # --all-topic-partitions sends null): only partitions that needed an election.
        from logstore.protocol.messages.elect_leaders import ElectLeadersRequest

        every = wire_call(
            module_broker.bootstrap,
            ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=1000),
            2,
        )
        assert (every.error_code, every.replica_election_results) == (0, [])
        bad = wire_call(
            module_broker.bootstrap,
            ElectLeadersRequest(election_type=5, topic_partitions=None, timeout_ms=1000),
            2,
        )
        assert bad.error_code == Errors.InvalidRequestError.errno

        tp0, tp1, missing = (
            TopicPartition(name, 0),
            TopicPartition(name, 1),
            TopicPartition(name, 9),
        )
        assert a.alter_partition_reassignments({tp0: [0], tp1: [0, 3], missing: [0]}) == {
            tp0: None,
            tp1: Errors.InvalidReplicationAssignmentError,
            missing: Errors.UnknownTopicOrPartitionError,
        }
        assert a.alter_partition_reassignments({tp0: None}) == {
            tp0: Errors.NoReassignmentInProgressError
        }
        assert a.list_partition_reassignments() == {}
        assert a.list_partition_reassignments([tp0, missing]) == {}
    finally:
        a.close()


def test_advertised_listeners_change_at_runtime(broker):
    a = admin(broker.bootstrap)
    resource = lambda configs=None: ConfigResource(ConfigResourceType.BROKER, "0", configs=configs)  # noqa: E731

    def described(a) -> dict:
        return a.describe_configs([resource()], config_filter="all")["broker"]["0"][
            "advertised.listeners"
        ]

    try:
        entry = described(a)
        assert (entry["config_source"], entry["read_only"]) == ("DEFAULT_CONFIG", False)
        moved = f"PLAINTEXT://localhost:{broker.port}"
        r = a.alter_configs(
            [resource({"advertised.listeners": (AlterConfigOp.SET, moved)})], incremental=True
        )
        assert r == {"broker": {"0": "OK"}}, r
        entry = described(a)
        assert (entry["value"], entry["config_source"]) == (moved, "DYNAMIC_BROKER_CONFIG")
        bad = a.alter_configs(
            [resource({"advertised.listeners": (AlterConfigOp.SET, "OTHER://localhost:1")})],
            incremental=True,
        )
        assert "InvalidConfigurationError" in bad["broker"]["0"], bad
    finally:
        a.close()
    # New clients are sent to the new address, and it works.
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert {(n.host, n.port) for n in c._client.cluster.brokers()} in (
            set(),
            {("localhost", broker.port)},
        )
        c.topics()
        assert {(n.host, n.port) for n in c._client.cluster.brokers()} == {
            ("localhost", broker.port)
        }
    finally:
        c.close()
    broker.restart()
    a = admin(broker.bootstrap)
    try:
        assert described(a)["value"] == f"PLAINTEXT://localhost:{broker.port}"
        r = a.alter_configs(
            [resource({"advertised.listeners": (AlterConfigOp.DELETE, None)})], incremental=True
        )
        assert r == {"broker": {"0": "OK"}}, r
        assert described(a)["config_source"] == "DEFAULT_CONFIG"
    finally:
        a.close()


def test_listeners_added_and_removed_at_runtime(broker):
    import socket

    from tests.support.ports import free_port

    extra = free_port()
    first = f"PLAINTEXT://127.0.0.1:{broker.port}"
    both = f"{first},EXTRA://127.0.0.1:{extra}"

    def resource(configs=None, name="0"):
        return ConfigResource(ConfigResourceType.BROKER, name, configs=configs)

    protocol_map = (AlterConfigOp.SET, "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT")

    def alter(a, listeners: str, name: str = "0") -> str:
        r = a.alter_configs(
            [
                resource(
                    {
                        "listeners": (AlterConfigOp.SET, listeners),
                        "listener.security.protocol.map": protocol_map,
                    },
                    name,
                )
            ],
            incremental=True,
        )
        return r["broker"][name]

    a = admin(broker.bootstrap)
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        assert alter(a, both) == "OK"
        # An address already in use and an existing listener's new address are
        # refused, and nothing changes.
        r = a.alter_configs(
            [
                resource(
                    {
                        "listeners": (
                            AlterConfigOp.SET,
                            f"{both},TAKEN://127.0.0.1:{taken.getsockname()[1]}",
                        ),
                        "listener.security.protocol.map": (
                            AlterConfigOp.SET,
                            "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,TAKEN:PLAINTEXT",
                        ),
                    }
                )
            ],
            incremental=True,
        )
        assert (
            "InvalidConfigurationError" in r["broker"]["0"]
            and "cannot listen on" in r["broker"]["0"]
        ), r
        assert "InvalidConfigurationError" in alter(
            a, f"PLAINTEXT://127.0.0.1:{free_port()},EXTRA://127.0.0.1:{extra}"
        )
        entry = a.describe_configs([resource()], config_filter="all")["broker"]["0"]["listeners"]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == (
            both,
            "DYNAMIC_BROKER_CONFIG",
            False,
        )
    finally:
        taken.close()
        a.close()

    # A client that bootstraps on the new listener is told that listener's address.
    via_extra = f"127.0.0.1:{extra}"
    c = KafkaConsumer(bootstrap_servers=via_extra)
    try:
        c.topics()
        assert {(n.host, n.port) for n in c._client.cluster.brokers()} == {("127.0.0.1", extra)}
    finally:
        c.close()
    name = topic_name("kp-listeners")
    create(via_extra, name, 1)
    records = [Rec(0, b"k%d" % i, b"v%d" % i, []) for i in range(20)]
    produce(via_extra, name, records)

    # The first listener goes, through a client on the new one.
    a = admin(via_extra)
    try:
        assert alter(a, f"EXTRA://127.0.0.1:{extra}") == "OK"
    finally:
        a.close()

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True

    wait_until(refused, message="the removed listener to stop accepting")
    # A restart listens where the dynamic config says.
    broker.restart()
    assert refused()
    got = consume_partitions(via_extra, name, 1, len(records))
    assert [(r[1], r[2]) for r in got[0]] == [(r.key, r.value) for r in records]


def test_describe_configs(module_broker):
    name = topic_name("kp-cfg")
    create(module_broker.bootstrap, name, 1, {"retention.bytes": "99999"})
    a = admin(module_broker.bootstrap)
    try:
        cfg = _topic_configs(a, name)
        assert cfg["retention.ms"]["value"] == "604800000"
        assert cfg["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert cfg["cleanup.policy"]["value"] == "delete"
        assert cfg["cleanup.policy"]["config_type"] == "LIST"
        assert cfg["segment.bytes"]["value"] == "1073741824"
        assert cfg["retention.bytes"]["value"] == "99999"
        assert cfg["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        # The default filter ("modified") keeps only the override.
        r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        assert list(r["topic"][name]) == ["retention.bytes"]
        # Selected keys only.
        r = a.describe_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    name,
                    configs={"retention.ms": None, "cleanup.policy": None},
                )
            ],
            config_filter="all",
        )
        assert sorted(r["topic"][name]) == ["cleanup.policy", "retention.ms"]
        # kafka-python drops per-resource errors here (confluent's test checks the error code).
        unknown = topic_name("kp-cfg-none")
        assert a.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, unknown)], config_filter="all"
        ) == {"topic": {unknown: {}}}
    finally:
        a.close()


def test_alter_configs_and_persistence_across_restart(broker):
    name = topic_name("kp-alter")
    create(broker.bootstrap, name, 1)
    a = admin(broker.bootstrap)
    try:
        # AlterConfigs (the whole set; kafka-python carries the other overrides along).
        r = a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    name,
                    configs={"retention.ms": "3600000", "cleanup.policy": "compact"},
                )
            ],
            incremental=False,
        )
        assert r == {"topic": {name: "OK"}}
        r = a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={"segment.bytes": "1048576"})],
            incremental=False,
        )
        cfg = _topic_configs(a, name)
        assert {
            k: cfg[k]["value"] for k in ("retention.ms", "cleanup.policy", "segment.bytes")
        } == {
            "retention.ms": "3600000",
            "cleanup.policy": "compact",
            "segment.bytes": "1048576",
        }
        # IncrementalAlterConfigs: set, delete, append, subtract.
        a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    name,
                    configs={
                        "retention.ms": (AlterConfigOp.SET, "7200000"),
                        "segment.bytes": (AlterConfigOp.DELETE, None),
                        "cleanup.policy": (AlterConfigOp.APPEND, "delete"),
                    },
                )
            ],
            incremental=True,
        )
        cfg = _topic_configs(a, name)
        assert cfg["retention.ms"]["value"] == "7200000"
        assert (cfg["segment.bytes"]["value"], cfg["segment.bytes"]["config_source"]) == (
            "1073741824",
            "DEFAULT_CONFIG",
        )
        assert cfg["cleanup.policy"]["value"] == "compact,delete"
        a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    name,
                    configs={"cleanup.policy": (AlterConfigOp.SUBTRACT, "compact")},
                )
            ],
            incremental=True,
        )
        assert _topic_configs(a, name)["cleanup.policy"]["value"] == "delete"
        # Invalid values are refused and change nothing.
        r = a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "later"})],
            incremental=True,
        )
        assert r["topic"][name].startswith("[Error 40] InvalidConfigurationError"), r
        nosuch = topic_name("kp-nosuch")
        r = a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, nosuch, configs={"retention.ms": "1"})],
            incremental=True,
            raise_on_unknown=False,
        )
        assert r["topic"][nosuch].startswith("[Error 3] UnknownTopicOrPartitionError"), r
        assert _topic_configs(a, name)["retention.ms"]["value"] == "7200000"
    finally:
        a.close()

    broker.restart()
    a = admin(broker.bootstrap)
    try:
        cfg = _topic_configs(a, name)
        assert (cfg["retention.ms"]["value"], cfg["retention.ms"]["config_source"]) == (
            "7200000",
            "DYNAMIC_TOPIC_CONFIG",
        )
        assert cfg["cleanup.policy"]["value"] == "delete"
        assert cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        # reset_configs puts everything back to the defaults.
        a.reset_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={})]
        )  # {}: every key (None trips a kafka-python bug)
        cfg = _topic_configs(a, name)
        assert all(v["config_source"] == "DEFAULT_CONFIG" for v in cfg.values()), {
            k: v for k, v in cfg.items() if v["config_source"] != "DEFAULT_CONFIG"
        }
        assert cfg["retention.ms"]["value"] == "604800000"
    finally:
        a.close()


# --- offsets for times, watermarks -----------------------------------------------------


def test_offsets_for_times_and_watermarks(module_broker):
    name = topic_name("kp-oft")
    create(module_broker.bootstrap, name, 2)
    base = now_ms() - 600_000
    recs = [Rec(0, None, b"p0-%d" % i, [], base + i * 1000) for i in range(10)]
    recs += [
        Rec(1, None, b"p1-%d" % i, [], base + d) for i, d in enumerate((0, 5000, 2000, 6000, 1000))
    ]
    produce(module_broker.bootstrap, name, recs, flush_every=4)
    c = consumer(module_broker.bootstrap)
    try:
        tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)

        def oft(tp, ts):
            r = c.offsets_for_times({tp: ts}, timeout_ms=10000)[tp]
            return None if r is None else (r.offset, r.timestamp)

        assert oft(tp0, base - 1) == (0, base)
        assert oft(tp0, base) == (0, base)
        assert oft(tp0, base + 1) == (1, base + 1000)
        assert oft(tp0, base + 3000) == (3, base + 3000)
        assert oft(tp0, base + 9000) == (9, base + 9000)
        assert oft(tp0, base + 9001) is None
        assert oft(tp1, base + 1500) == (1, base + 5000)
        assert oft(tp1, base + 5500) == (3, base + 6000)
        assert oft(tp1, base + 6001) is None
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 5}
        # Consuming from the looked-up offset.
        c.assign([tp0])
        c.seek(tp0, oft(tp0, base + 7500)[0])
        got = drain(c, 2)
        assert [g[2] for g in got[0]] == [b"p0-8", b"p0-9"]
    finally:
        c.close()


# --- fetch edge cases ------------------------------------------------------------------


def _fill(bootstrap, name, n, partition=0, size=10, p=None):
    return produce(
        bootstrap,
        name,
        [Rec(partition, None, b"%0*d" % (size, i), [], now_ms()) for i in range(n)],
        p=p,
    )


def test_out_of_range_offset_resets(module_broker):
    name = topic_name("kp-oor")
    create(module_broker.bootstrap, name, 1)
    _fill(module_broker.bootstrap, name, 10)
    tp = TopicPartition(name, 0)

    got = consume_partitions(
        module_broker.bootstrap, name, 1, 10, start=100, auto_offset_reset="earliest"
    )
    assert [g[0] for g in got[0]] == list(range(10))

    c = consumer(module_broker.bootstrap, auto_offset_reset="latest")
    try:
        c.assign([tp])
        c.seek(tp, 100)

        def reset():
            assert not c.poll(timeout_ms=100)
            return c.position(tp, timeout_ms=1000) == 10

        wait_until(reset, message="position reset to the end")
        _fill(module_broker.bootstrap, name, 1)
        got = drain(c, 1)
        assert [g[0] for g in got[0]] == [10]
    finally:
        c.close()

    c = consumer(module_broker.bootstrap, auto_offset_reset="none")
    try:
        c.assign([tp])
        c.seek(tp, 100)
        with pytest.raises(Errors.OffsetOutOfRangeError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert not c.poll(timeout_ms=200)
    finally:
        c.close()


def test_long_poll_receives_record_produced_while_waiting(module_broker):
    name = topic_name("kp-longpoll")
    create(module_broker.bootstrap, name, 1)
    _fill(module_broker.bootstrap, name, 2)
    tp = TopicPartition(name, 0)
    p = producer(module_broker.bootstrap, linger_ms=0)
    c = consumer(
        module_broker.bootstrap,
        fetch_max_wait_ms=30000,
        fetch_min_bytes=1,
        request_timeout_ms=45000,
    )
    try:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 2
        assert not c.poll(timeout_ms=500)  # a fetch is now parked on the broker

        def send_later():
            time.sleep(0.7)
            p.send(name, value=b"wake", partition=0).get(10)

        th = threading.Thread(target=send_later)
        th.start()
        got = []
        deadline = time.monotonic() + 20  # before the 30 s fetch wait ends: woken by the append
        while not got:
            assert time.monotonic() < deadline, (
                "the record produced during the long poll never arrived"
            )
            got = c.poll(timeout_ms=50).get(tp, [])
        th.join()
        assert [(r.offset, r.value) for r in got] == [(2, b"wake")]
    finally:
        c.close()
        p.close(timeout=5)


def test_partition_fetch_bytes_smaller_than_a_batch(module_broker):
    name = topic_name("kp-smallfetch")
    create(module_broker.bootstrap, name, 1)
    values = [b"%04d" % i + b"y" * 996 for i in range(40)]
    produce(
        module_broker.bootstrap,
        name,
        [Rec(0, None, v, [], now_ms()) for v in values],
        linger_ms=500,
        batch_size=100_000,
    )
    batches = stored_batches(module_broker.data_dir, name, 0)
    assert len(batches) == 1 and batches[0].records == 40, batches
    got = consume_partitions(
        module_broker.bootstrap, name, 1, 40, max_partition_fetch_bytes=1024, fetch_max_bytes=1024
    )[0]
    assert [g[2] for g in got] == values and [g[0] for g in got] == list(range(40))


# --- DeleteRecords ---------------------------------------------------------------------


def test_delete_records(module_broker):
    name = topic_name("kp-delrec")
    create(module_broker.bootstrap, name, 2)
    _fill(module_broker.bootstrap, name, 10, partition=0)
    _fill(module_broker.bootstrap, name, 10, partition=1)
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    a = admin(module_broker.bootstrap)
    try:
        r = a.delete_records({tp0: 6, tp1: 10})
        assert {tp: v["low_watermark"] for tp, v in r.items()} == {tp0: 6, tp1: 10}
        assert all(v["error_code"] == 0 for v in r.values())
        with pytest.raises(Errors.OffsetOutOfRangeError):
            a.delete_records({tp0: 11})
    finally:
        a.close()
    c = consumer(module_broker.bootstrap)
    try:
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 6, tp1: 10}
        assert c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 10}
    finally:
        c.close()
    got = consume_partitions(module_broker.bootstrap, name, 2, 4)
    assert [g[0] for g in got[0]] == [6, 7, 8, 9] and 1 not in got
    got = consume_partitions(
        module_broker.bootstrap, name, 1, 4, start=2
    )  # below the log start: reset to earliest
    assert [g[0] for g in got[0]] == [6, 7, 8, 9]


def test_delete_group_offsets_spares_subscribed_topics_while_the_group_is_active(module_broker):
    subscribed, other = topic_name("kp-offdel-sub"), topic_name("kp-offdel-other")
    group = topic_name("kp-offdel-g")
    for name in (subscribed, other):
        create(module_broker.bootstrap, name, 1)
        _fill(module_broker.bootstrap, name, 5)
    sub0, other0 = TopicPartition(subscribed, 0), TopicPartition(other, 0)
    c = consumer(module_broker.bootstrap, group_id=group)
    a = admin(module_broker.bootstrap)
    try:
        # kafka-python's leader assigns from its own metadata: fetched first, so a
        # join racing the first metadata response cannot assign the topic nothing.
        assert subscribed in c.topics()
        c.subscribe([subscribed])
        drain(c, 5)
        c.commit({sub0: OffsetAndMetadata(5, "", -1), other0: OffsetAndMetadata(2, "", -1)})
        # A member subscribes to one topic: only the other's offsets can go.
        assert a.delete_group_offsets(group, [sub0, other0, TopicPartition(other, 7)]) == {
            sub0: Errors.GroupSubscribedToTopicError,
            other0: Errors.NoError,
            TopicPartition(other, 7): Errors.UnknownTopicOrPartitionError,
        }
        assert set(a.list_group_offsets(group)[group]) == {sub0}
        c.close()
        c = None
        # Empty: every offset can go; then the group has nothing left and is gone.
        assert a.delete_group_offsets(group, [sub0]) == {sub0: Errors.NoError}
        assert a.list_group_offsets(group)[group] == {}
        with pytest.raises(Errors.GroupIdNotFoundError):
            a.delete_group_offsets(group, [sub0])
    finally:
        if c is not None:
            c.close()
        a.close()


# --- restart ---------------------------------------------------------------------------


def test_restart_keeps_everything_and_continues_offsets(broker):
    name = topic_name("kp-restart")
    create(broker.bootstrap, name, 2)
    records = kp_records(2, 12, now_ms() - 60_000)
    p = producer(broker.bootstrap, compression_type="gzip")
    try:
        produce(broker.bootstrap, name, records, flush_every=5, p=p)
        broker.restart()
        consumed = consume_partitions(broker.bootstrap, name, 2, len(records))
        assert_partition_contents(records, consumed)
        # The same producer reconnects; offsets continue.
        more = kp_records(2, 2, now_ms())
        metas = produce(broker.bootstrap, name, more, p=p)
        assert sorted((m.partition, m.offset) for m in metas) == [
            (0, 12),
            (0, 13),
            (1, 12),
            (1, 13),
        ]
    finally:
        p.close(timeout=10)
    consumed = consume_partitions(broker.bootstrap, name, 2, len(records) + len(more))
    assert_partition_contents(records + more, consumed)
