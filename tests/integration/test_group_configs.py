"""GROUP config resources (Kafka 4) on a real broker: every key described with the
broker's defaults, a group's own values set, deleted and kept across a restart, refused
with Kafka's codes and texts, and reached through confluent-kafka's AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from logstore.protocol.error_codes import ErrorCode
from tests.integration.clients import describe_configs, incremental_alter_configs
from tests.integration.conftest import BrokerProcess

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
SOURCE_GROUP, SOURCE_DEFAULT = 8, 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("group-configs")))
    b.overrides.update({"group.consumer.session.timeout.ms": "50000"})
    b.start()
    yield b
    b.kill()


def alter(broker, name, *ops, validate_only=False):
    return incremental_alter_configs(
        broker.bootstrap, GROUP, name, *ops, validate_only=validate_only
    )


def describe(broker, name):
    result = describe_configs(broker.bootstrap, GROUP, name, synonyms=True)
    if result.error_code:
        return result.error_code, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


DEFAULTS = {
    "consumer.session.timeout.ms": ("50000", SOURCE_DEFAULT),  # the broker's value
    "consumer.heartbeat.interval.ms": ("5000", SOURCE_DEFAULT),
    "share.session.timeout.ms": ("45000", SOURCE_DEFAULT),
    "share.heartbeat.interval.ms": ("5000", SOURCE_DEFAULT),
    "share.record.lock.duration.ms": ("30000", SOURCE_DEFAULT),
    "share.auto.offset.reset": ("latest", SOURCE_DEFAULT),
    "share.isolation.level": ("read_uncommitted", SOURCE_DEFAULT),
}


def test_set_describe_delete_and_kafkas_errors(broker):
    assert describe(broker, "any-group") == DEFAULTS
    ok = alter(
        broker,
        "g1",
        ("consumer.session.timeout.ms", SET, "46000"),
        ("share.auto.offset.reset", SET, "earliest"),
    )
    assert ok == (0, None)
    assert describe(broker, "g1") == {
        **DEFAULTS,
        "consumer.session.timeout.ms": ("46000", SOURCE_GROUP),
        "share.auto.offset.reset": ("earliest", SOURCE_GROUP),
    }
    refused = [
        (
            ("consumer_session_timeout_ms", SET, "46000"),
            ErrorCode.INVALID_CONFIG,
            "Unknown group config name: consumer_session_timeout_ms",
        ),
        (
            ("consumer.session.timeout.ms", SET, "soon"),
            ErrorCode.INVALID_CONFIG,
            "Invalid value soon for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            ("consumer.session.timeout.ms", SET, "0"),
            ErrorCode.INVALID_CONFIG,
            "Invalid value 0 for configuration consumer.session.timeout.ms: "
            "Value must be at least 1",
        ),
        (
            ("consumer.session.timeout.ms", SET, "44999"),
            ErrorCode.INVALID_CONFIG,
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            ("consumer.heartbeat.interval.ms", SET, "15001"),
            ErrorCode.INVALID_CONFIG,
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            ("share.auto.offset.reset", SET, "none"),
            ErrorCode.INVALID_CONFIG,
            "Invalid value none for configuration share.auto.offset.reset: "
            "String must be one of: latest, earliest",
        ),
        (
            ("consumer.session.timeout.ms", APPEND, "1"),
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
        ),
    ]
    for op, code, text in refused:
        assert alter(broker, "g1", op) == (code, text)
    assert alter(broker, "", ("consumer.session.timeout.ms", SET, "46000")) == (
        ErrorCode.INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    assert describe(broker, "") == (
        ErrorCode.INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    assert alter(
        broker, "g2", ("share.auto.offset.reset", SET, "earliest"), validate_only=True
    ) == (
        0,
        None,
    )
    assert describe(broker, "g2") == DEFAULTS
    assert describe(broker, "g1")["consumer.session.timeout.ms"] == ("46000", SOURCE_GROUP)
    every = [
        ("consumer.session.timeout.ms", DELETE, None),
        ("share.auto.offset.reset", DELETE, None),
    ]
    assert alter(broker, "g1", *every) == (0, None)
    assert describe(broker, "g1") == DEFAULTS


def test_configs_survive_a_restart(broker):
    assert alter(broker, "kept", ("share.record.lock.duration.ms", SET, "20000")) == (0, None)
    broker.restart()
    assert describe(broker, "kept")["share.record.lock.duration.ms"] == ("20000", SOURCE_GROUP)


def test_confluent_kafka_admin_client(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry(
        "consumer.heartbeat.interval.ms",
        "6000",
        incremental_operation=AlterConfigOpType.SET,
    )
    resource = ConfigResource(ResourceType.GROUP, "admin-group", incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, "admin-group")]).values()
    configs = future.result(timeout=30)
    assert configs["consumer.heartbeat.interval.ms"].value == "6000"
    assert configs["consumer.session.timeout.ms"].value == "50000"
