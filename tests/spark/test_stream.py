"""Streaming reads (files and network) and batch reads over the Kafka protocol from
a running broker."""

from __future__ import annotations

import os

import pytest

from .helpers import rows_as_produced, write_partition

pytest.importorskip("pyspark")


def _stream(spark, **options):  # type: ignore[no-untyped-def]
    r = spark.readStream.format("logstore")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r


def _run_available_now(df, name: str, checkpoint: str, out: str | None = None):  # type: ignore[no-untyped-def]
    """Runs a query to the end; into the memory table ``name``, or Parquet under ``out``
    (which, unlike the memory sink, resumes from its checkpoint)."""
    w = df.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True)
    q = (
        w.format("parquet").option("path", out).start()
        if out
        else w.format("memory").queryName(name).start()
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_micro_batches_respect_max_offsets_per_trigger(spark, tmp_path):
    root = str(tmp_path / "logs")
    produced = write_partition(root, "s", 0, 500, batch=25) + write_partition(
        root, "s", 1, 500, batch=25, codec="zstd"
    )
    df = _stream(spark, path=root, startingOffsets="earliest", maxOffsetsPerTrigger=300).load()
    sizes = _run_available_now(df, "limited", str(tmp_path / "ckpt"))
    assert all(n <= 300 for n in sizes) and len(sizes) >= 4, sizes
    got = spark.table("limited").collect()
    assert sorted((r["partition"], r["offset"]) for r in got) == sorted(
        (p.partition, p.offset) for p in produced
    )


def test_min_offsets_per_trigger_and_assign_in_a_query(spark, tmp_path):
    root = str(tmp_path / "logs")
    produced = write_partition(root, "few", 0, 60) + write_partition(root, "few", 1, 40)
    write_partition(root, "few", 2, 500)
    # Spark takes the ReadMinRows default limit; AvailableNow reads what there is
    # although it is fewer offsets than the minimum.
    df = _stream(
        spark,
        path=root,
        startingOffsets="earliest",
        minOffsetsPerTrigger=1000,
        assign='{"few": [0, 1]}',
    ).load()
    assert sum(_run_available_now(df, "few", str(tmp_path / "ckpt"))) == 100
    got = spark.table("few").collect()
    assert sorted((r["partition"], r["offset"]) for r in got) == sorted(
        (p.partition, p.offset) for p in produced
    )


def test_appends_and_new_partitions_between_runs(spark, tmp_path):
    root = str(tmp_path / "logs")
    ckpt = str(tmp_path / "ckpt")
    first = write_partition(root, "grow", 0, 100)
    out = str(tmp_path / "out")
    df = _stream(spark, path=root, startingOffsets="earliest", includeHeaders="true").load()
    assert sum(_run_available_now(df, "", ckpt, out)) == 100
    assert rows_as_produced(spark.read.parquet(out).collect()) == first
    more = write_partition(root, "grow", 0, 50) + write_partition(root, "grow", 1, 30)
    # new records of partition 0 continue its offsets
    assert [p.offset for p in more[:50]] == list(range(100, 150))
    assert sum(_run_available_now(df, "", ckpt, out)) == 80
    want = sorted(first + more, key=lambda p: (p.partition, p.offset))
    assert rows_as_produced(spark.read.parquet(out).collect()) == want


def test_streaming_starts_at_latest_by_default(spark, tmp_path):
    root = str(tmp_path / "logs")
    write_partition(root, "late", 0, 40)
    df = _stream(spark, path=root).load()
    assert _run_available_now(df, "late", str(tmp_path / "ckpt")) == []


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    from integration.conftest import BrokerProcess

    b = BrokerProcess(str(tmp_path_factory.mktemp("broker")), {"num.partitions": "2"})
    b.start()
    yield b
    b.kill()


def _produce(bootstrap: str, topic: str, n: int, codec: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    for i in range(n):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode() * 3,
            partition=i % 2,
            headers=[("i", str(i).encode())],
        )
    assert p.flush(30) == 0


def test_network_mode_batch_and_stream(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    _produce(bootstrap, "net", 400, "zstd")
    _produce(bootstrap, "net2", 50, "lz4")
    df = (
        spark.read.format("logstore")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topics", "net")
        .option("includeHeaders", "true")
        .load()
    )
    rows = df.collect()
    assert len(rows) == 400
    by_value = {bytes(r["value"]): r for r in rows}
    for i in range(400):
        r = by_value[f"v{i}".encode() * 3]
        assert bytes(r["key"]) == f"k{i}".encode() and r["partition"] == i % 2
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == [("i", str(i).encode())]
    for p in (0, 1):
        assert sorted(r["offset"] for r in rows if r["partition"] == p) == list(range(200))
    # the same files, read from disk, give the same rows
    files = spark.read.format("logstore").option("topics", "net").load(kafka_broker.data_dir)
    assert sorted(files.select("partition", "offset", "value").collect()) == sorted(
        df.select("partition", "offset", "value").collect()
    )
    # offsets options over the network
    ranged = (
        spark.read.format("logstore")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topics", "net")
        .option("startingOffsets", '{"net": {"0": 150, "1": -2}}')
        .option("endingOffsets", '{"net": {"0": -1, "1": 10}}')
        .load()
    )
    assert sorted((r["partition"], r["offset"]) for r in ranged.collect()) == [
        (0, o) for o in range(150, 200)
    ] + [(1, o) for o in range(10)]
    # every non-internal topic by default
    assert {
        r["topic"]
        for r in spark.read.format("logstore")
        .option("kafka.bootstrap.servers", bootstrap)
        .load()
        .select("topic")
        .distinct()
        .collect()
    } == {"net", "net2"}

    stream = _stream(
        spark,
        **{
            "kafka.bootstrap.servers": bootstrap,
            "topics": "net",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": 150,
        },
    ).load()
    sizes = _run_available_now(stream, "netstream", str(tmp_path / "ckpt"))
    assert all(n <= 150 for n in sizes) and sum(sizes) == 400, sizes
    got = spark.table("netstream").collect()
    assert sorted((r["partition"], r["offset"]) for r in got) == sorted(
        (p, o) for p in (0, 1) for o in range(200)
    )
    assert os.path.isdir(kafka_broker.data_dir)


def test_reading_files_of_a_broker_while_it_takes_produce(spark, kafka_broker):
    """Batch reads of the live broker's segment files, while a producer writes: every
    read returns, per partition, a gap-free run of offsets from 0 (whole batches, up to
    the end fixed at planning), and never fewer rows than the read before."""
    import threading

    from confluent_kafka import Producer

    bootstrap = kafka_broker.bootstrap
    stop = threading.Event()
    _produce(bootstrap, "live", 200, "snappy")

    def produce() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 2})
        i = 0
        while not stop.is_set():
            p.produce("live", value=b"x" * 50, partition=i % 2)
            i += 1
            if i % 500 == 0:
                p.flush(10)
        p.flush(10)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        last = 0
        for _ in range(3):
            rows = (
                spark.read.format("logstore")
                .option("topics", "live")
                .load(kafka_broker.data_dir)
                .select("partition", "offset")
                .collect()
            )
            for p in (0, 1):
                got = sorted(r["offset"] for r in rows if r["partition"] == p)
                assert got == list(range(len(got)))
            assert len(rows) >= max(last, 200)
            last = len(rows)
    finally:
        stop.set()
        writer.join()
