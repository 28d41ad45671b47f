"""MM2's properties file and key names, resolved into flows."""

from __future__ import annotations

import pytest

from logstore.mirror import config

MM2 = r"""
# two clusters, one direction
clusters = us, eu
us.bootstrap.servers = 127.0.0.1:9092
eu.bootstrap.servers : 127.0.0.1:9093
eu.producer.linger.ms = 20
us.consumer.fetch.max.bytes=1048576
us->eu.enabled = true
eu->us.enabled = false
topics = orders.*, \
    payments
us->eu.topics.exclude = orders-secret
sync.group.offsets.enabled = true
emit.checkpoints.interval.seconds = 5
"""


def test_properties_file_resolves_into_flows():
    flows = config.flows(config.parse_properties(MM2))
    assert len(flows) == 1
    f = flows[0]
    assert (f.source, f.target) == ("us", "eu")
    assert f.source_client.for_consumer() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "fetch.max.bytes": "1048576",
    }
    assert f.target_client.for_producer()["linger.ms"] == "20"
    assert "linger.ms" not in f.target_client.for_consumer()
    assert f.items("topics") == ["orders.*", "payments"]
    assert f.items("topics.exclude") == ["orders-secret"]  # the flow's key wins
    assert f.flag("sync.group.offsets.enabled")
    assert f.seconds("emit.checkpoints.interval.seconds") == 5
    assert f.integer("offset.lag.max") == 100  # MM2's default
    assert not f.exactly_once
    assert f.group_id == "logstore-mirror-us-eu"
    tf = f.topic_filter()
    assert tf.should_replicate("orders-1") and not tf.should_replicate("orders-secret")


def test_flags_stand_for_a_two_cluster_file():
    props = config.from_flags(
        "h1:1", "h2:2", settings={"topics": "a.*", "exactly.once.source.support": "enabled"}
    )
    (f,) = config.flows(props)
    assert (f.source, f.target) == ("source", "target")
    assert f.exactly_once and f.items("topics") == ["a.*"]
    assert f.policy().format_remote_topic(f.source, "a1") == "source.a1"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "clusters is not set"),
        ("clusters = a, b\na.bootstrap.servers=x\nb.bootstrap.servers=y\n", "no flow"),
        ("clusters = a, b\na->c.enabled = true\n", "'c' is not one of"),
        ("clusters = a, b\na->b.enabled = yes\n", "expected true or false"),
        ("clusters = a, b\na->b.enabled = true\nb.bootstrap.servers=y\n", "a.bootstrap"),
        (
            "clusters=a,b\na.bootstrap.servers=x\nb.bootstrap.servers=y\na->b.enabled=true\n"
            "offset.lag.max = lots\n",
            "offset.lag.max",
        ),
        (
            "clusters=a,b\na.bootstrap.servers=x\nb.bootstrap.servers=y\na->b.enabled=true\n"
            "replication.policy.class = my.Policy\n",
            "replication.policy.class",
        ),
        (
            "clusters=a,b\na.bootstrap.servers=x\nb.bootstrap.servers=y\na->b.enabled=true\n"
            "topics = (\n",
            "bad regular expression",
        ),
    ],
)
def test_bad_configurations_name_the_key(text, message):
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        config.flows(config.parse_properties(text))


def test_properties_escapes_and_separators():
    got = config.parse_properties("a\\ b = c\\td\nk:v\nx y\n! comment\nu=\\u00e9\n")
    assert got == {"a b": "c\td", "k": "v", "x": "y", "u": "é"}
