"""BrokerConfig: Kafka's key names and defaults, properties syntax, errors naming the key."""

from __future__ import annotations

import pytest

from broker_py.config.kafka_config import (
    BrokerConfig,
    ConfigError,
    Listener,
    parse_properties,
    unknown_key_warning,
)


def test_defaults_are_a_single_local_broker():
    c = BrokerConfig()
    assert c.broker_id == 0
    assert c["listeners"] == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert c["advertised.listeners"] == c["listeners"]
    assert c.log_dirs == ["./logstore-data"]
    assert c["auto.create.topics.enable"] is True
    assert c["num.partitions"] == 1
    assert c["message.max.bytes"] == 1048588
    assert c["socket.request.max.bytes"] == 104857600
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.unknown == []


def test_properties_syntax():
    text = """
# comment
! also a comment
broker.id=3
listeners = PLAINTEXT://0.0.0.0:19092
log.dirs: /a,/b
num.partitions 4
log.retention.hours=\\
   12
"""
    props = parse_properties(text)
    assert props == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://0.0.0.0:19092",
        "log.dirs": "/a,/b",
        "num.partitions": "4",
        "log.retention.hours": "12",
    }
    c = BrokerConfig(props)
    assert c.broker_id == 3 and c.log_dirs == ["/a", "/b"] and c.retention_ms == 12 * 3600 * 1000


def test_load_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.segment.bytes=1048576\nfancy.unknown=1\n")
    c = BrokerConfig.load(path, ["num.partitions=6", "log.retention.ms=1000"])
    assert c["num.partitions"] == 6
    assert c.retention_ms == 1000  # log.retention.ms wins over hours
    assert c.unknown == ["fancy.unknown"]
    defaults = c.topic_defaults()
    assert defaults["segment.bytes"] == "1048576"
    assert defaults["retention.ms"] == "1000"
    assert defaults["max.message.bytes"] == "1048588"
    assert defaults["cleanup.policy"] == "delete"


@pytest.mark.parametrize(
    "key,value",
    [
        ("num.partitions", "zero"),
        ("num.partitions", "0"),
        ("log.segment.bytes", "10"),
        ("auto.create.topics.enable", "yes"),
        ("listeners", "127.0.0.1:9092"),
        ("listeners", "PLAINTEXT://host:99999"),
        ("log.cleanup.policy", "shred"),
        ("log.message.timestamp.type", "Wallclock"),
        ("log.cleaner.min.cleanable.ratio", "2"),
        ("authorizer.class.name", "com.example.MyAuthorizer"),
        ("super.users", "admin"),
        ("allow.everyone.if.no.acl.found", "maybe"),
        ("zookeeper.connect", "127.0.0.1:notaport"),
        ("zookeeper.connect", ":2181"),
        ("zookeeper.connect", "127.0.0.1:2181,,127.0.0.2:2181"),
        ("zookeeper.connect", "127.0.0.1:0"),
        ("zookeeper.connect", "127.0.0.1:65536"),
        ("zookeeper.connect", "127.0.0.1:2181/kafka//a"),
        ("zookeeper.connect", "127.0.0.1:2181/kafka/.."),
        ("zookeeper.connect", "127.0.0.1:2181/ka\x01fka"),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({key: value})
    assert e.value.key == key
    assert key in str(e.value)


def test_advertised_listener_must_name_a_listener():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"advertised.listeners": "EXTERNAL://example:9092"})
    assert e.value.key == "advertised.listeners"


def test_missing_properties_file_names_it(tmp_path):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(tmp_path / "nope.properties")
    assert "nope.properties" in str(e.value)


def test_bad_override_syntax():
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(None, ["num.partitions"])
    assert e.value.key == "--override"


def test_an_empty_cleanup_policy_is_allowed():
    assert BrokerConfig({"log.cleanup.policy": ""}).topic_defaults()["cleanup.policy"] == ""


def test_dynamic_layers_win_in_kafkas_order_and_refuse_static_keys():
    c = BrokerConfig({"log.retention.hours": "10", "log.retention.ms": "5000"})
    assert c.layers("log.retention.ms") == [("static", "5000")]
    c.set_dynamic(
        {"log.retention.ms": "7000"}, {"log.retention.ms": "9000", "message.max.bytes": "2000"}
    )
    assert c.retention_ms == 9000 and c["message.max.bytes"] == 2000
    assert c.layers("log.retention.ms") == [
        ("dynamic_broker", "9000"),
        ("dynamic_default", "7000"),
        ("static", "5000"),
    ]
    assert c.layers("log.retention.hours") == [("static", "10"), ("default", "168")]
    assert c.topic_defaults()["max.message.bytes"] == "2000"
    for bad in ({"log.dirs": "/x"}, {"no.such.key": "1"}, {"log.retention.ms": "soon"}):
        with pytest.raises(ConfigError) as e:
            c.set_dynamic(bad, {})
        assert e.value.key in bad
    assert c.retention_ms == 9000  # a refused change leaves the layers as they were
    c.set_dynamic({}, {})
    assert c.retention_ms == 5000 and c["message.max.bytes"] == 1048588


