"""confluent-kafka (librdkafka) against a real broker: produce/consume with every codec,
admin (topics, partitions, configs), offsets for times, fetch edge cases,
DeleteRecords and restarts."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.integration.clients import CODECS as CODEC_IDS
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

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# --- helpers ---------------------------------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> AdminClient:
    a = admin(bootstrap)
    a.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)
    wait_until(
        lambda: len(a.list_topics(name, timeout=5).topics[name].partitions) == partitions,
        message=f"metadata of {name}",
    )
    return a


def error_of(future, timeout: float = 15) -> KafkaError | None:
    try:
        future.result(timeout)
    except KafkaException as e:
        return e.args[0]
    return None


def produce(
    bootstrap: str, topic: str, records, config: dict | None = None, flush_every: int | None = None
) -> list:
    """Produces ``records`` (Rec) and returns the delivery reports (partition, offset, ts)
    in produce order; fails on any delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **(config or {})})
    reports: list = [None] * len(records)
    errors = []

    def make_cb(n):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                reports[n] = (msg.partition(), msg.offset(), msg.timestamp()[1])

        return cb

    for n, r in enumerate(records):
        p.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp,
            headers=list(r.headers),
            on_delivery=make_cb(n),
        )
        if flush_every and (n + 1) % flush_every == 0:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    assert not errors, errors
    return reports


def consumer(bootstrap: str, **extra) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "ck-" + topic_name("g"),
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    }
    conf.update({(k if k.endswith("_cb") else k.replace("_", ".")): v for k, v in extra.items()})
    return Consumer(conf)


def consume_partitions(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    start=OFFSET_BEGINNING,
    timeout: float = 30,
    **extra,
) -> dict:
    """Reads ``partitions`` partitions from ``start`` until ``count`` records arrived and
    every partition reported EOF; partition -> [(offset, key, value, headers, ts)]."""
    c = consumer(bootstrap, **extra)
    try:
        c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        out: dict[int, list] = {}
        eof: set[int] = set()
        n = 0
        deadline = time.monotonic() + timeout
        while n < count or len(eof) < partitions:
            assert time.monotonic() < deadline, f"consumed {n}/{count}, eof {sorted(eof)}"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            eof.discard(m.partition())
            ts_type, ts = m.timestamp()
            assert ts_type == TIMESTAMP_CREATE_TIME
            out.setdefault(m.partition(), []).append(
                (m.offset(), m.key(), m.value(), m.headers() or [], ts)
            )
            n += 1
        assert n == count, f"consumed {n} records, expected {count}"
        return out
    finally:
        c.close()


# --- produce / consume -----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(module_broker, codec):
    topic = topic_name(f"ck-rt-{codec}")
    create(module_broker.bootstrap, topic, 3)
    records = sample_records(3, 24, now_ms() - 3_600_000)
    reports = produce(module_broker.bootstrap, topic, records, {"compression.type": codec})
    # Delivery reports: the offsets the broker assigned, consecutive per partition.
    per_partition: dict[int, list] = {}
    for r, rep in zip(records, reports):
        assert rep[0] == r.partition
        assert rep[2] == r.timestamp
        per_partition.setdefault(r.partition, []).append(rep[1])
    assert all(offs == list(range(len(offs))) for offs in per_partition.values()), per_partition
    consumed = consume_partitions(module_broker.bootstrap, topic, 3, len(records))
    assert_partition_contents(records, consumed)
    if codec == "none":
        assert {
            b.codec for p in range(3) for b in stored_batches(module_broker.data_dir, topic, p)
        } == {0}
    else:
        assert_stored_codec(module_broker.data_dir, topic, 3, codec)


def test_idempotent_producer_round_trip(module_broker):
    topic = topic_name("ck-idem")
    create(module_broker.bootstrap, topic, 2)
    records = sample_records(2, 30, now_ms() - 60_000)
    produce(
        module_broker.bootstrap,
        topic,
        records,
        {"enable.idempotence": True, "acks": "all", "compression.type": "lz4"},
        flush_every=7,
    )
    consumed = consume_partitions(module_broker.bootstrap, topic, 2, len(records))
    assert_partition_contents(records, consumed)


