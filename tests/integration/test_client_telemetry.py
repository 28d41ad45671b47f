"""Client telemetry (KIP-714) against a real broker with its Prometheus endpoint on: a
CLIENT_METRICS resource made, described, listed, refused with Kafka's errors and kept
across a restart (over the wire: confluent-kafka's AdminClient has no CLIENT_METRICS
resource type); a real confluent-kafka producer and consumer (librdkafka pushes when the
broker advertises KIP-714, ``enable.metrics.push`` being on by default) get the
subscription and push, and their metrics appear on /metrics; bad pushes get Kafka's
errors; a broker without the endpoint does not advertise the push APIs."""

from __future__ import annotations

import re
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.telemetry import (
    GetTelemetrySubscriptionsRequest,
    ListClientMetricsResourcesRequest,
    PushTelemetryRequest,
)
from tests.integration.clients import describe_configs, incremental_alter_configs, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2
ZERO = uuid.UUID(int=0)
MAX_BYTES = 200_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("telemetry")))
    b.metrics_port = free_port()
    b.overrides.update({"metrics.port": str(b.metrics_port), "telemetry.max.bytes": str(MAX_BYTES)})
    b.start()
    yield b
    b.kill()


def alter(broker, name, *ops, validate_only=False):
    return incremental_alter_configs(
        broker.bootstrap, CLIENT_METRICS, name, *ops, validate_only=validate_only
    )


def describe(broker, name):
    result = describe_configs(broker.bootstrap, CLIENT_METRICS, name)
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def listed(broker):
    response = wire_call(broker.bootstrap, ListClientMetricsResourcesRequest(), 0)
    assert response.error_code == 0
    return sorted(r.name for r in response.client_metrics_resources)


def scrape(broker) -> str:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_resource_lifecycle_and_kafkas_errors(broker):
    assert alter(broker, "subs-a", ("metrics", SET, "org.apache.kafka.producer.")) == (0, None)
    assert alter(broker, "subs-a", ("metrics", APPEND, "org.apache.kafka.consumer.")) == (0, None)
    more = (("interval.ms", SET, "60000"), ("match", SET, "client_id=x.*"))
    assert alter(broker, "subs-a", *more) == (0, None)
    assert describe(broker, "subs-a") == {
        "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7),
        "interval.ms": ("60000", 7),
        "match": ("client_id=x.*", 7),
    }
    assert "subs-a" in listed(broker)
    assert describe(broker, "no-such-resource") == {}
    refused = [
        (("interval.ms", SET, "99"), ErrorCode.INVALID_REQUEST, "Invalid value 99 for interval.ms"),
        (("interval.ms", SET, "soon"), ErrorCode.INVALID_CONFIG, "Invalid value soon for conf"),
        (("match", SET, "host=a"), ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
        (("match", SET, "client_id=("), ErrorCode.INVALID_CONFIG, "Illegal client matching"),
        (("interval_ms", SET, "1000"), ErrorCode.INVALID_REQUEST, "Unknown client metrics conf"),
        (("interval.ms", APPEND, "1"), ErrorCode.INVALID_CONFIG, "Can't APPEND to key interval.ms"),
    ]
    for op, code, text in refused:
        error, message = alter(broker, "subs-a", op)
        assert (error, message[: len(text)]) == (code, text)
    assert alter(broker, "", ("metrics", SET, "*"))[0] == ErrorCode.INVALID_REQUEST
    assert alter(broker, "subs-b", ("metrics", SET, "*"), validate_only=True) == (0, None)
    assert "subs-b" not in listed(broker)
    assert describe(broker, "subs-a")["interval.ms"] == ("60000", 7)  # nothing changed
    # deleting every key deletes the resource
    every = [(k, DELETE, None) for k in ("metrics", "interval.ms", "match")]
    assert alter(broker, "subs-a", *every) == (0, None)
    assert "subs-a" not in listed(broker)
    assert describe(broker, "subs-a") == {}


def test_clients_push_and_metrics_are_served(broker):
    assert alter(
        broker,
        "librdkafka-all",
        ("metrics", SET, "*"),
        ("interval.ms", SET, "1000"),
        ("match", SET, "client_id=telemetry-.*"),
    ) == (0, None)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-producer"})
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "telemetry-consumer",
            "group.id": "telemetry-group",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["telemetry-topic"])
        for i in range(10):
            producer.produce("telemetry-topic", value=b"v%d" % i)
        producer.flush(15)

        def pushed():
            producer.poll(0.1)
            consumer.poll(0.1)
            text = scrape(broker)
            producer_seen = re.search(
                r'^kafka_client_org_apache_kafka_producer_\w+\{[^}]*client_id="telemetry-producer"',
                text,
                re.M,
            )
            consumer_seen = re.search(
                r'^kafka_client_org_apache_kafka_consumer_\w+\{[^}]*client_id="telemetry-consumer"',
                text,
                re.M,
            )
            return text if producer_seen and consumer_seen else None

        text = wait_until(pushed, timeout=30, message="both clients' pushed metrics on /metrics")
        instance = r'^kafka_client_\S+\{[^}]*client_instance_id="[0-9a-f-]{36}"'
        assert re.search(instance, text, re.M)
    finally:
        consumer.close()
        producer.flush(5)


