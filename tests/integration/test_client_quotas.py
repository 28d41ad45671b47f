"""Client quotas on a real broker alone: AlterClientQuotas / DescribeClientQuotas at v0
and v1 through the broker's codec (kept across a restart), and a confluent-kafka
(librdkafka) producer over its ``producer_byte_rate`` held near it, told so through
``throttle_cb`` and its statistics, while a producer with another client id on the same
broker is not limited. Windows of 2 x 1 s keep the test to a few seconds."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer

from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from logstore.protocol.messages.topic_admin import CreateTopicsRequest, DeleteTopicsRequest
from tests.integration.clients import read_response, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

RATE = 200_000  # bytes/s
METRICS_PORT = free_port()
RUN_S = 4.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("quotas")),
        {
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
            "controller.quota.window.num": "2",
            "controller.quota.window.size.seconds": "1",
            "metrics.port": str(METRICS_PORT),
            "metrics.host": "127.0.0.1",
        },
    )
    b.start()
    yield b
    b.stop()


def alter(bootstrap, version, entity, ops, validate_only=False):
    R = AlterClientQuotasRequest
    body = R(
        entries=[
            R.EntryData(
                entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[R.OpData(key=k, value=v, remove=rm) for k, v, rm in ops],
            )
        ],
        validate_only=validate_only,
    )
    got = wire_call(bootstrap, body, version)
    return [(ErrorCode(e.error_code), e.error_message) for e in got.entries]


def describe(bootstrap, version, components=(), strict=False):
    R = DescribeClientQuotasRequest
    body = R(
        components=[
            R.ComponentData(entity_type=t, match_type=m, match=v) for t, m, v in components
        ],
        strict=strict,
    )
    got = wire_call(bootstrap, body, version)
    assert got.error_code == 0, got.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in got.entries
    }


def test_alter_and_describe_on_the_wire(broker) -> None:
    b = broker.bootstrap
    ok = [(ErrorCode.NONE, None)]
    assert alter(b, 0, [("user", "alice")], [("consumer_byte_rate", 1024, False)]) == ok
    assert alter(b, 1, [("user", None), ("client-id", "c1")], [("request_percentage", 25, False)])
    assert alter(b, 1, [("client-id", "c2")], [("producer_byte_rate", 0.5, False)]) == [
        (ErrorCode.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")
    ]
    for version in (0, 1):
        assert describe(b, version, [("user", 2, None)]) == {
            (("user", "alice"),): {"consumer_byte_rate": 1024.0},
            (("user", None), ("client-id", "c1")): {"request_percentage": 25.0},
        }
    assert alter(b, 0, [("user", "alice")], [("consumer_byte_rate", 0, True)]) == ok
    assert describe(b, 1, [("user", 0, "alice")]) == {}
    broker.stop()
    broker.start()
    assert describe(b, 1, [("client-id", 0, "c1")], strict=False) == {
        (("user", None), ("client-id", "c1")): {"request_percentage": 25.0}
    }
    assert alter(b, 1, [("user", None), ("client-id", "c1")], [("request_percentage", 0, True)])


def _api_versions(sock: socket.socket, client_id: str, correlation_id: int):
    from logstore.protocol import RequestHeader, encode_request
    from logstore.protocol.messages.api_versions import ApiVersionsRequest

    header = RequestHeader(
        api_key=18, api_version=2, correlation_id=correlation_id, client_id=client_id
    )
    sock.sendall(encode_request(header, ApiVersionsRequest()))


def test_throttled_connection_is_muted_alone(broker) -> None:
    """KIP-219: a response over the quota carries its throttle time and the connection
    handles nothing more for that long; another connection is answered meanwhile."""
    b = broker.bootstrap
    entity = [("client-id", "muted")]
    assert alter(b, 1, entity, [("request_percentage", 1e-7, False)]) == [(ErrorCode.NONE, None)]
    host, port = b.rsplit(":", 1)
    try:
        with (
            socket.create_connection((host, int(port)), timeout=15) as muted,
            socket.create_connection((host, int(port)), timeout=15) as other,
        ):
            _api_versions(muted, "muted", 1)
            first = read_response(muted, ApiKey.API_VERSIONS, 2)[1]
            assert 0 < first.throttle_time_ms <= 1000  # at most one window, as Kafka
            answered = time.monotonic()
            _api_versions(muted, "muted", 2)
            _api_versions(other, "other", 3)
            assert read_response(other, ApiKey.API_VERSIONS, 2)[1].throttle_time_ms == 0
            other_at = time.monotonic()
            assert read_response(muted, ApiKey.API_VERSIONS, 2)[0] == 2
            muted_at = time.monotonic()
            assert other_at < muted_at
            assert muted_at - answered >= first.throttle_time_ms / 1000 * 0.9
    finally:
        alter(b, 1, entity, [("request_percentage", 0, True)])


def _create(bootstrap, version, name, partitions):
    R = CreateTopicsRequest
    body = R(
        topics=[
            R.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[],
            )
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    got = wire_call(bootstrap, body, version)
    return ErrorCode(got.topics[0].error_code), got.throttle_time_ms


def test_controller_mutation_rate(broker) -> None:
    """1 partition/s with a burst of 2 (2 windows of 1 s): a 10-partition topic takes the
    bucket to -8; then a strict CreateTopics (v6+) or DeleteTopics (v5+) is refused with
    the throttle time, an older CreateTopics goes through and is throttled."""
    b = broker.bootstrap
    # wire_call's client id
    entity = [("client-id", "logstore-tests")]
    assert alter(b, 1, entity, [("controller_mutation_rate", 1, False)]) == [(ErrorCode.NONE, None)]
    prefix = f"cm-{time.monotonic_ns()}"
    assert _create(b, 7, f"{prefix}-a", 10) == (ErrorCode.NONE, 0)
    code, throttle = _create(b, 7, f"{prefix}-b", 1)
    assert code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and 5000 < throttle <= 8000
    R = DeleteTopicsRequest
    got = wire_call(b, R(topics=[], topic_names=[f"{prefix}-a"], timeout_ms=10_000), 5)
    assert got.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert got.throttle_time_ms > 0
    code, throttle = _create(b, 5, f"{prefix}-c", 1)
    assert code == ErrorCode.NONE and throttle > 5000
    assert alter(b, 1, entity, [("controller_mutation_rate", 0, True)]) == [(ErrorCode.NONE, None)]
    assert _create(b, 7, f"{prefix}-d", 1) == (ErrorCode.NONE, 0)


def _produce(bootstrap, client_id, topic, stop, out, throttles=None, stats=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "linger.ms": 5,
        "acks": 1,
        "queue.buffering.max.kbytes": 256,
        "batch.size": 16384,
    }
    if throttles is not None:
        conf["throttle_cb"] = lambda event: throttles.append(event.throttle_time)
    if stats is not None:
        conf["statistics.interval.ms"] = 500
        conf["stats_cb"] = lambda s: stats.append(json.loads(s))
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = Producer(conf)
    value = b"x" * 1000
    while not stop.is_set():
        try:
            p.produce(topic, value, on_delivery=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(10)
    out[client_id] = acked[0]


def test_producer_held_to_its_rate(broker) -> None:
    b = broker.bootstrap
    assert alter(b, 1, [("client-id", "limited")], [("producer_byte_rate", RATE, False)]) == [
        (ErrorCode.NONE, None)
    ]
    topic = f"quota-{time.monotonic_ns()}"
    warm = Producer({"bootstrap.servers": b})
    warm.produce(topic, b"x")
    assert warm.flush(10) == 0
    stop = threading.Event()
    out: dict[str, int] = {}
    throttles: list[int] = []
    stats: list[dict] = []
    threads = [
        threading.Thread(target=_produce, args=(b, "limited", topic, stop, out, throttles, stats)),
        threading.Thread(target=_produce, args=(b, "free", topic, stop, out)),
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        time.sleep(RUN_S)
        # The limited client's sensor while it runs, on /metrics as the JMX exporter names
        # Kafka's.
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as r:
            text = r.read().decode()
        labels = r'\{client_id="limited",user=""\} ([0-9.e+]+)'
        rate = re.search("kafka_server_produce_byte_rate" + labels, text)
        throttle = re.search("kafka_server_produce_throttle_time" + labels, text)
        assert rate and float(rate.group(1)) > 0, text[-2000:]
        assert throttle and float(throttle.group(1)) > 0
        assert 'kafka_server_produce_byte_rate{client_id="free",user=""}' in text
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - started
    # Held to the rate, give or take the span of the windows and the requests in flight.
    assert 0 < out["limited"] <= RATE * (elapsed + 2) + 100_000, (out, elapsed)
    assert out["free"] > 3 * out["limited"], out
    assert throttles and max(throttles) > 0
    brokers = [s["brokers"] for s in stats if s.get("brokers")]
    assert any(
        broker_stats.get("throttle", {}).get("max", 0) > 0
        for snapshot in brokers
        for broker_stats in snapshot.values()
    ), brokers[-1:]


def test_consumer_held_to_its_rate(broker) -> None:
    """consumer_byte_rate: a consumer reading a backlog gets about its rate, throttled
    fetches come back empty with the throttle time (throttle_cb), and each fetch is
    bounded by what the quota allows over its windows."""
    b = broker.bootstrap
    topic = f"quota-read-{time.monotonic_ns()}"
    p = Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 16384})
    for _ in range(3000):
        p.produce(topic, b"y" * 1000)
    assert p.flush(30) == 0
    entity = [("client-id", "slow-reader")]
    assert alter(b, 1, entity, [("consumer_byte_rate", RATE, False)]) == [(ErrorCode.NONE, None)]
    throttles: list[float] = []
    c = Consumer(
        {
            "bootstrap.servers": b,
            "client.id": "slow-reader",
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    try:
        c.subscribe([topic])
        got, first, deadline = 0, None, time.monotonic() + 30
        while time.monotonic() < deadline and (first is None or time.monotonic() - first < 3):
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                first = first or time.monotonic()
                got += len(msg.value())
        elapsed = time.monotonic() - first
    finally:
        c.close()
        alter(b, 1, entity, [("consumer_byte_rate", 0, True)])
    # One fetch holds at most RATE x (2 - 1) windows of 1 s; the windows allow about
    # RATE x (elapsed + 2) in all, each fetch's overshoot included.
    assert 0 < got <= RATE * (elapsed + 2) + RATE, (got, elapsed)
    assert throttles and max(throttles) > 0


def test_connection_creation_rate(broker) -> None:
    """An address over its connection_creation_rate (KIP-612) has its new connection held
    unserved and closed; other addresses connect as before; within the rate again once
    the windows move on."""
    b = broker.bootstrap
    host, port = b.rsplit(":", 1)
    assert alter(b, 1, [("ip", "127.0.0.2")], [("connection_creation_rate", 1, False)]) == [
        (ErrorCode.NONE, None)
    ]

    def served(source: str) -> bool:
        with socket.create_connection(
            (host, int(port)), timeout=5, source_address=(source, 0)
        ) as s:
            _api_versions(s, "ip-test", 1)
            try:
                return read_response(s, ApiKey.API_VERSIONS, 2)[1].error_code == 0
            except ConnectionError:
                return False

    try:
        assert served("127.0.0.2")  # 1 connection in the 1 s span: within
        assert not served("127.0.0.2")  # a second at once: held, then closed
        assert served("127.0.0.1")  # another address: no quota
        wait_until(lambda: served("127.0.0.2"), 10, message="127.0.0.2 within its rate again")
    finally:
        alter(b, 1, [("ip", "127.0.0.2")], [("connection_creation_rate", 0, True)])