@pytest.mark.parametrize(
    "producer_codec,topic_codec", [("none", "zstd"), ("gzip", "lz4"), ("snappy", "uncompressed")]
)
def test_topic_compression_type_re_encodes_what_producers_send(
    module_broker, producer_codec, topic_codec
):
    topic = topic_name("ck-topic-codec")
    create(module_broker.bootstrap, topic, 2, {"compression.type": topic_codec})
    records = sample_records(2, 25, now_ms() - 60_000)
    config = {"enable.idempotence": True, "acks": "all", "compression.type": producer_codec}
    produce(module_broker.bootstrap, topic, records, config, flush_every=9)
    assert_partition_contents(
        records, consume_partitions(module_broker.bootstrap, topic, 2, len(records))
    )
    stored = {b.codec for p in range(2) for b in stored_batches(module_broker.data_dir, topic, p)}
    assert stored == {CODEC_IDS["none" if topic_codec == "uncompressed" else topic_codec]}, stored


def test_large_record_and_many_small_batches(module_broker):
    topic = topic_name("ck-large")
    create(module_broker.bootstrap, topic, 1)
    p = Producer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "linger.ms": 0,
            "message.max.bytes": 1_000_000,
        }
    )
    big = bytes(range(256)) * 3000  # 768000 bytes, under the 1048588 default max.message.bytes
    p.produce(topic, value=big, key=b"big", partition=0)
    for i in range(200):
        p.produce(topic, value=b"%d" % i, partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    got = consume_partitions(module_broker.bootstrap, topic, 1, 201)[0]
    assert got[0][1:3] == (b"big", big)
    assert [g[2] for g in got[1:]] == [b"%d" % i for i in range(200)]
    assert [g[0] for g in got] == list(range(201))


def test_record_too_large_is_refused(module_broker):
    topic = topic_name("ck-toolarge")
    create(module_broker.bootstrap, topic, 1, {"max.message.bytes": "10000"})
    p = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0, "compression.type": "none"}
    )
    errors = []
    p.produce(
        topic, value=b"x" * 20000, partition=0, on_delivery=lambda err, msg: errors.append(err)
    )
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors[0]


