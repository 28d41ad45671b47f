"""Topic and dynamic broker configs checked and worded as Kafka 3.9 (ZooKeeper mode) checks
and words them, on the wire of a real broker: CreateTopics with every topic config key's
bad cases in one request (INVALID_CONFIG and Kafka's exact text, no topic created),
confluent-kafka's and kafka-python's admin clients with ``_`` spellings, AlterConfigs and
IncrementalAlterConfigs (a bad value prefixed with the resource as Kafka's
ZkAdminManager answers it), dynamic BROKER configs, and a stray key stored before keys
were checked: ignored by the broker, shown by ``logstore topic describe`` as unknown."""

from __future__ import annotations

import json
import os

import kafka.errors as Errors
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResourceType
from kafka.admin import ConfigResource as KpConfigResource

from logstore.cli import main
from logstore.protocol.messages.configs import AlterConfigsRequest, IncrementalAlterConfigsRequest
from logstore.protocol.messages.topic_admin import CreateTopicsRequest
from tests.broker.test_topic_config_rules import KAFKA, WRONG_TYPE
from tests.integration.clients import topic_name, wire_call
from tests.integration.test_confluent_kafka import admin, error_of

INVALID_CONFIG = 40
INVALID_REQUEST = 42


def bad_cases() -> list[tuple[str, str, str]]:
    """(key, value, Kafka's message) for every topic config: a wrong type, each value
    out of range or outside the valid strings, and the name spelled with ``_``."""
    cases = []
    for name, (kind, default, out_of_range) in KAFKA.items():
        if kind in WRONG_TYPE:
            bad, reason = WRONG_TYPE[kind]
            cases.append((name, bad, f"Invalid value {bad} for configuration {name}: {reason}"))
        for bad, shown, reason in out_of_range:
            cases.append((name, bad, f"Invalid value {shown} for configuration {name}: {reason}"))
        if "." in name:
            underscored = name.replace(".", "_")
            cases.append((underscored, default, f"Unknown topic config name: {underscored}"))
    return cases


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]], validate_only: bool):
    body = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in configs.items()
                ],
            )
            for name, configs in topics.items()
        ],
        timeout_ms=15000,
        validate_only=validate_only,
    )
    response = wire_call(bootstrap, body, 5)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_refuses_every_bad_topic_config_in_kafkas_words(module_broker, validate_only):
    cases = bad_cases()
    topics = {f"cfg-{validate_only:d}-{i}": {k: v} for i, (k, v, _) in enumerate(cases)}
    answers = create_topics(module_broker.bootstrap, topics, validate_only)
    expected = {
        f"cfg-{validate_only:d}-{i}": (INVALID_CONFIG, message)
        for i, (_, _, message) in enumerate(cases)
    }
    assert answers == expected
    assert not set(topics) & set(admin(module_broker.bootstrap).list_topics(timeout=10).topics)


def test_client_libraries_get_invalid_config_for_underscore_keys(module_broker):
    a = admin(module_broker.bootstrap)
    name = topic_name("ck-underscore")
    err = error_of(
        a.create_topics([NewTopic(name, 1, 1, config={"cleanup_policy": "compact"})])[name]
    )
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    assert err.str() == "Unknown topic config name: cleanup_policy"
    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=15000)
    try:
        with pytest.raises(Errors.InvalidConfigurationError) as e:
            kp.create_topics(
                {
                    name: {
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": {"retention_ms": "1000"},
                    }
                }
            )
        assert "Unknown topic config name: retention_ms" in str(e.value)
    finally:
        kp.close()
    assert name not in a.list_topics(timeout=10).topics


def test_altering_topic_configs_answers_as_kafka(module_broker):
    a = admin(module_broker.bootstrap)
    name = topic_name("ck-alter-rules")
    assert error_of(a.create_topics([NewTopic(name, 1, 1)])[name]) is None
    prefix = f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): "
    for resource, message in [
        (
            ConfigResource("topic", name, set_config={"retention.ms": "soon"}),
            prefix + "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            ConfigResource("topic", name, set_config={"cleanup_policy": "compact"}),
            "Unknown topic config name: cleanup_policy",
        ),
        (
            ConfigResource(
                "topic",
                name,
                set_config={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            ),
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
    ]:
        err = error_of(a.alter_configs([resource])[resource])
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
        assert err.str() == message
    for op, entry, message in [
        (
            AlterConfigOpType.SET,
            ("segment.bytes", "10"),
            prefix + "Invalid value 10 for configuration segment.bytes: Value must be at least 14",
        ),
        (
            AlterConfigOpType.APPEND,
            ("retention.ms", "1"),
            "Config value append is not allowed for config key: retention.ms",
        ),
        (
            AlterConfigOpType.SUBTRACT,
            ("retention.ms", "1"),
            "Config value subtract is not allowed for config key: retention.ms",
        ),
        (
            AlterConfigOpType.APPEND,
            ("cleanup.policy", "shred"),
            prefix + "Invalid value shred "
            "for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            AlterConfigOpType.SET,
            ("segment_bytes", "1024"),
            "Unknown topic config name: segment_bytes",
        ),
    ]:
        resource = ConfigResource(
            "topic", name, incremental_configs=[ConfigEntry(*entry, incremental_operation=op)]
        )
        err = error_of(a.incremental_alter_configs([resource])[resource])
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, (entry, err)
        assert err.str() == message
    resource = ConfigResource("topic", name)
    configs = a.describe_configs([resource])[resource].result(timeout=15)
    assert "cleanup_policy" not in configs and "segment_bytes" not in configs
    assert configs["cleanup.policy"].value == "delete" and configs["segment.bytes"].is_default


def test_dynamic_broker_configs_answer_as_kafka(module_broker):
    a = admin(module_broker.bootstrap)
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
    for entries, message in [
        (
            {"log_retention_ms": "1000"},
            "Cannot update these configs dynamically: Set(log_retention_ms)",
        ),
        ({"log.dirs": "/elsewhere"}, "Cannot update these configs dynamically: Set(log.dirs)"),
        (
            {"log.retention.ms": "soon"},
            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG",
        ),
        (
            {"num.io.threads": "0"},
            "Invalid value 0 for configuration num.io.threads: Value must be at least 1",
        ),
        (
            {"log.cleanup.policy": "shred"},
            "Invalid value shred for configuration "
            "log.cleanup.policy: String must be one of: compact, delete",
        ),
    ]:
        resource = ConfigResource(
            "broker",
            "0",
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in entries.items()
            ],
        )
        err = error_of(a.incremental_alter_configs([resource])[resource])
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, (entries, err)
        assert err.str() == prefix + message
    # kafka-python refuses names it does not know itself: a bad value reaches the broker.
    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=15000)
    try:
        r = kp.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.BROKER,
                    "0",
                    configs={"log.segment.bytes": (AlterConfigOp.SET, "13")},
                )
            ],
            incremental=True,
        )
        assert r["broker"]["0"].startswith("[Error 40] InvalidConfigurationError"), r
        assert r["broker"]["0"].endswith(
            prefix + "Invalid value 13 for configuration log.segment.bytes: "
            "Value must be at least 14"
        ), r
    finally:
        kp.close()
    resource = ConfigResource("broker", "0")
    configs = a.describe_configs([resource])[resource].result(timeout=15)
    assert "log_retention_ms" not in configs and "log_segment_bytes" not in configs
    assert configs["log.retention.ms"].source != 1  # never set dynamically


