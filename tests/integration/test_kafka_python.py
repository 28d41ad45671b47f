"""kafka-python against a real broker: produce/consume with every codec, topics and
partitions, offsets for times, fetch edge cases, DeleteRecords and restarts."""

from __future__ import annotations

import threading
import time

import kafka.errors as Errors
import pytest
from kafka import (
    TopicPartition,
)
from kafka.structs import OffsetAndMetadata

from tests.integration.clients import (
    Rec,
    assert_partition_contents,
    assert_stored_codec,
    now_ms,
    stored_batches,
    topic_name,
    wait_until,
)
from tests.integration.kafka_python_support import (
    CODEC_LIBS,
    admin,
    consume_partitions,
    consumer,
    create,
    drain,
    kp_records,
    produce,
    producer,
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