def _deliveries(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, int | None]], **config
) -> list:
    """Produces (key, timestamp) records to partition 0 in one batch; each record's
    delivery error (None when it landed). The linger is long enough that a starved
    test process cannot split the batch; ``flush`` sends it without waiting it out.
    The producer learns the partition's leader first: records produced before that wait
    in librdkafka's unassigned queue, and a flush that finds some of them already moved
    to the partition sends those alone."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5000, "retries": 0, **config})
    wait_until(
        lambda: p.list_topics(topic, timeout=5).topics[topic].partitions[0].leader >= 0,
        message="leader",
    )
    errors: list = [None] * len(records)
    done = []

    def make_cb(n):
        def cb(err, msg):
            errors[n] = err
            done.append(n)

        return cb

    for n, (key, ts) in enumerate(records):
        p.produce(
            topic, value=b"v%d" % n, key=key, partition=0, timestamp=ts or 0, on_delivery=make_cb(n)
        )
    assert p.flush(30) == 0
    assert sorted(done) == list(range(len(records)))
    return errors


def test_compacted_topic_refuses_records_without_a_key(module_broker):
    topic = topic_name("ck-compact-nokey")
    create(module_broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    errors = _deliveries(
        module_broker.bootstrap, topic, [(b"k0", None), (None, None), (b"k2", None), (None, None)]
    )
    # The batch is refused whole. From the response's record_errors librdkafka fails
    # the key-less records with INVALID_RECORD and the others with
    # _INVALID_DIFFERENT_RECORD (with a single record error, all get the partition's).
    assert [e.code() if e else None for e in errors] == [
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
    ], errors
    assert _deliveries(module_broker.bootstrap, topic, [(b"k0", None), (b"k1", None)]) == [
        None,
        None,
    ]
    got = consume_partitions(module_broker.bootstrap, topic, 1, 2)[0]
    assert [(offset, key) for offset, key, *_ in got] == [(0, b"k0"), (1, b"k1")]


def test_timestamps_outside_the_topic_window_are_refused(module_broker):
    topic = topic_name("ck-ts-window")
    create(
        module_broker.bootstrap,
        topic,
        1,
        {"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"},
    )
    now = now_ms()
    errors = _deliveries(module_broker.bootstrap, topic, [(b"a", now), (b"b", now - 3_600_000)])
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_TIMESTAMP] * 2, errors
    assert _deliveries(module_broker.bootstrap, topic, [(b"a", now), (b"b", now + 30_000)]) == [
        None,
        None,
    ]


# --- admin -----------------------------------------------------------------------------


def test_create_and_delete_topics_with_errors(module_broker):
    a = admin(module_broker.bootstrap)
    name = topic_name("ck-admin")
    assert error_of(a.create_topics([NewTopic(name, 3, 1)])[name]) is None
    md = wait_until(
        lambda: (t := a.list_topics(name, timeout=5).topics[name]).error is None and t,
        message="metadata",
    )
    assert sorted(md.partitions) == [0, 1, 2]
    assert all(
        pm.leader == 0 and pm.replicas == [0] and pm.isrs == [0] for pm in md.partitions.values()
    )

    err = error_of(a.create_topics([NewTopic(name, 3, 1)])[name])
    assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err
    for bad in ["bad name!", "a" * 250, ".", "..", "sl/ash"]:
        err = error_of(a.create_topics([NewTopic(bad, 1, 1)])[bad])
        assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION, (
            bad,
            err,
        )  # INVALID_TOPIC_EXCEPTION (17)
    zero = topic_name("ck-zero")
    err = error_of(a.create_topics([NewTopic(zero, 0, 1)])[zero])
    assert err is not None and err.code() == KafkaError.INVALID_PARTITIONS, err
    rf = topic_name("ck-rf")
    err = error_of(a.create_topics([NewTopic(rf, 1, 3)])[rf])
    assert err is not None and err.code() == KafkaError.INVALID_REPLICATION_FACTOR, err
    badcfg = topic_name("ck-badcfg")
    # validate_only: accepted, nothing created.
    vo = topic_name("ck-vo")
    assert error_of(a.create_topics([NewTopic(vo, 2, 1)], validate_only=True)[vo]) is None
    for never in (zero, rf, badcfg, vo):
        assert never not in a.list_topics(timeout=5).topics

    nosuch = topic_name("ck-nosuch")
    err = error_of(a.delete_topics([nosuch])[nosuch])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
    assert error_of(a.delete_topics([name])[name]) is None
    wait_until(
        lambda: name not in a.list_topics(timeout=5).topics, message="topic gone from metadata"
    )
    err = error_of(a.delete_topics([name])[name])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err

    # Invalid topic configs, checked as Kafka's validators do.
    for key, value in [
        ("retention.ms", "abc"),
        ("cleanup.policy", "sometimes"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "Whenever"),
        ("unclean.leader.election.enable", "maybe"),
        ("segment.bytes", "10"),
        ("no.such.config", "1"),
        ("min.insync.replicas", "0"),  # Kafka: atLeast(1)
        ("min.cleanable.dirty.ratio", "1.5"),  # Kafka: between(0, 1)
    ]:
        err = error_of(a.create_topics([NewTopic(badcfg, 1, 1, config={key: value})])[badcfg])
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, (key, value, err)
    assert badcfg not in a.list_topics(timeout=5).topics


def test_authorized_operations_are_everything_the_resource_supports(module_broker):
    # No authorizer: as Kafka without authorizer.class.name, every operation a
    # resource type supports is allowed, and reported when asked for.
    name = topic_name("ck-authops")
    a = create(module_broker.bootstrap, name, 1)
    op = AclOperation
    (topic,) = a.describe_topics(
        TopicCollection([name]), include_authorized_operations=True
    ).values()
    assert set(topic.result(15).authorized_operations) == {
        op.READ,
        op.WRITE,
        op.CREATE,
        op.DELETE,
        op.ALTER,
        op.DESCRIBE,
        op.DESCRIBE_CONFIGS,
        op.ALTER_CONFIGS,
    }
    cluster = a.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == {
        op.CREATE,
        op.ALTER,
        op.DESCRIBE,
        op.CLUSTER_ACTION,
        op.DESCRIBE_CONFIGS,
        op.ALTER_CONFIGS,
        op.IDEMPOTENT_WRITE,
    }
    (topic,) = a.describe_topics(TopicCollection([name])).values()
    assert topic.result(15).authorized_operations is None


def test_elect_leaders_is_never_needed_on_the_only_replica(module_broker):
    name = topic_name("ck-elect")
    a = create(module_broker.bootstrap, name, 2)
    result = a.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(name, 0), TopicPartition(name, 1)]
    ).result(15)
    assert {tp.partition: e.code() for tp, e in result.items()} == {
        0: KafkaError.ELECTION_NOT_NEEDED,
        1: KafkaError.ELECTION_NOT_NEEDED,
    }
    result = a.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(name, 4)]).result(15)
    assert [e.code() for e in result.values()] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    # Every partition (null on the wire): only those that needed an election.
    assert a.elect_leaders(ElectionType.PREFERRED, None).result(15) == {}


def test_create_partitions_grows_and_never_shrinks(module_broker):
    name = topic_name("ck-parts")
    a = create(module_broker.bootstrap, name, 2)
    assert error_of(a.create_partitions([NewPartitions(name, 5)])[name]) is None
    wait_until(
        lambda: len(a.list_topics(name, timeout=5).topics[name].partitions) == 5,
        message="5 partitions",
    )
    for count in (3, 5):
        err = error_of(a.create_partitions([NewPartitions(name, count)])[name])
        assert err is not None and err.code() == KafkaError.INVALID_PARTITIONS, (count, err)
    unknown = topic_name("ck-parts-none")
    err = error_of(a.create_partitions([NewPartitions(unknown, 4)])[unknown])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
    # The new partitions take records.
    recs = [Rec(p, b"k", b"v%d" % p, [], now_ms()) for p in range(5)]
    produce(module_broker.bootstrap, name, recs)
    got = consume_partitions(module_broker.bootstrap, name, 5, 5)
    assert {p: [g[2] for g in v] for p, v in got.items()} == {p: [b"v%d" % p] for p in range(5)}


def _describe(a: AdminClient, name: str) -> dict:
    res = ConfigResource("topic", name)
    return a.describe_configs([res])[res].result(15)


def test_describe_configs_defaults(module_broker):
    name = topic_name("ck-cfg")
    a = create(module_broker.bootstrap, name, 1, {"retention.bytes": "123456"})
    entries = _describe(a, name)
    assert entries["retention.ms"].value == "604800000"
    assert (
        entries["retention.ms"].is_default
        and entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    )
    assert entries["cleanup.policy"].value == "delete"
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["max.message.bytes"].value == "1048588"
    assert entries["min.insync.replicas"].value == "1"
    assert entries["retention.bytes"].value == "123456"
    assert not entries["retention.bytes"].is_default
    assert entries["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Describing an unknown topic fails with UNKNOWN_TOPIC_OR_PART.
    res = ConfigResource("topic", topic_name("ck-cfg-none"))
    with pytest.raises(KafkaException) as e:
        a.describe_configs([res])[res].result(15)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The broker's own configuration.
    bres = ConfigResource("broker", "0")
    bconf = a.describe_configs([bres])[bres].result(15)
    assert bconf["num.partitions"].value == "1"  # set by the test fixture
    assert bconf["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bconf["log.retention.hours"].value == "168"
    assert bconf["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_and_persistence_across_restart(broker):
    name = topic_name("ck-alter")
    a = create(broker.bootstrap, name, 2)
    res = ConfigResource(
        "topic", name, set_config={"retention.ms": "3600000", "cleanup.policy": "compact"}
    )
    assert error_of(a.alter_configs([res])[res]) is None
    e = _describe(a, name)
    assert (e["retention.ms"].value, e["cleanup.policy"].value) == ("3600000", "compact")
    assert e["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # AlterConfigs replaces the whole set: retention.ms goes back to its default.
    res = ConfigResource("topic", name, set_config={"max.message.bytes": "2000000"})
    assert error_of(a.alter_configs([res])[res]) is None
    e = _describe(a, name)
    assert (e["retention.ms"].value, e["cleanup.policy"].value, e["max.message.bytes"].value) == (
        "604800000",
        "delete",
        "2000000",
    )

    inc = ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    assert error_of(a.incremental_alter_configs([inc])[inc]) is None
    e = _describe(a, name)
    assert e["retention.ms"].value == "7200000"
    assert e["max.message.bytes"].value == "1048588" and e["max.message.bytes"].is_default
    assert e["cleanup.policy"].value == "delete,compact"

    # Invalid values and unknown topics are refused, and change nothing.
    bad = ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    err = error_of(a.incremental_alter_configs([bad])[bad])
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    bad = ConfigResource("topic", name, set_config={"segment.bytes": "-5"})
    err = error_of(a.alter_configs([bad])[bad])
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    missing = ConfigResource(
        "topic", topic_name("ck-alter-none"), set_config={"retention.ms": "1000"}
    )
    err = error_of(a.alter_configs([missing])[missing])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
    assert _describe(a, name)["retention.ms"].value == "7200000"

    broker.restart()
    a = admin(broker.bootstrap)
    e = _describe(a, name)
    assert e["retention.ms"].value == "7200000"
    assert e["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert e["cleanup.policy"].value == "delete,compact"
    assert e["max.message.bytes"].is_default
    assert len(a.list_topics(name, timeout=5).topics[name].partitions) == 2


def _incremental(a: AdminClient, resource: str, **ops) -> KafkaError | None:
    """IncrementalAlterConfigs on BROKER ``resource``: key=value sets, key=None deletes."""
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v,
            incremental_operation=AlterConfigOpType.SET
            if v is not None
            else AlterConfigOpType.DELETE,
        )
        for k, v in ops.items()
    ]
    res = ConfigResource("broker", resource, incremental_configs=entries)
    return error_of(a.incremental_alter_configs([res])[res])


def _cluster_default(bootstrap: str, resource: str = "", **ops) -> dict:
    """IncrementalAlterConfigs on the cluster-wide BROKER resource ``""``, as
    ``kafka-configs.sh --entity-default`` sends it (the Python clients cannot name
    it), then that resource's described configs: key -> (value, source)."""
    from logstore.protocol.messages.configs import (
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
    )

    alter = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=4,
                resource_name=resource,
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=k.replace("_", "."),
                        config_operation=0 if v is not None else 1,
                        value=v,
                    )
                    for k, v in ops.items()
                ],
            )
        ],
        validate_only=False,
    )
    (result,) = wire_call(bootstrap, alter, 1).responses
    assert result.error_code == 0, result
    describe = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4, resource_name="", configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    (described,) = wire_call(bootstrap, describe, 4).results
    assert described.error_code == 0, described
    return {c.name: (c.value, c.config_source) for c in described.configs}


