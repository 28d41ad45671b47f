"""Batch reads of segment files through Spark: content, every offset and timestamp
option, topic selection, minPartitions, failOnDataLoss, transactions, pushdown, and
reads while a writer appends, rolls and deletes segments."""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import threading

import pytest

import logstore
from logstore import _native

from .helpers import BASE_TS, rows_as_produced, write_partition

pytest.importorskip("pyspark")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Topics c-<codec> (2 partitions x 60 records), 'seg' (1 partition, many small
    segments), and an internal topic that a default read skips."""
    root = str(tmp_path_factory.mktemp("logdirs"))
    produced = {}
    for codec in CODECS:
        for p in range(2):
            produced[(f"c-{codec}", p)] = write_partition(
                root, f"c-{codec}", p, 60, codec=codec, batch=7
            )
    produced[("seg", 0)] = write_partition(root, "seg", 0, 400, batch=10, segment_bytes=1200)
    write_partition(root, "__consumer_offsets", 0, 5)
    return root, produced


def read(spark, root, **options):  # type: ignore[no-untyped-def]
    r = spark.read.format("logstore")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(root)


def offsets(df) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(r["offset"] for r in df.select("offset").collect())


def test_schema_is_kafka_sources(spark, data):
    root, _ = data
    df = read(spark, root, topics="c-none")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    assert (
        read(spark, root, topics="c-none", includeHeaders="true")
        .schema.simpleString()
        .endswith("headers:array<struct<key:string,value:binary>>>")
    )


def test_content_equals_produced_for_every_codec_with_headers(spark, data):
    root, produced = data
    topics = ",".join(f"c-{c}" for c in CODECS)
    rows = read(spark, root, topics=topics, includeHeaders="true").collect()
    want = sorted(
        (r for (t, _), rs in produced.items() if t.startswith("c-") for r in rs),
        key=lambda p: (p.topic, p.partition, p.offset),
    )
    assert rows_as_produced(rows) == want
    assert {r["timestampType"] for r in rows} == {0}


def test_every_topic_but_internal_ones_by_default_and_pattern(spark, data):
    root, produced = data
    topics = {r["topic"] for r in read(spark, root).select("topic").distinct().collect()}
    assert topics == {f"c-{c}" for c in CODECS} | {"seg"}
    got = {
        r["topic"]
        for r in read(spark, root, subscribePattern="c-(lz4|zstd)")
        .select("topic")
        .distinct()
        .collect()
    }
    assert got == {"c-lz4", "c-zstd"}


def test_starting_and_ending_offsets(spark, data):
    root, _ = data
    assert offsets(
        read(spark, root, topics="seg", startingOffsets="earliest", endingOffsets="latest")
    ) == list(range(400))
    df = read(
        spark,
        root,
        topics="c-gzip",
        startingOffsets='{"c-gzip": {"0": 10, "1": -2}}',
        endingOffsets='{"c-gzip": {"0": 20, "1": -1}}',
    )
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(60)]
    assert read(spark, root, topics="seg", startingOffsets="latest").count() == 0


def test_timestamp_options(spark, data):
    root, _ = data
    # record i has timestamp BASE_TS + i s
    assert offsets(read(spark, root, topics="seg", startingTimestamp=BASE_TS + 350_500)) == list(
        range(351, 400)
    )
    by_ts = json.dumps({"c-none": {"0": BASE_TS + 30_000, "1": BASE_TS + 59_000}})
    df = read(spark, root, topics="c-none", startingOffsetsByTimestamp=by_ts)
    assert sorted((r["partition"], r["offset"]) for r in df.collect()) == [
        (0, o) for o in range(30, 60)
    ] + [(1, 59)]
    df = read(
        spark,
        root,
        topics="seg",
        startingTimestamp=BASE_TS + 100_000,
        endingTimestamp=BASE_TS + 120_000,
    )
    assert offsets(df) == list(range(100, 120))
    ending = json.dumps({"c-none": {"0": BASE_TS + 5_000}})
    df = read(spark, root, topics="c-none", endingOffsetsByTimestamp=ending)
    assert sorted((r["partition"], r["offset"]) for r in df.collect()) == [
        (0, o) for o in range(5)
    ] + [(1, o) for o in range(60)]
    with pytest.raises(Exception, match="OffsetForTimestampNotFound|no record has a timestamp"):
        read(spark, root, topics="seg", startingTimestamp=BASE_TS + 10**9).count()
    late = read(
        spark,
        root,
        topics="seg",
        startingTimestamp=BASE_TS + 10**9,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0


def test_min_partitions_splits_ranges(spark, data):
    root, _ = data
    df = read(spark, root, topics="seg", minPartitions=5)
    assert df.rdd.getNumPartitions() >= 5
    assert offsets(df) == list(range(400))


def test_invalid_options_are_named(spark, data):
    root, _ = data
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, root, startingOffsets="{not json").count()
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, root, failOnDataLoss="maybe").count()


def test_fail_on_data_loss(spark, tmp_path):
    root = str(tmp_path)
    write_partition(root, "gone", 0, 200, batch=10, segment_bytes=2048)
    segs = sorted(glob.glob(os.path.join(root, "gone-0", "*.log")))
    assert len(segs) > 3
    first_kept = int(os.path.basename(segs[2])[:20])
    for s in segs[:2]:
        os.remove(s)
    with pytest.raises(Exception, match="DataLoss|below the log start"):
        read(spark, root, startingOffsets='{"gone": {"0": 0}}').count()
    df = read(spark, root, startingOffsets='{"gone": {"0": 0}}', failOnDataLoss="false")
    assert offsets(df) == list(range(first_kept, 200))


def test_control_batches_and_aborted_transactions_are_skipped(spark, tmp_path):
    root = str(tmp_path)
    log = logstore.Log.open(os.path.join(root, "txn-0"))
    try:

        def txn(pid: int, vals: list[bytes]) -> None:
            log.append(
                logstore.encode_batch(
                    [(None, v) for v in vals],
                    "lz4",
                    transactional=True,
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=0,
                )
            )

        txn(1, [b"a1", b"a2"])  # aborted below
        txn(2, [b"c1"])  # committed below
        log.append(logstore.encode_batch([(None, b"plain")]))
        log.append(logstore.encode_control_batch(0, producer_id=1, producer_epoch=0))
        log.append(logstore.encode_control_batch(1, producer_id=2, producer_epoch=0))
        txn(1, [b"open"])  # no marker yet: an open transaction, returned
    finally:
        log.close()
    got = sorted(bytes(r["value"]) for r in read(spark, root).collect())
    assert got == [b"c1", b"open", b"plain"]


def _metrics(d: str) -> list[dict]:
    out = []
    for f in glob.glob(os.path.join(d, "*.json")):
        with open(f) as fh:
            out.append(json.load(fh))
    return out


def test_pushdown_skips_segments(spark, data, tmp_path):
    root, _ = data
    n_segments = len(glob.glob(os.path.join(root, "seg-0", "*.log")))
    assert n_segments >= 10
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    logstore.spark.register(spark)
    try:
        full = str(tmp_path / "full")
        assert read(spark, root, topics="seg", metricsDir=full).count() == 400
        (m_full,) = _metrics(full)
        assert m_full["segments_opened"] == n_segments

        by_offset = str(tmp_path / "offset")
        df = read(spark, root, topics="seg", metricsDir=by_offset).filter(
            "offset >= 380 and offset < 390"
        )
        assert offsets(df) == list(range(380, 390))
        (m,) = _metrics(by_offset)
        assert m["segments_opened"] <= 2 and m["bytes_read"] * 5 < m_full["bytes_read"]

        by_time = str(tmp_path / "time")
        t = dt.datetime.fromtimestamp((BASE_TS + 395_000) / 1000, tz=dt.UTC)
        df = read(spark, root, topics="seg", metricsDir=by_time)
        df = df.filter(df.timestamp >= t)
        assert offsets(df) == list(range(395, 400))
        (m,) = _metrics(by_time)
        assert m["segments_opened"] <= 2 and m["bytes_read"] * 5 < m_full["bytes_read"]

        by_partition = str(tmp_path / "partition")
        df = read(spark, root, topics="c-none,c-lz4", metricsDir=by_partition).filter(
            "partition = 1"
        )
        assert {r["partition"] for r in df.collect()} == {1}
        assert {m["partition"] for m in _metrics(by_partition)} == {1}
        # Filters the source cannot take stay with Spark.
        assert read(spark, root, topics="seg").filter("offset % 100 = 0").count() == 4
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        logstore.spark.register(spark)
    # Pushdown off: the plain reader, same answers.
    assert offsets(read(spark, root, topics="seg").filter("offset >= 390")) == list(range(390, 400))


def test_reads_while_a_writer_appends_rolls_and_deletes(spark, tmp_path):
    """Each read returns whole batches from the log start up to the end fixed at
    planning, while segments roll and the oldest ones are deleted by retention."""
    root = str(tmp_path)
    path = os.path.join(root, "live-0")
    log = logstore.Log.open(path, segment_bytes=4096, retention_bytes=64 << 10)
    stop = threading.Event()
    started = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set() and i < 20000:
            log.append(logstore.encode_batch([(None, b"x" * 40)] * 10, "zstd" if i % 2 else "none"))
            i += 1
            if i == 100:
                started.set()
            if i % 50 == 0:
                log.enforce_retention()
            stop.wait(0.001)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        assert started.wait(30)
        for _ in range(3):
            rows = read(spark, root, failOnDataLoss="false").select("offset").collect()
            got = sorted(r["offset"] for r in rows)
            assert got, "something was read"
            assert len(got) % 10 == 0, "whole batches only"
            assert got == list(range(got[0], got[0] + len(got)))
    finally:
        stop.set()
        writer.join()
        log.close()
    start, end = _native.partition_offsets(path)
    assert offsets(read(spark, root, failOnDataLoss="false")) == list(range(start, end))