def _subscribe(broker):
    got = wire_call(broker.bootstrap, GetTelemetrySubscriptionsRequest(client_instance_id=ZERO), 0)
    assert got.error_code == 0 and got.client_instance_id != ZERO
    assert list(got.accepted_compression_types) == [4, 3, 1, 2]
    assert got.telemetry_max_bytes == MAX_BYTES and got.delta_temporality
    return got


def _push(broker, instance_id, subscription_id, metrics=b"", compression=0, terminating=False):
    return wire_call(
        broker.bootstrap,
        PushTelemetryRequest(
            client_instance_id=instance_id,
            subscription_id=subscription_id,
            terminating=terminating,
            compression_type=compression,
            metrics=metrics,
        ),
        0,
    ).error_code


def test_bad_pushes_get_kafkas_errors(broker):
    E = ErrorCode
    assert _push(broker, ZERO, 0) == E.INVALID_REQUEST
    g = _subscribe(broker)
    assert _push(broker, g.client_instance_id, g.subscription_id ^ 1) == E.UNKNOWN_SUBSCRIPTION_ID
    g = _subscribe(broker)
    assert _push(broker, g.client_instance_id, g.subscription_id, b"\xff" * 9) == E.INVALID_RECORD
    g = _subscribe(broker)
    assert _push(broker, g.client_instance_id, g.subscription_id, b"x", 9) == (
        E.UNSUPPORTED_COMPRESSION_TYPE
    )
    g = _subscribe(broker)
    big = b"\0" * (MAX_BYTES + 1)
    assert _push(broker, g.client_instance_id, g.subscription_id, big) == E.TELEMETRY_TOO_LARGE
    g = _subscribe(broker)
    assert _push(broker, g.client_instance_id, g.subscription_id, b"\x28\xb5\x2f\xfd", 4) == (
        E.INVALID_RECORD
    )
    g = _subscribe(broker)
    again = wire_call(
        broker.bootstrap,
        GetTelemetrySubscriptionsRequest(client_instance_id=g.client_instance_id),
        0,
    )
    assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED
    assert _push(broker, g.client_instance_id, g.subscription_id, terminating=True) == E.NONE
    assert _push(broker, g.client_instance_id, g.subscription_id) == E.INVALID_REQUEST


def test_resources_survive_a_restart(broker):
    assert alter(broker, "kept", ("metrics", SET, "a.,b."), ("interval.ms", SET, "5000")) == (
        0,
        None,
    )
    broker.restart()
    assert "kept" in listed(broker)
    assert describe(broker, "kept") == {"metrics": ("a.,b.", 7), "interval.ms": ("5000", 7)}


def _advertised(bootstrap: str) -> set[int]:
    body = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    return {k.api_key for k in wire_call(bootstrap, body, 3).api_keys}


def test_push_apis_advertised_only_with_the_metrics_endpoint(broker, broker_factory):
    assert {71, 72, 74} <= _advertised(broker.bootstrap)
    without = _advertised(broker_factory().bootstrap)
    assert 74 in without and not {71, 72} & without
