"""kafka-python's admin client against a real broker: logger levels, the request log,
log dirs and partition moves, leader elections, listeners and configs changed at
runtime."""

from __future__ import annotations

import os
import re
import threading
import time

import kafka.errors as Errors
import pytest
from kafka import (
    KafkaAdminClient,
    KafkaConsumer,
    TopicPartition,
    TopicPartitionReplica,
)
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from tests.integration.clients import (
    Rec,
    topic_name,
    wait_until,
    wire_call,
)
from tests.integration.kafka_python_support import (
    admin,
    consume_partitions,
    create,
    produce,
    producer,
)


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
