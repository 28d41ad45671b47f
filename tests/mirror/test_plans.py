"""Topic sync and group offset sync decisions, and the metric sensors."""

from __future__ import annotations

from logstore.mirror.filters import ConfigPropertyFilter
from logstore.mirror.group_plan import offsets_to_write
from logstore.mirror.sensors import Sensors
from logstore.mirror.topic_plan import TopicActions, TopicState, plan

F = ConfigPropertyFilter()


def test_new_remote_topic_gets_partitions_and_replicated_configs():
    src = TopicState(6, {"cleanup.policy": "compact", "min.insync.replicas": "2"})
    assert plan(src, None, F) == TopicActions(
        create_partitions=6, set_configs={"cleanup.policy": "compact"}
    )


def test_existing_remote_topic_is_kept_in_step():
    src = TopicState(8, {"retention.ms": "1000"})
    tgt = TopicState(6, {"retention.ms": "5", "segment.bytes": "1024", "min.insync.replicas": "2"})
    got = plan(src, tgt, F)
    assert got.grow_to == 8
    assert got.set_configs == {"retention.ms": "1000"}
    # set on the target, gone from the source: back to the default; the excluded
    # property is the target's own business
    assert got.delete_configs == ("segment.bytes",)
    assert plan(TopicState(6), TopicState(8), F).grow_to is None  # never shrinks
    assert plan(src, tgt, F, sync_configs=False) == TopicActions(grow_to=8)
    assert plan(TopicState(1, {"a": "b"}), TopicState(1, {"a": "b"}), F).empty()


def test_group_offsets_are_written_only_to_idle_groups_and_never_backwards():
    translated = {("A.t", 0): 10, ("A.t", 1): 20, ("A.t", 2): -1}
    assert offsets_to_write("STABLE", translated, {}) == {}
    assert offsets_to_write(None, translated, {}) == {("A.t", 0): 10, ("A.t", 1): 20}
    assert offsets_to_write("EMPTY", translated, {("A.t", 0): 15, ("A.t", 1): 5}) == {
        ("A.t", 1): 20
    }
    assert offsets_to_write("Dead", translated, {}) != {}


def test_sensors_report_mm2_metric_names():
    now = [1000.0]
    s = Sensors("us", "eu", lambda: now[0])
    s.copied("us.t", 0, 10, 500, 999_000, 999_500)
    now[0] += 1
    s.acknowledged("us.t", 0, 999_900)
    s.checkpointed("g", "us.t", 0, now[0] - 0.25)
    got = {(kind, name, tuple(sorted(labels.items()))): v for kind, name, labels, v in s.samples()}
    src = (("partition", "0"), ("target", "eu"), ("topic", "us.t"))
    assert got[("MirrorSourceConnector", "record-count", src)] == 10
    assert got[("MirrorSourceConnector", "byte-count", src)] == 500
    assert got[("MirrorSourceConnector", "record-age-ms", src)] == 500
    assert got[("MirrorSourceConnector", "record-age-ms-max", src)] == 1000
    assert got[("MirrorSourceConnector", "record-age-ms-min", src)] == 500
    assert got[("MirrorSourceConnector", "replication-latency-ms", src)] == 1100
    assert got[("MirrorSourceConnector", "record-rate", src)] > 0
    assert got[("MirrorSourceConnector", "byte-rate", src)] > 0
    cp = (("group", "g"), ("partition", "0"), ("source", "us"), ("target", "eu"), ("topic", "us.t"))
    assert got[("MirrorCheckpointConnector", "checkpoint-latency-ms", cp)] == 250
    now[0] += 100  # the window forgets
    later = {(n, tuple(sorted(lb.items()))): v for _, n, lb, v in s.samples()}
    assert later[("record-age-ms-avg", src)] == 0
    assert later[("record-count", src)] == 10