def test_dynamic_broker_configs_layer_over_static_ones_and_persist(broker):
    plain, own = topic_name("ck-dyn-plain"), topic_name("ck-dyn-own")
    a = create(broker.bootstrap, plain, 1)
    create(broker.bootstrap, own, 1, {"retention.ms": "1000000"})
    b0 = ConfigResource("broker", "0")
    e = a.describe_configs([b0])[b0].result(15)
    assert not e["log.retention.ms"].is_read_only and e["log.dirs"].is_read_only

    # The cluster-wide default, then this broker's own value over it.
    assert _cluster_default(
        broker.bootstrap, log_retention_ms="3600000", message_max_bytes="10000"
    ) == {
        "log.retention.ms": ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        "message.max.bytes": ("10000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
    }
    e = _describe(a, plain)
    assert e["retention.ms"].value == "3600000"
    assert e["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert _describe(a, own)["retention.ms"].value == "1000000"
    assert _incremental(a, "0", log_retention_ms="7200000") is None
    e = _describe(a, plain)
    assert e["retention.ms"].value == "7200000"
    assert e["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    synonyms = e["retention.ms"].synonyms  # confluent-kafka keys them by name
    assert synonyms["log.retention.ms"].value in ("7200000", "3600000")
    assert (synonyms["log.retention.hours"].value, synonyms["log.retention.hours"].source) == (
        "168",
        ConfigSource.DEFAULT_CONFIG.value,
    )

    # The new default applies to the running logs at once.
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors = []
    p.produce(
        plain, value=b"x" * 20000, partition=0, on_delivery=lambda err, msg: errors.append(err)
    )
    p.flush(30)
    assert (
        len(errors) == 1
        and errors[0] is not None
        and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    ), errors

    # Keys that cannot change at runtime, bad values and other brokers are refused.
    for resource, ops in [
        ("0", {"log_dirs": "/elsewhere"}),
        ("0", {"log_retention_ms": "soon"}),
        ("0", {"no.such.key": "1"}),
    ]:
        err = _incremental(a, resource, **ops)
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, (ops, err)
    with pytest.raises(AssertionError, match="error_code=42"):  # INVALID_REQUEST: not this broker
        _cluster_default(broker.bootstrap, resource="7", log_retention_ms="1")
    assert _describe(a, plain)["retention.ms"].value == "7200000"

    broker.restart()
    a = admin(broker.bootstrap)
    assert _describe(a, plain)["retention.ms"].value == "7200000"
    assert _incremental(a, "0", log_retention_ms=None) is None
    assert _cluster_default(broker.bootstrap, log_retention_ms=None, message_max_bytes=None) == {}
    e = _describe(a, plain)
    assert e["retention.ms"].value == "604800000" and e["max.message.bytes"].is_default


# --- offsets for times, watermarks -----------------------------------------------------


def test_offsets_for_times_and_watermarks(module_broker):
    name = topic_name("ck-oft")
    a = create(module_broker.bootstrap, name, 2)
    base = now_ms() - 600_000
    recs = [Rec(0, None, b"p0-%d" % i, [], base + i * 1000) for i in range(10)]
    # Partition 1: timestamps that are not monotonic: the answer is the first offset
    # whose timestamp is >= the target, not the first in timestamp order.
    p1_ts = [base + d for d in (0, 5000, 2000, 6000, 1000)]
    recs += [Rec(1, None, b"p1-%d" % i, [], ts) for i, ts in enumerate(p1_ts)]
    produce(module_broker.bootstrap, name, recs, flush_every=3)  # several batches

    c = consumer(module_broker.bootstrap)
    try:

        def oft(p, ts):
            [tp] = c.offsets_for_times([TopicPartition(name, p, ts)], 10)
            assert tp.error is None
            return tp.offset

        assert oft(0, base - 1) == 0
        assert oft(0, base) == 0
        assert oft(0, base + 1) == 1
        assert oft(0, base + 2500) == 3
        assert oft(0, base + 3000) == 3
        assert oft(0, base + 9000) == 9
        assert oft(0, base + 9001) == OFFSET_END  # -1: nothing that late
        assert oft(1, base + 1500) == 1
        assert oft(1, base + 2000) == 1
        assert oft(1, base + 5500) == 3
        assert oft(1, base + 6000) == 3
        assert oft(1, base + 6001) == OFFSET_END
        assert c.get_watermark_offsets(TopicPartition(name, 0), 10) == (0, 10)
        assert c.get_watermark_offsets(TopicPartition(name, 1), 10) == (0, 5)
    finally:
        c.close()

    specs = {
        TopicPartition(name, 0): OffsetSpec.earliest(),
        TopicPartition(name, 1): OffsetSpec.latest(),
    }
    got = {tp.partition: f.result(15) for tp, f in a.list_offsets(specs).items()}
    assert got[0].offset == 0 and got[1].offset == 5
    mx = a.list_offsets({TopicPartition(name, 1): OffsetSpec.max_timestamp()})
    info = next(iter(mx.values())).result(15)
    assert (info.offset, info.timestamp) == (3, base + 6000)
    ft = a.list_offsets({TopicPartition(name, 0): OffsetSpec.for_timestamp(base + 4500)})
    assert next(iter(ft.values())).result(15).offset == 5


# --- fetch edge cases ------------------------------------------------------------------


def _fill(bootstrap, name, n, partition=0, size=10):
    return produce(
        bootstrap, name, [Rec(partition, None, b"%0*d" % (size, i), [], now_ms()) for i in range(n)]
    )


def _wait_eof(c: Consumer, offset: int, timeout: float = 15) -> None:
    """Polls until the consumer reports end of partition at ``offset`` (librdkafka's
    position() stays invalid until a record is consumed); no record may arrive."""
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"no end-of-partition at {offset}"
        m = c.poll(0.1)
        if m is None:
            continue
        assert m.error() is not None, f"unexpected record at offset {m.offset()}"
        if m.error().code() == KafkaError._PARTITION_EOF and m.offset() == offset:
            return
        assert m.error().code() == KafkaError._PARTITION_EOF, m.error()


def test_out_of_range_offset_resets_earliest_latest_error(module_broker):
    name = topic_name("ck-oor")
    create(module_broker.bootstrap, name, 1)
    _fill(module_broker.bootstrap, name, 10)

    c = consumer(module_broker.bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(name, 0, 100)])
        m = wait_until(
            lambda: (m := c.poll(0.2)) is not None and m.error() is None and m,
            message="a record after reset",
        )
        assert (m.offset(), m.value()) == (0, b"%010d" % 0)
    finally:
        c.close()

    c = consumer(module_broker.bootstrap, auto_offset_reset="latest")
    try:
        tp = TopicPartition(name, 0, 100)
        c.assign([tp])

        _wait_eof(c, 10)  # reset to the end
        _fill(module_broker.bootstrap, name, 1)
        m = wait_until(
            lambda: (m := c.poll(0.2)) is not None and m.error() is None and m,
            message="the new record",
        )
        assert m.offset() == 10
    finally:
        c.close()

    c = consumer(module_broker.bootstrap, auto_offset_reset="error")
    try:
        c.assign([TopicPartition(name, 0, 100)])
        m = wait_until(
            lambda: (
                (m := c.poll(0.2)) is not None
                and m.error() is not None
                and m.error().code() != KafkaError._PARTITION_EOF
                and m
            ),
            message="an error",
        )
        assert m.error().code() == KafkaError._AUTO_OFFSET_RESET, m.error()
    finally:
        c.close()


def test_long_poll_wakes_on_produce_and_holds_when_idle(module_broker):
    name = topic_name("ck-longpoll")
    create(module_broker.bootstrap, name, 1)
    _fill(module_broker.bootstrap, name, 3)
    stats = []
    c = consumer(
        module_broker.bootstrap,
        fetch_wait_max_ms=30000,
        fetch_min_bytes=1,
        statistics_interval_ms=500,
        stats_cb=lambda s: stats.append(json.loads(s)),
    )
    p = Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0})
    p.list_topics(name, timeout=10)
    try:
        c.assign([TopicPartition(name, 0, 3)])  # the end

        def quiet_poll(timeout):
            m = c.poll(timeout)
            assert m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF), (
                m and (m.error(), m.offset())
            )

        def fetch_requests():
            quiet_poll(0.1)
            if not stats:
                return 0
            return sum(
                b.get("req", {}).get("Fetch", 0)
                for b in stats[-1]["brokers"].values()
                if b.get("nodeid", -1) >= 0
            )

        # Idle: each Fetch is held up to fetch.wait.max.ms, so few requests are made.
        before = wait_until(fetch_requests, message="a first Fetch request in the statistics")
        t_before = time.monotonic()
        while time.monotonic() - t_before < 4.0:
            quiet_poll(0.1)
        idle_fetches = fetch_requests() - before
        assert idle_fetches <= 3, (
            f"{idle_fetches} Fetch requests in 4s with fetch.wait.max.ms=30000: "
            "the broker does not hold them"
        )

        def send_later():
            time.sleep(0.7)
            p.produce(name, value=b"wake", partition=0)
            p.flush(10)

        th = threading.Thread(target=send_later)
        th.start()
        deadline = time.monotonic() + 20  # before the 30 s fetch wait ends: woken by the append
        while True:
            assert time.monotonic() < deadline, (
                "the record produced during the long poll never arrived"
            )
            m = c.poll(0.05)
            if m is not None and not m.error():
                break
            assert m is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
        th.join()
        assert m.value() == b"wake" and m.offset() == 3
    finally:
        c.close()


