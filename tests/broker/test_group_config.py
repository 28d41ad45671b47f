"""GROUP config rules (broker_py.config.group_config): Kafka's GroupConfig checks in its
order and with its texts, and the values in force for a group."""

from __future__ import annotations

import pytest

from broker_py.config import group_config as gc
from broker_py.config.kafka_config import BrokerConfig
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError

BROKER = BrokerConfig({"group.share.max.record.lock.duration.ms": "40000"})


@pytest.mark.parametrize(
    ("configs", "text"),
    [
        ({"a": None, "b": None}, "Null value not supported for group configs: a,b"),
        (
            {"share.heartbeat.interval.ms": "4999"},
            "share.heartbeat.interval.ms must be greater "
            "than or equal to group.share.min.heartbeat.interval.ms",
        ),
        (
            {"share.session.timeout.ms": "60001"},
            "share.session.timeout.ms must be less than or "
            "equal to group.share.max.session.timeout.ms",
        ),
        (
            {"share.record.lock.duration.ms": "40001"},
            "share.record.lock.duration.ms must be less "
            "than or equal to group.share.max.record.lock.duration.ms",
        ),
        (
            {"share.record.lock.duration.ms": "999"},
            "Invalid value 999 for configuration "
            "share.record.lock.duration.ms: Value must be at least 1000",
        ),
        (
            {"consumer.session.timeout.ms": "2147483648"},
            "Invalid value 2147483648 for "
            "configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
    ],
)
def test_refusals_in_kafkas_words(configs, text):
    with pytest.raises(InvalidConfigError) as e:
        gc.validate("g", configs, BROKER)
    assert str(e.value) == text


def test_session_must_exceed_the_interval():
    broker = BrokerConfig(
        {
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.max.heartbeat.interval.ms": "50000",
        }
    )
    with pytest.raises(
        InvalidConfigError,
        match="^consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms$",
    ):
        gc.validate(
            "g",
            {"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "6000"},
            broker,
        )
    gc.validate(
        "g",
        {"consumer.session.timeout.ms": "6001", "consumer.heartbeat.interval.ms": "6000"},
        broker,
    )


def test_empty_name_and_values_in_force():
    with pytest.raises(InvalidRequestError, match="^Default group resources are not allowed.$"):
        gc.validate("", {}, BROKER)
    assert gc.effective({"share.auto.offset.reset": "earliest"}, BROKER) == {
        "consumer.session.timeout.ms": 45000,
        "consumer.heartbeat.interval.ms": 5000,
        "share.session.timeout.ms": 45000,
        "share.heartbeat.interval.ms": 5000,
        "share.record.lock.duration.ms": 30000,
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_uncommitted",
    }
