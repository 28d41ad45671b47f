"""aiokafka against a real broker: produce/consume with every codec, admin (topics,
partitions, configs), offsets for times, fetch edge cases, DeleteRecords and restarts.

No pytest-asyncio: each test runs its coroutine with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import time

import aiokafka.codec
import aiokafka.errors as Errors
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.integration.clients import (
    Rec,
    assert_partition_contents,
    assert_stored_codec,
    now_ms,
    sample_records,
    stored_batches,
    topic_name,
)

CODEC_LIBS = {
    "none": (lambda: True, None),
    "gzip": (aiokafka.codec.has_gzip, None),
    "snappy": (aiokafka.codec.has_snappy, "cramjam"),
    "lz4": (aiokafka.codec.has_lz4, "cramjam"),
    "zstd": (aiokafka.codec.has_zstd, "cramjam"),
}

ERR = {
    "none": 0,
    "unknown": 3,
    "invalid_topic": 17,
    "exists": 36,
    "partitions": 37,
    "replication": 38,
    "config": 40,
}


# --- helpers ---------------------------------------------------------------------------


def run(coro, timeout: float = 120):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Admin:
    def __init__(self, bootstrap: str) -> None:
        self.client = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)

    async def __aenter__(self) -> AIOKafkaAdminClient:
        await self.client.start()
        return self.client

    async def __aexit__(self, *exc) -> None:
        await self.client.close()


async def create(bootstrap: str, name: str, partitions: int, configs: dict | None = None) -> None:
    async with Admin(bootstrap) as a:
        r = await a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        assert [(t[0], t[1]) for t in r.topic_errors] == [(name, 0)], r


async def produce(
    bootstrap: str,
    topic: str,
    records,
    p: AIOKafkaProducer | None = None,
    flush_every: int | None = None,
    **extra,
) -> list:
    """Sends ``records``; their RecordMetadata in produce order."""
    own = p is None
    if own:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap, **{"linger_ms": 20, "request_timeout_ms": 15000, **extra}
        )
        await p.start()
    try:
        futures = []
        for n, r in enumerate(records):
            futures.append(
                await p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
            )
            if flush_every and (n + 1) % flush_every == 0:
                await p.flush()
        await p.flush()
        return [await f for f in futures]
    finally:
        if own:
            await p.stop()


def consumer(bootstrap: str, **extra) -> AIOKafkaConsumer:
    conf = {
        "bootstrap_servers": bootstrap,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 15000,
    }
    conf.update(extra)
    return AIOKafkaConsumer(**conf)


async def drain(c: AIOKafkaConsumer, count: int, timeout: float = 30) -> dict:
    out: dict[int, list] = {}
    n = 0
    deadline = time.monotonic() + timeout
    while n < count:
        assert time.monotonic() < deadline, f"consumed {n}/{count}"
        for tp, recs in (await c.getmany(timeout_ms=200)).items():
            for r in recs:
                assert r.timestamp_type == 0
                out.setdefault(tp.partition, []).append(
                    (r.offset, r.key, r.value, list(r.headers or ()), r.timestamp)
                )
                n += 1
    assert not await c.getmany(timeout_ms=300), "more records than produced"
    return out


async def consume_partitions(
    bootstrap: str, topic: str, partitions: int, count: int, start: int | None = None, **extra
) -> dict:
    c = consumer(bootstrap, **extra)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            if start is None:
                await c.seek_to_beginning(tp)
            else:
                c.seek(tp, start)
        return await drain(c, count)
    finally:
        await c.stop()


def ak_records(partitions: int, per_partition: int, base_ts: int) -> list[Rec]:
    # aiokafka refuses records with neither key nor value; null header values are fine.
    return sample_records(partitions, per_partition, base_ts, null_key_and_value=False)


def _configs(resp) -> dict:
    [res] = resp.resources
    assert res[0] == 0, res
    return {e[0]: (e[1], e[3]) for e in res[4]}  # name -> (value, source)


# --- produce / consume -----------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CODEC_LIBS))
def test_round_trip_every_codec(module_broker, codec):
    has, package = CODEC_LIBS[codec]
    assert has(), f"aiokafka needs the {package!r} package for {codec}"
    topic = topic_name(f"ak-rt-{codec}")
    records = ak_records(3, 24, now_ms() - 3_600_000)

    async def main():
        await create(module_broker.bootstrap, topic, 3)
        metas = await produce(
            module_broker.bootstrap,
            topic,
            records,
            compression_type=None if codec == "none" else codec,
        )
        per_partition: dict[int, list] = {}
        for r, m in zip(records, metas):
            # Not m.timestamp: aiokafka 0.14's MessageBatch.done() overwrites its loop
            # variable, giving every record of a batch the first record's timestamp.
            # The consumed timestamps are checked exactly below.
            assert (m.topic, m.partition, m.timestamp_type) == (topic, r.partition, 0)
            per_partition.setdefault(r.partition, []).append(m.offset)
        assert all(offs == list(range(len(offs))) for offs in per_partition.values()), per_partition
        return await consume_partitions(module_broker.bootstrap, topic, 3, len(records))

    assert_partition_contents(records, run(main()))
    if codec == "none":
        assert {
            b.codec for p in range(3) for b in stored_batches(module_broker.data_dir, topic, p)
        } == {0}
    else:
        assert_stored_codec(module_broker.data_dir, topic, 3, codec)


def test_idempotent_producer(module_broker):
    topic = topic_name("ak-idem")
    records = ak_records(2, 20, now_ms() - 60_000)

    async def main():
        await create(module_broker.bootstrap, topic, 2)
        await produce(
            module_broker.bootstrap,
            topic,
            records,
            flush_every=6,
            enable_idempotence=True,
            acks="all",
        )
        return await consume_partitions(module_broker.bootstrap, topic, 2, len(records))

    assert_partition_contents(records, run(main()))


# --- admin -----------------------------------------------------------------------------


def test_create_and_delete_topics_with_errors(module_broker):
    name = topic_name("ak-admin")

    async def main():
        async with Admin(module_broker.bootstrap) as a:

            def codes(resp):
                return [(t[0], t[1]) for t in resp.topic_errors]

            assert codes(await a.create_topics([NewTopic(name, 3, 1)])) == [(name, 0)]
            md = await a.describe_topics([name])
            assert sorted(p["partition"] for p in md[0]["partitions"]) == [0, 1, 2]
            assert name in await a.list_topics()
            assert codes(await a.create_topics([NewTopic(name, 3, 1)])) == [(name, ERR["exists"])]
            for bad in ["bad name!", "y" * 250, ".", "a/b"]:
                assert codes(await a.create_topics([NewTopic(bad, 1, 1)])) == [
                    (bad, ERR["invalid_topic"])
                ]
            zero = topic_name("ak-zero")
            assert codes(await a.create_topics([NewTopic(zero, 0, 1)])) == [
                (zero, ERR["partitions"])
            ]
            rf = topic_name("ak-rf")
            assert codes(await a.create_topics([NewTopic(rf, 1, 2)])) == [(rf, ERR["replication"])]
            badcfg = topic_name("ak-badcfg")
            for cfg in (
                {"retention.ms": "abc"},
                {"cleanup.policy": "both"},
                {"no.such.config": "1"},
            ):
                assert codes(
                    await a.create_topics([NewTopic(badcfg, 1, 1, topic_configs=cfg)])
                ) == [(badcfg, ERR["config"])], cfg
            vo = topic_name("ak-vo")
            assert codes(await a.create_topics([NewTopic(vo, 1, 1)], validate_only=True)) == [
                (vo, 0)
            ]
            topics = await a.list_topics()
            assert not {zero, rf, badcfg, vo} & set(topics)

            nosuch = topic_name("ak-nosuch")
            r = await a.delete_topics([nosuch])
            assert [(t[0], t[1]) for t in r.topic_error_codes] == [(nosuch, ERR["unknown"])]
            r = await a.delete_topics([name])
            assert [(t[0], t[1]) for t in r.topic_error_codes] == [(name, 0)]
            deadline = time.monotonic() + 15
            while name in await a.list_topics():
                assert time.monotonic() < deadline, "deleted topic still listed"
                await asyncio.sleep(0.1)
            r = await a.delete_topics([name])
            assert [(t[0], t[1]) for t in r.topic_error_codes] == [(name, ERR["unknown"])]

    run(main())


def test_create_partitions(module_broker):
    name = topic_name("ak-parts")

    async def main():
        await create(module_broker.bootstrap, name, 1)
        async with Admin(module_broker.bootstrap) as a:
            r = await a.create_partitions({name: NewPartitions(3)})
            assert [(t[0], t[1]) for t in r.topic_errors] == [(name, 0)]
            with pytest.raises(Errors.InvalidPartitionsError):
                await a.create_partitions({name: NewPartitions(2)})
            with pytest.raises(Errors.InvalidPartitionsError):
                await a.create_partitions({name: NewPartitions(3)})
            with pytest.raises(Errors.UnknownTopicOrPartitionError):
                await a.create_partitions({topic_name("ak-parts-none"): NewPartitions(3)})
            md = await a.describe_topics([name])
            assert sorted(p["partition"] for p in md[0]["partitions"]) == [0, 1, 2]
        metas = await produce(
            module_broker.bootstrap, name, [Rec(p, b"k", b"v", [], now_ms()) for p in range(3)]
        )
        assert [(m.partition, m.offset) for m in metas] == [(0, 0), (1, 0), (2, 0)]

    run(main())


def test_configs_describe_alter_and_persist(broker):
    name = topic_name("ak-cfg")

    async def alter(a, configs, topic=name):
        [resp] = await a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)]
        )
        return [r[0] for r in resp.resources]

    async def describe(a, topic=name):
        [resp] = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        return resp

    async def before_restart():
        await create(broker.bootstrap, name, 2, {"retention.bytes": "5000000"})
        async with Admin(broker.bootstrap) as a:
            cfg = _configs(await describe(a))
            assert cfg["retention.ms"] == ("604800000", 5)  # DEFAULT_CONFIG
            assert cfg["cleanup.policy"] == ("delete", 5)
            assert cfg["retention.bytes"] == ("5000000", 1)  # TOPIC_CONFIG
            # AlterConfigs replaces the whole set of overrides.
            assert await alter(
                a, {"retention.ms": "86400000", "cleanup.policy": "compact,delete"}
            ) == [0]
            cfg = _configs(await describe(a))
            assert cfg["retention.ms"] == ("86400000", 1)
            assert cfg["cleanup.policy"] == ("compact,delete", 1)
            assert cfg["retention.bytes"] == ("-1", 5)
            assert await alter(a, {"retention.ms": "never"}) == [ERR["config"]]
            assert await alter(a, {"retention.ms": "1000"}, topic=topic_name("ak-cfg-none")) == [
                ERR["unknown"]
            ]
            [res] = (await describe(a, topic_name("ak-cfg-none"))).resources
            assert res[0] == ERR["unknown"]
            assert _configs(await describe(a))["retention.ms"] == ("86400000", 1)

    async def after_restart():
        async with Admin(broker.bootstrap) as a:
            cfg = _configs(await describe(a))
            assert cfg["retention.ms"] == ("86400000", 1)
            assert cfg["cleanup.policy"] == ("compact,delete", 1)
            md = await a.describe_topics([name])
            assert len(md[0]["partitions"]) == 2

    run(before_restart())
    broker.restart()
    run(after_restart())


# --- offsets for times, watermarks -----------------------------------------------------


def test_offsets_for_times_and_watermarks(module_broker):
    name = topic_name("ak-oft")
    base = now_ms() - 600_000

    async def main():
        await create(module_broker.bootstrap, name, 2)
        recs = [Rec(0, None, b"p0-%d" % i, [], base + i * 1000) for i in range(10)]
        recs += [
            Rec(1, None, b"p1-%d" % i, [], base + d)
            for i, d in enumerate((0, 5000, 2000, 6000, 1000))
        ]
        await produce(module_broker.bootstrap, name, recs, flush_every=4)
        c = consumer(module_broker.bootstrap)
        await c.start()
        try:
            tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)

            async def oft(tp, ts):
                r = (await c.offsets_for_times({tp: ts}))[tp]
                return None if r is None else (r.offset, r.timestamp)

            assert await oft(tp0, base - 1) == (0, base)
            assert await oft(tp0, base + 1) == (1, base + 1000)
            assert await oft(tp0, base + 3000) == (3, base + 3000)
            assert await oft(tp0, base + 9000) == (9, base + 9000)
            assert await oft(tp0, base + 9001) is None
            assert await oft(tp1, base + 2000) == (1, base + 5000)
            assert await oft(tp1, base + 5001) == (3, base + 6000)
            assert await oft(tp1, base + 6001) is None
            assert await c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 5}
        finally:
            await c.stop()

    run(main())


# --- fetch edge cases ------------------------------------------------------------------


def _values(n, size=10, partition=0):
    return [Rec(partition, None, b"%0*d" % (size, i), [], now_ms()) for i in range(n)]


def test_out_of_range_offset_resets(module_broker):
    name = topic_name("ak-oor")

    async def main():
        await create(module_broker.bootstrap, name, 1)
        await produce(module_broker.bootstrap, name, _values(10))
        got = await consume_partitions(
            module_broker.bootstrap, name, 1, 10, start=100, auto_offset_reset="earliest"
        )
        assert [g[0] for g in got[0]] == list(range(10))

        tp = TopicPartition(name, 0)
        c = consumer(module_broker.bootstrap, auto_offset_reset="latest")
        await c.start()
        try:
            c.assign([tp])
            c.seek(tp, 100)
            deadline = time.monotonic() + 15
            while True:
                assert not await c.getmany(timeout_ms=100)
                if await c.position(tp) == 10:
                    break
                assert time.monotonic() < deadline, "position never reset to the end"
            await produce(module_broker.bootstrap, name, _values(1))
            got = await drain(c, 1)
            assert [g[0] for g in got[0]] == [10]
        finally:
            await c.stop()

        c = consumer(module_broker.bootstrap, auto_offset_reset="none")
        await c.start()
        try:
            c.assign([tp])
            c.seek(tp, 100)
            with pytest.raises(Errors.OffsetOutOfRangeError):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    assert not await c.getmany(timeout_ms=200)
        finally:
            await c.stop()

    run(main())


def test_long_poll_receives_record_produced_while_waiting(module_broker):
    name = topic_name("ak-longpoll")

    async def main():
        await create(module_broker.bootstrap, name, 1)
        await produce(module_broker.bootstrap, name, _values(2))
        tp = TopicPartition(name, 0)
        p = AIOKafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=0)
        await p.start()
        c = consumer(module_broker.bootstrap, fetch_max_wait_ms=30000, fetch_min_bytes=1)
        await c.start()
        try:
            c.assign([tp])
            await c.seek_to_end(tp)
            assert await c.position(tp) == 2
            assert not await c.getmany(timeout_ms=500)  # a fetch is parked on the broker

            async def send_later():
                await asyncio.sleep(0.7)
                await p.send_and_wait(name, value=b"wake", partition=0)

            task = asyncio.ensure_future(send_later())
            got = []
            deadline = time.monotonic() + 20  # before the 30 s fetch wait ends: woken by the append
            while not got:
                assert time.monotonic() < deadline, (
                    "the record produced during the long poll never arrived"
                )
                got = (await c.getmany(timeout_ms=50)).get(tp, [])
            await task
            assert [(r.offset, r.value) for r in got] == [(2, b"wake")]
        finally:
            await c.stop()
            await p.stop()

    run(main())


def test_partition_fetch_bytes_smaller_than_a_batch(module_broker):
    name = topic_name("ak-smallfetch")
    values = [b"%04d" % i + b"z" * 996 for i in range(40)]

    async def main():
        await create(module_broker.bootstrap, name, 1)
        await produce(
            module_broker.bootstrap,
            name,
            [Rec(0, None, v, [], now_ms()) for v in values],
            linger_ms=500,
            max_batch_size=100_000,
        )
        batches = stored_batches(module_broker.data_dir, name, 0)
        assert len(batches) == 1 and batches[0].records == 40, batches
        return await consume_partitions(
            module_broker.bootstrap,
            name,
            1,
            40,
            max_partition_fetch_bytes=1024,
            fetch_max_bytes=1024,
        )

    got = run(main())[0]
    assert [g[2] for g in got] == values and [g[0] for g in got] == list(range(40))


# --- DeleteRecords ---------------------------------------------------------------------


def test_delete_records(module_broker):
    name = topic_name("ak-delrec")

    async def main():
        await create(module_broker.bootstrap, name, 1)
        await produce(module_broker.bootstrap, name, _values(10))
        tp = TopicPartition(name, 0)
        async with Admin(module_broker.bootstrap) as a:
            assert await a.delete_records({tp: RecordsToDelete(7)}) == {tp: 7}
            with pytest.raises(Errors.OffsetOutOfRangeError):
                await a.delete_records({tp: RecordsToDelete(11)})
        c = consumer(module_broker.bootstrap)
        await c.start()
        try:
            assert await c.beginning_offsets([tp]) == {tp: 7}
            assert await c.end_offsets([tp]) == {tp: 10}
        finally:
            await c.stop()
        got = await consume_partitions(module_broker.bootstrap, name, 1, 3)
        assert [g[0] for g in got[0]] == [7, 8, 9]
        got = await consume_partitions(module_broker.bootstrap, name, 1, 3, start=0)
        assert [g[0] for g in got[0]] == [7, 8, 9]

    run(main())


# --- restart ---------------------------------------------------------------------------


def test_restart_keeps_everything_and_continues_offsets(broker):
    name = topic_name("ak-restart")
    records = ak_records(2, 12, now_ms() - 60_000)
    more = ak_records(2, 2, now_ms())

    async def before():
        await create(broker.bootstrap, name, 2)
        await produce(broker.bootstrap, name, records, flush_every=5, compression_type="snappy")

    async def after():
        consumed = await consume_partitions(broker.bootstrap, name, 2, len(records))
        assert_partition_contents(records, consumed)
        metas = await produce(broker.bootstrap, name, more)
        assert sorted((m.partition, m.offset) for m in metas) == [
            (0, 12),
            (0, 13),
            (1, 12),
            (1, 13),
        ]
        return await consume_partitions(broker.bootstrap, name, 2, len(records) + len(more))

    run(before())
    broker.restart()
    assert_partition_contents(records + more, run(after()))
