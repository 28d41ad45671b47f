"""Every topic config Kafka 3.9 defines, checked as Kafka checks it and worded as Kafka words
it: the engine's table (``logstore.validate_topic_configs``) against Kafka's LogConfig
definitions written out here, for a valid value, a value of the wrong type, values out of
range or outside the valid strings, and the ``_`` spelling of the name. The broker's
LogConfigManager answers with the same texts (TopicConfigError, INVALID_CONFIG)."""

from __future__ import annotations

import pytest

import logstore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.server.log_config_manager import LogConfigManager, TopicConfigError

LONG_MAX = (1 << 63) - 1
COMPRESSION = "uncompressed, zstd, lz4, snappy, gzip, producer"
THROTTLED = (
    "must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)

# Kafka 3.9's LogConfig: name -> (type, default, [(bad value, shown value, reason)]).
KAFKA = {
    "segment.bytes": ("INT", "1073741824", [("13", "13", "Value must be at least 14")]),
    "segment.ms": ("LONG", "604800000", [("0", "0", "Value must be at least 1")]),
    "segment.jitter.ms": ("LONG", "0", [("-1", "-1", "Value must be at least 0")]),
    "segment.index.bytes": ("INT", "10485760", [("3", "3", "Value must be at least 4")]),
    "flush.messages": ("LONG", str(LONG_MAX), [("0", "0", "Value must be at least 1")]),
    "flush.ms": ("LONG", str(LONG_MAX), [("-1", "-1", "Value must be at least 0")]),
    "retention.bytes": ("LONG", "-1", []),
    "retention.ms": ("LONG", "604800000", [("-2", "-2", "Value must be at least -1")]),
    "max.message.bytes": ("INT", "1048588", [("-1", "-1", "Value must be at least 0")]),
    "index.interval.bytes": ("INT", "4096", [("-1", "-1", "Value must be at least 0")]),
    "delete.retention.ms": ("LONG", "86400000", [("-1", "-1", "Value must be at least 0")]),
    "min.compaction.lag.ms": ("LONG", "0", [("-1", "-1", "Value must be at least 0")]),
    "max.compaction.lag.ms": ("LONG", str(LONG_MAX), [("0", "0", "Value must be at least 1")]),
    "file.delete.delay.ms": ("LONG", "60000", [("-1", "-1", "Value must be at least 0")]),
    "min.cleanable.dirty.ratio": (
        "DOUBLE",
        "0.5",
        [
            ("-0.5", "-0.5", "Value must be at least 0"),
            ("1.5", "1.5", "Value must be no more than 1"),
            ("2", "2.0", "Value must be no more than 1"),
        ],
    ),
    "cleanup.policy": (
        "LIST",
        "delete",
        [("delete,shred", "shred", "String must be one of: compact, delete")],
    ),
    "unclean.leader.election.enable": ("BOOLEAN", "false", []),
    "min.insync.replicas": ("INT", "1", [("0", "0", "Value must be at least 1")]),
    "compression.type": (
        "STRING",
        "producer",
        [(" brotli ", "brotli", f"String must be one of: {COMPRESSION}")],
    ),
    "compression.gzip.level": (
        "INT",
        "-1",
        [
            ("0", "0", "Value must be between 1 and 9 or equal to -1"),
            ("10", "10", "Value must be between 1 and 9 or equal to -1"),
        ],
    ),
    "compression.lz4.level": (
        "INT",
        "9",
        [("0", "0", "Value must be at least 1"), ("18", "18", "Value must be no more than 17")],
    ),
    "compression.zstd.level": (
        "INT",
        "3",
        [
            ("-131073", "-131073", "Value must be at least -131072"),
            ("23", "23", "Value must be no more than 22"),
        ],
    ),
    "preallocate": ("BOOLEAN", "false", []),
    "message.format.version": (
        "STRING",
        "3.0-IV1",
        [("3.0-IV9", "3.0-IV9", "Version 3.0-IV9 is not a valid version")],
    ),
    "message.timestamp.type": (
        "STRING",
        "CreateTime",
        [("Whenever", "Whenever", "String must be one of: CreateTime, LogAppendTime")],
    ),
    "message.timestamp.difference.max.ms": (
        "LONG",
        str(LONG_MAX),
        [("-1", "-1", "Value must be at least 0")],
    ),
    "message.timestamp.before.max.ms": (
        "LONG",
        str(LONG_MAX),
        [("-1", "-1", "Value must be at least 0")],
    ),
    "message.timestamp.after.max.ms": (
        "LONG",
        str(LONG_MAX),
        [("-1", "-1", "Value must be at least 0")],
    ),
    "leader.replication.throttled.replicas": (
        "LIST",
        "",
        [("0:1,x", "[0:1, x]", f"leader.replication.throttled.replicas {THROTTLED}")],
    ),
    "follower.replication.throttled.replicas": (
        "LIST",
        "",
        [("1", "[1]", f"follower.replication.throttled.replicas {THROTTLED}")],
    ),
    "message.downconversion.enable": ("BOOLEAN", "true", []),
    "remote.storage.enable": ("BOOLEAN", "false", []),
    "local.retention.ms": ("LONG", "-2", [("-3", "-3", "Value must be at least -2")]),
    "local.retention.bytes": ("LONG", "-2", [("-3", "-3", "Value must be at least -2")]),
    "remote.log.copy.disable": ("BOOLEAN", "false", []),
    "remote.log.delete.on.disable": ("BOOLEAN", "false", []),
}

# A value of the wrong type and Kafka's reason, per type (STRING and LIST take any text:
# their bad values are the validators' cases above).
WRONG_TYPE = {
    "INT": ("12x", "Not a number of type INT"),
    "LONG": ("soon", "Not a number of type LONG"),
    "DOUBLE": ("half", "Not a number of type DOUBLE"),
    "BOOLEAN": ("maybe", "Expected value to be either true or false"),
}


def refusal(configs: dict[str, str], defaults: dict[str, str] | None = None):
    with pytest.raises(logstore.InvalidConfigError) as e:
        logstore.validate_topic_configs(configs, defaults or {})
    return str(e.value), e.value.config_exception


def test_the_table_is_kafkas():
    assert [(n, t, d) for n, t, d in logstore.topic_config_keys()] == [
        (name, kind, default) for name, (kind, default, _) in KAFKA.items()
    ]


@pytest.mark.parametrize("name", list(KAFKA))
def test_every_key(name):
    kind, default, out_of_range = KAFKA[name]
    # Its default, and a valid value given with spaces around it.
    logstore.validate_topic_configs({name: default}, {})
    logstore.validate_topic_configs({name: f" {default} "}, {})
    if kind in WRONG_TYPE:
        bad, reason = WRONG_TYPE[kind]
        assert refusal({name: bad}) == (
            f"Invalid value {bad} for configuration {name}: {reason}",
            True,
        )
    for bad, shown, reason in out_of_range:
        assert refusal({name: bad}) == (
            f"Invalid value {shown} for configuration {name}: {reason}",
            True,
        )
    if "." in name:
        underscored = name.replace(".", "_")
        assert refusal({underscored: default}) == (
            f"Unknown topic config name: {underscored}",
            False,
        )


def test_int_is_32_bits_and_long_64():
    assert refusal({"segment.bytes": "2147483648"})[0] == (
        "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"
    )
    assert refusal({"retention.ms": "9223372036854775808"})[0].endswith("Not a number of type LONG")
    logstore.validate_topic_configs({"segment.bytes": "2147483647", "retention.ms": "+5"}, {})


def test_the_issue_cases():
    assert refusal({"bad.option": "x"}) == ("Unknown topic config name: bad.option", False)
    assert refusal({"retention.ms": "abc"})[0] == (
        "Invalid value abc for configuration retention.ms: Not a number of type LONG"
    )
    assert refusal({"segment.bytes": "10"})[0] == (
        "Invalid value 10 for configuration segment.bytes: Value must be at least 14"
    )
    assert refusal({"cleanup_policy": "compact"})[0] == (
        "Unknown topic config name: cleanup_policy"
    )


def test_cross_key_rules_over_the_broker_defaults():
    assert refusal({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        False,
    )
    assert refusal({"min.compaction.lag.ms": "10"}, {"max.compaction.lag.ms": "5"})[0].startswith(
        "conflict topic config setting"
    )
    # No tiered storage here, and ZooKeeper mode's rules on its switches.
    assert refusal({"remote.storage.enable": "true"}) == (
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
        "with remote log storage.",
        True,
    )
    assert refusal({"remote.log.delete.on.disable": "true"}) == (
        "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` "
        "under Zookeeper's mode.",
        False,
    )


def test_the_engine_keeps_accepting_python_keyword_spellings():
    assert logstore.validate_log_config(segment_bytes=2048)["segment.bytes"] == "2048"
    with pytest.raises(logstore.InvalidConfigError, match="Not a number of type LONG"):
        logstore.validate_log_config(retention_ms="soon")


def test_log_config_manager_answers_kafkas_texts():
    manager = LogConfigManager(BrokerConfig({}), None, None, None)
    assert manager.validate_topic_configs({"retention.ms": "1000"}) == {"retention.ms": "1000"}
    with pytest.raises(TopicConfigError) as e:
        manager.validate_topic_configs({"cleanup_policy": "compact"})
    assert e.value.errno == 40 and not e.value.config_exception
    assert str(e.value) == "Unknown topic config name: cleanup_policy"
    # Broker defaults take part: a topic's min.compaction.lag.ms above the broker's max.
    manager = LogConfigManager(
        BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"}), None, None, None
    )
    with pytest.raises(TopicConfigError, match=r"\(200\) > max.compaction.lag.ms \(100\)"):
        manager.validate_topic_configs({"min.compaction.lag.ms": "200"})