def test_a_stray_stored_key_is_ignored_and_shown_as_unknown(broker, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    a = admin(broker.bootstrap)
    name = topic_name("ck-stray")
    assert error_of(a.create_topics([NewTopic(name, 1, 1)])[name]) is None
    assert broker.stop() == 0
    # As a broker before keys were checked stored it: a `_` spelling beside the real key.
    store = os.path.join(broker.data_dir, "__logstore_metadata", "cluster-metadata.json")
    with open(store, encoding="utf-8") as f:
        doc = json.load(f)
    doc["configs"][name] = {"cleanup_policy": "compact"}
    with open(store, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    broker.start()
    a = admin(broker.bootstrap)
    resource = ConfigResource("topic", name)
    configs = a.describe_configs([resource])[resource].result(timeout=15)
    assert configs["cleanup_policy"].value == "compact"
    assert configs["cleanup.policy"].value == "delete"  # not applied
    assert (
        "stored configs ignored: cleanup_policy=compact (Unknown topic config name: cleanup_policy)"
        in broker.log_text()
    )
    capsys.readouterr()
    assert main(["topic", "describe", name, "-b", broker.bootstrap, "--format", "json"]) == 0
    shown = {c["key"]: c for c in json.loads(capsys.readouterr().out)[0]["configs"]}
    assert shown["cleanup_policy"]["source"] == (
        "DYNAMIC_TOPIC_CONFIG (unknown topic config: ignored)"
    )
    assert shown["cleanup.policy"]["source"] == "DEFAULT_CONFIG"


def test_null_values_and_duplicate_keys_are_invalid_requests(module_broker):
    """Kafka's ConfigAdminManager.preprocess, before any config is checked."""
    a = admin(module_broker.bootstrap)
    name = topic_name("ck-null")
    assert error_of(a.create_topics([NewTopic(name, 1, 1)])[name]) is None
    Alter, Inc = AlterConfigsRequest, IncrementalAlterConfigsRequest
    for body, version in [
        (
            Alter(
                resources=[
                    Alter.AlterConfigsResource(
                        resource_type=2,
                        resource_name=name,
                        configs=[Alter.AlterableConfig(name="retention.ms", value=None)],
                    )
                ],
                validate_only=False,
            ),
            1,
        ),
        (
            Inc(
                resources=[
                    Inc.AlterConfigsResource(
                        resource_type=2,
                        resource_name=name,
                        configs=[
                            Inc.AlterableConfig(
                                name="retention.ms", config_operation=0, value=None
                            ),
                            Inc.AlterableConfig(name="segment.ms", config_operation=1, value=None),
                        ],
                    )
                ],
                validate_only=False,
            ),
            1,
        ),
    ]:
        (r,) = wire_call(module_broker.bootstrap, body, version).responses
        assert (r.error_code, r.error_message) == (
            INVALID_REQUEST,
            "Null value not supported for : retention.ms",
        )
    body = Inc(
        resources=[
            Inc.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[
                    Inc.AlterableConfig(name="retention.ms", config_operation=0, value="1"),
                    Inc.AlterableConfig(name="retention.ms", config_operation=1, value=None),
                ],
            )
        ],
        validate_only=False,
    )
    (r,) = wire_call(module_broker.bootstrap, body, 1).responses
    assert (r.error_code, r.error_message) == (
        INVALID_REQUEST,
        "Error due to duplicate config keys",
    )
    # A DELETE takes no value.
    body = Inc(
        resources=[
            Inc.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[Inc.AlterableConfig(name="retention.ms", config_operation=1, value=None)],
            )
        ],
        validate_only=False,
    )
    (r,) = wire_call(module_broker.bootstrap, body, 1).responses
    assert r.error_code == 0, r
