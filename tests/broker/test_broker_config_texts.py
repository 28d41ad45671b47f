"""Broker configs (server.properties and dynamic BROKER resources) refused in Kafka's
words: ConfigDef's type and range messages, ValidString and ValidList, and
DynamicBrokerConfig's texts for keys that cannot change at runtime."""

from __future__ import annotations

import pytest

from broker_py.config.kafka_config import BrokerConfig, ConfigError, DynamicConfigError


@pytest.mark.parametrize(
    "key, value, message",
    [
        (
            "log.retention.ms",
            "soon",
            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG",
        ),
        (
            "num.partitions",
            "many",
            "Invalid value many for configuration num.partitions: Not a number of type INT",
        ),
        (
            "log.segment.bytes",
            "3000000000",
            "Invalid value 3000000000 for configuration "
            "log.segment.bytes: Not a number of type INT",
        ),
        (
            "offsets.topic.replication.factor",
            "40000",
            "Invalid value 40000 for configuration "
            "offsets.topic.replication.factor: Not a number of type SHORT",
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            "x",
            "Invalid value x for configuration "
            "log.cleaner.min.cleanable.ratio: Not a number of type DOUBLE",
        ),
        (
            "num.partitions",
            " 0 ",
            "Invalid value 0 for configuration num.partitions: Value must be at least 1",
        ),
        (
            "metrics.port",
            "70000",
            "Invalid value 70000 for configuration metrics.port: Value must be no more than 65535",
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            "2",
            "Invalid value 2.0 for configuration "
            "log.cleaner.min.cleanable.ratio: Value must be no more than 1",
        ),
        (
            "log.preallocate",
            "yes",
            "Invalid value yes for configuration log.preallocate: "
            "Expected value to be either true or false",
        ),
        (
            "compression.type",
            "brotli",
            "Invalid value brotli for configuration compression.type: "
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            "log.cleanup.policy",
            "delete,shred",
            "Invalid value shred for configuration "
            "log.cleanup.policy: String must be one of: compact, delete",
        ),
        (
            "log.message.timestamp.type",
            "Now",
            "Invalid value Now for configuration "
            "log.message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
    ],
)
def test_static_values_are_refused_in_kafkas_words(key, value, message):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({key: value})
    assert str(e.value) == message and e.value.key == key


def test_dynamic_keys_are_refused_in_kafkas_words():
    c = BrokerConfig({})
    for layer, text in [
        (
            {"log_retention_ms": "1"},
            "Cannot update these configs dynamically: Set(log_retention_ms)",
        ),
        (
            {"broker.id": "3", "log.dirs": "/x"},
            "Cannot update these configs dynamically: Set(broker.id, log.dirs)",
        ),
        (
            {"log.retention.ms": "soon"},
            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG",
        ),
    ]:
        with pytest.raises(ConfigError) as e:
            c.set_dynamic(layer, {})
        assert str(e.value) == text
    with pytest.raises(DynamicConfigError) as e:
        c.set_dynamic({"listeners": "PLAINTEXT://127.0.0.1:9092"}, {})
    assert str(e.value) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listeners)"
    )
    c.set_dynamic({"log.retention.ms": " 5000 "}, {})
    assert c.retention_ms == 5000
