"""Option parsing, pushdown translation, range splitting and rate limiting (no Spark session)."""

from __future__ import annotations

import datetime as dt

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)  # noqa: E402

from logstore import LogStoreError  # noqa: E402
from logstore.spark.errors import InvalidOptionError  # noqa: E402
from logstore.spark.offset_range import OffsetRange, split_ranges  # noqa: E402
from logstore.spark.options import parse_options  # noqa: E402
from logstore.spark.pushdown import PushedFilters  # noqa: E402
from logstore.spark.stream_reader import _rate_limit  # noqa: E402


def test_defaults_and_kafka_names():
    o = parse_options({"path": "/a,/b"}, streaming=False)
    assert (
        o.log_dirs == ("/a", "/b") and o.starting.kind == "earliest" and o.ending.kind == "latest"
    )
    assert (
        o.fail_on_data_loss
        and not o.include_headers
        and o.selects("t")
        and not o.selects("__consumer_offsets")
    )
    s = parse_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "a.*"}, streaming=True)
    assert s.starting.kind == "latest" and s.selects("abc") and not s.selects("xa")
    j = parse_options(
        {"path": "/a", "startingOffsets": '{"t": {"0": 5, "1": -2}}'}, streaming=False
    )
    assert j.starting.per_partition == {("t", 0): 5, ("t", 1): -2}
    ts = parse_options(
        {"path": "/a", "startingTimestamp": "7", "startingOffsets": "latest"}, streaming=False
    )
    assert ts.starting.kind == "timestamps" and ts.starting.timestamp == 7


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"path": "/a", "topics": "a", "subscribePattern": "b"},
        {"path": "/a", "endingOffsets": "earliest"},
        {"path": "/a", "endingOffsets": '{"t": {"0": -2}}'},
        {"path": "/a", "minPartitions": "0"},
        {"path": "/a", "subscribePattern": "("},
        {"path": "/a", "startingOffsetsByTimestampStrategy": "nope"},
        {"path": "/a", "assign": '{"t": [0]}', "topics": "t"},
        {"path": "/a", "assign": '{"t": [0]}', "subscribePattern": "t"},
        {"path": "/a", "assign": "[0, 1]"},
        {"path": "/a", "assign": '{"t": []}'},
        {"path": "/a", "assign": '{"t": [-1]}'},
        {"path": "/a", "minOffsetsPerTrigger": "0"},
        {"path": "/a", "maxTriggerDelay": "soon"},
        {"path": "/a", "maxTriggerDelay": "5 weeks"},
    ],
)
def test_bad_options_raise_typed_errors(options):
    with pytest.raises(InvalidOptionError) as e:
        parse_options(options, streaming=False)
    assert isinstance(e.value, LogStoreError)


def test_ending_offsets_are_batch_only():
    with pytest.raises(InvalidOptionError, match="batch"):
        parse_options({"path": "/a", "endingOffsets": "latest"}, streaming=True)


def test_pushdown_translation():
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    naive = dt.datetime(2026, 1, 1)
    filters = [
        In(("partition",), (1, 3)),
        LessThan(("partition",), 3),
        GreaterThan(("offset",), 9),
        LessThanOrEqual(("offset",), 20),
        GreaterThanOrEqual(("timestamp",), t),
        LessThan(("timestamp",), naive),
        EqualTo(("key",), b"x"),
    ]
    p = PushedFilters()
    left = list(p.push(filters))
    assert left == filters[4:]  # timestamps are re-checked by Spark; key is not ours
    b = p.bounds
    assert b.partitions == frozenset({1}) and b.min_offset == 10 and b.end_offset == 21
    assert b.min_timestamp == int(t.timestamp() * 1000) and b.max_timestamp is None


def test_assign_and_trigger_options():
    a = parse_options({"path": "/a", "assign": '{"t": [0, 2], "u": [1]}'}, streaming=True)
    assert a.assigned == frozenset({("t", 0), ("t", 2), ("u", 1)})
    assert a.selects("t") and a.selects("t", 2) and not a.selects("t", 1) and not a.selects("v")
    assert parse_options({"path": "/a"}, streaming=True).max_trigger_delay_ms == 15 * 60_000
    for text, ms in [
        ("500ms", 500),
        ("30s", 30_000),
        ("5m", 300_000),
        ("2min", 120_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("250", 250),
    ]:
        o = parse_options(
            {"path": "/a", "maxTriggerDelay": text, "minOffsetsPerTrigger": "10"}, streaming=True
        )
        assert (o.max_trigger_delay_ms, o.min_offsets_per_trigger) == (ms, 10), text


def test_split_ranges_and_rate_limit():
    ranges = split_ranges([OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10)], 4)
    assert len(ranges) >= 4 and sum(r.size for r in ranges) == 110
    assert [r for r in ranges if r.partition == 0][0].start == 0
    begin = {("t", 0): 0, ("t", 1): 50}
    latest = {("t", 0): 900, ("t", 1): 150}
    got = _rate_limit(begin, latest, 100)
    assert sum(got[tp] - begin[tp] for tp in got) <= 100 and all(got[tp] > begin[tp] for tp in got)
    assert _rate_limit(begin, latest, 10_000) == latest


def test_export_bounds():
    from logstore.spark.export import parse_bound

    assert parse_bound("42", "--from").offset == 42
    t = parse_bound("2026-11-21T10:00:00Z", "--from").time
    assert t == dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC)
    assert parse_bound("2026-11-21T10:00:00", "--to").time.tzinfo is not None
    with pytest.raises(InvalidOptionError, match="--to"):
        parse_bound("yesterday", "--to")