def test_partition_fetch_bytes_smaller_than_a_batch(module_broker):
    name = topic_name("ck-smallfetch")
    create(module_broker.bootstrap, name, 1)
    p = Producer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "linger.ms": 500,
            "batch.num.messages": 1000,
            "compression.type": "none",
        }
    )
    values = [b"%04d" % i + b"x" * 996 for i in range(40)]
    for v in values:
        p.produce(name, value=v, partition=0)
    assert p.flush(30) == 0
    batches = stored_batches(module_broker.data_dir, name, 0)
    assert len(batches) == 1 and batches[0].records == 40, batches  # one ~40 KB batch
    got = consume_partitions(
        module_broker.bootstrap,
        name,
        1,
        40,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
        message_max_bytes=1000,
    )[0]
    assert [g[2] for g in got] == values
    assert [g[0] for g in got] == list(range(40))


# --- DeleteRecords ---------------------------------------------------------------------


def test_delete_records_advances_log_start(module_broker):
    name = topic_name("ck-delrec")
    a = create(module_broker.bootstrap, name, 2)
    _fill(module_broker.bootstrap, name, 10, partition=0)
    _fill(module_broker.bootstrap, name, 10, partition=1)
    fs = a.delete_records([TopicPartition(name, 0, 4), TopicPartition(name, 1, OFFSET_END)])
    lows = {tp.partition: f.result(15).low_watermark for tp, f in fs.items()}
    assert lows == {0: 4, 1: 10}
    [f] = a.delete_records([TopicPartition(name, 0, 50)]).values()
    err = error_of(f)
    assert err is not None and err.code() == KafkaError.OFFSET_OUT_OF_RANGE, err

    c = consumer(module_broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(name, 0), 10) == (4, 10)
        assert c.get_watermark_offsets(TopicPartition(name, 1), 10) == (10, 10)
    finally:
        c.close()
    got = consume_partitions(module_broker.bootstrap, name, 2, 6)
    assert [g[0] for g in got[0]] == [4, 5, 6, 7, 8, 9] and 1 not in got
    assert [g[2] for g in got[0]] == [b"%010d" % i for i in range(4, 10)]
    # Fetching below the log start is out of range: reset to earliest lands on 4.
    got = consume_partitions(module_broker.bootstrap, name, 1, 6, start=1)
    assert [g[0] for g in got[0]] == [4, 5, 6, 7, 8, 9]
    reports = _fill(module_broker.bootstrap, name, 1, partition=1)
    assert reports[0][1] == 10


# --- restart ---------------------------------------------------------------------------


def test_restart_keeps_everything_and_continues_offsets(broker):
    name = topic_name("ck-restart")
    create(broker.bootstrap, name, 2)
    records = sample_records(2, 15, now_ms() - 60_000)
    produce(broker.bootstrap, name, records, {"compression.type": "zstd"}, flush_every=8)
    broker.restart()
    consumed = consume_partitions(broker.bootstrap, name, 2, len(records))
    assert_partition_contents(records, consumed)
    more = sample_records(2, 3, now_ms())
    reports = produce(broker.bootstrap, name, more)
    assert sorted((r[0], r[1]) for r in reports) == [
        (0, 15),
        (0, 16),
        (0, 17),
        (1, 15),
        (1, 16),
        (1, 17),
    ]
    consumed = consume_partitions(broker.bootstrap, name, 2, len(records) + len(more))
    assert_partition_contents(records + more, consumed)
