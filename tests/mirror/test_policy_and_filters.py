"""Replication policies (remote topic names, cycles, internal topics) and MM2's filters."""

from __future__ import annotations

import pytest

from logstore.mirror import replication_policy as rp
from logstore.mirror.filters import ConfigPropertyFilter, GroupFilter, TopicFilter, split_list


def test_default_policy_names_as_mm2():
    p = rp.DefaultReplicationPolicy()
    assert p.format_remote_topic("us", "orders") == "us.orders"
    assert p.topic_source("us.orders") == "us"
    assert p.upstream_topic("eu.us.orders") == "us.orders"
    assert p.original_topic("eu.us.orders") == "orders"
    assert p.topic_source("orders") is None
    assert p.offset_syncs_topic("eu") == "mm2-offset-syncs.eu.internal"
    assert p.checkpoints_topic("us") == "us.checkpoints.internal"
    assert p.heartbeats_topic() == "heartbeats"
    assert p.is_heartbeats_topic("us.heartbeats") and p.is_heartbeats_topic("heartbeats")
    assert p.is_internal_topic("__consumer_offsets")
    assert p.is_internal_topic("mm2-offsets.us.internal")
    assert p.is_internal_topic("connect-configs-internal")
    assert not p.is_internal_topic("us.orders")


def test_custom_separator_and_internal_separator():
    p = rp.DefaultReplicationPolicy("_", internal_separator_enabled=True)
    assert p.format_remote_topic("us", "a.b") == "us_a.b"
    assert p.checkpoints_topic("us") == "us_checkpoints_internal"
    q = rp.DefaultReplicationPolicy("_", internal_separator_enabled=False)
    assert q.offset_syncs_topic("eu") == "mm2-offset-syncs.eu.internal"


def test_identity_policy_keeps_names_but_not_for_heartbeats():
    p = rp.make(rp.IDENTITY_CLASS, "us")
    assert p.format_remote_topic("us", "orders") == "orders"
    assert p.format_remote_topic("us", "heartbeats") == "us.heartbeats"
    assert p.topic_source("orders") == "us"
    assert p.upstream_topic("orders") == "orders"
    assert rp.make("DefaultReplicationPolicy", "us").format_remote_topic("us", "x") == "us.x"
    with pytest.raises(ValueError):
        rp.make("com.example.Custom", "us")


def test_cycles_are_never_mirrored_back():
    p = rp.DefaultReplicationPolicy()
    assert rp.is_cycle(p, "eu.orders", "eu")
    assert rp.is_cycle(p, "us.eu.orders", "eu")
    assert not rp.is_cycle(p, "us.orders", "eu")
    assert not rp.is_cycle(p, "orders", "eu")
    f = TopicFilter(p, "eu")
    assert f.should_replicate("orders") and f.should_replicate("us.orders")
    assert not f.should_replicate("eu.orders")
    # identity policy: the source alias is every topic's source; upstream == topic ends it
    i = rp.make(rp.IDENTITY_CLASS, "us")
    assert not rp.is_cycle(i, "orders", "eu")
    assert rp.is_cycle(i, "orders", "us")


def test_topic_filter_defaults_and_heartbeats():
    f = TopicFilter(rp.DefaultReplicationPolicy(), "eu")
    assert f.should_replicate("orders")
    assert f.should_replicate("heartbeats")
    assert not f.should_replicate("__consumer_offsets")
    assert not f.should_replicate("x.replica")
    assert not f.should_replicate("mm2-offset-syncs.eu.internal")
    g = TopicFilter(rp.DefaultReplicationPolicy(), "eu", ["orders.*"], ["orders-secret"])
    assert g.should_replicate("orders-1") and not g.should_replicate("orders-secret")
    assert not g.should_replicate("payments")  # regexes match the whole name
    assert g.should_replicate("us.heartbeats")  # heartbeats always


def test_group_and_config_filters():
    g = GroupFilter()
    assert g.should_replicate("billing")
    assert not g.should_replicate("console-consumer-1") and not g.should_replicate("connect-x")
    c = ConfigPropertyFilter()
    assert c.should_replicate("retention.ms") and c.should_replicate("cleanup.policy")
    assert not c.should_replicate("min.insync.replicas")
    assert split_list(" a , b,c ") == ["a", "b", "c"] and split_list("") == []
    with pytest.raises(ValueError):
        GroupFilter(["("])