def test_advertised_listeners_change_per_broker_only_and_must_name_a_listener():
    c = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert not c.is_set("advertised.listeners")
    c.set_dynamic({}, {"advertised.listeners": "PLAINTEXT://kafka.example:9092"})
    assert c.is_set("advertised.listeners") and c.advertised_listener().host == "kafka.example"
    for default, per_broker in (
        ({"advertised.listeners": "PLAINTEXT://a:1"}, {}),
        ({}, {"advertised.listeners": "SSL://a:1"}),
    ):
        with pytest.raises(ConfigError) as e:
            c.set_dynamic(default, per_broker)
        assert e.value.key == "advertised.listeners"
    assert c.advertised_listener().host == "kafka.example"


def test_listeners_change_per_broker_only_and_need_a_security_protocol():
    c = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    with pytest.raises(ConfigError) as e:
        c.set_dynamic({"listeners": "PLAINTEXT://127.0.0.1:9092,EXTRA://127.0.0.1:9093"}, {})
    assert e.value.key == "listeners"
    with pytest.raises(ConfigError) as e:
        c.set_dynamic({}, {"listeners": "PLAINTEXT://127.0.0.1:9092,EXTRA://127.0.0.1:9093"})
    assert e.value.key == "listener.security.protocol.map"
    c.set_dynamic(
        {},
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,EXTRA://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        },
    )
    assert [str(x) for x in c["listeners"]] == [
        "PLAINTEXT://127.0.0.1:9092",
        "EXTRA://127.0.0.1:9093",
    ]
    # advertised.listeners, unset, follows them
    assert c.advertised_listener("EXTRA").port == 9093


@pytest.mark.parametrize(
    "value",
    [
        "",
        "127.0.0.1:2181",
        "zk1:2181,zk2:2182,zk3/kafka",
        "[::1]:2181/kafka/cluster-a/",
        "127.0.0.1:2181/",
    ],
)
def test_zookeeper_connect_forms_zookeeper_reads(value):
    assert BrokerConfig({"zookeeper.connect": value})["zookeeper.connect"] == value.strip()


def test_zookeeper_connect_errors_say_what_is_wrong():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"zookeeper.connect": "127.0.0.1:notaport"})
    assert str(e.value) == (
        "Invalid value 127.0.0.1:notaport for configuration zookeeper.connect: port "
        "'notaport' of '127.0.0.1:notaport' is not a number "
        "(expected host:port[,host:port...][/chroot])"
    )


def test_unknown_keys_are_kept_and_the_warning_names_the_nearest_key():
    c = BrokerConfig({"log.retension.hours": "1", "no.such.key": "1"})
    assert c.unknown == ["log.retension.hours", "no.such.key"]
    assert c["log.retention.hours"] == 168  # the misspelt key changes nothing
    assert unknown_key_warning("log.retension.hours") == (
        "The configuration 'log.retension.hours' was supplied but isn't a known config "
        "(ignored); did you mean log.retention.hours?"
    )
    assert unknown_key_warning("no.such.key") == (
        "The configuration 'no.such.key' was supplied but isn't a known config (ignored)"
    )


@pytest.mark.parametrize(
    ("listeners", "reason"),
    [
        (
            "PLAINTEXT://a:1,PLAINTEXT://b:2",
            "requirement failed: Each listener must have a different name, listeners: "
            "PLAINTEXT://a:1,PLAINTEXT://b:2",
        ),
        (
            "PLAINTEXT://a:1,bogus",
            "Error creating broker listeners from 'PLAINTEXT://a:1,bogus': Unable to parse "
            "bogus to a broker endpoint",
        ),
    ],
)
def test_listener_errors_in_kafkas_words(listeners, reason):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"listeners": listeners})
    assert (e.value.key, e.value.reason) == ("listeners", reason)


def test_broker_keys_are_described_with_their_configdef_types() -> None:
    from broker_py.config.kafka_config import config_type
    from broker_py.server.handlers.configs import TYPE_BOOLEAN, TYPE_LONG, TYPE_SHORT, _type_of

    assert config_type("leader.replication.throttled.rate") == "LONG"
    assert config_type("num.io.threads") == "INT"
    assert config_type("listeners") is None and config_type("no.such.key") is None
    assert _type_of("follower.replication.throttled.rate", None) == TYPE_LONG
    assert _type_of("offsets.topic.replication.factor", None) == TYPE_SHORT
    assert _type_of("group.share.enable", None) == TYPE_BOOLEAN
