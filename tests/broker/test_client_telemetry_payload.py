"""PushTelemetry payloads: each compression, bounded decompression, OTLP decoding, and the
pushed series kept for /metrics (names, labels, delta sums, bounds, expiry)."""

from __future__ import annotations

import gzip
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from prometheus_client import CollectorRegistry, generate_latest

from broker_py.server.metrics import client_telemetry as ct
from broker_py.server.telemetry import otlp_payload as op


def metrics_data(value=5.0, delta=1) -> bytes:
    m = pb.MetricsData()
    scope = m.resource_metrics.add().scope_metrics.add()
    gauge = scope.metrics.add(name="org.apache.kafka.producer.node.request.latency.avg")
    p = gauge.gauge.data_points.add(as_double=value)
    p.attributes.append(KeyValue(key="node.id", value=AnyValue(int_value=1)))
    p.attributes.append(KeyValue(key="client_id", value=AnyValue(string_value="spoof")))
    total = scope.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    total.sum.aggregation_temporality = (
        pb.AGGREGATION_TEMPORALITY_DELTA if delta else pb.AGGREGATION_TEMPORALITY_CUMULATIVE
    )
    total.sum.data_points.add(as_int=2)
    scope.metrics.add(name="h").histogram.data_points.add(count=1)
    return m.SerializeToString()


def xerial(data: bytes) -> bytes:
    block = snappy.compress(data)
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


@pytest.mark.parametrize(
    "ctype,compress",
    [
        (0, lambda d: d),
        (1, gzip.compress),
        (2, snappy.compress),
        (2, xerial),
        (3, lz4.frame.compress),
        (4, lambda d: zstandard.ZstdCompressor().compress(d)),
    ],
)
def test_each_compression_decodes(ctype, compress):
    raw = metrics_data()
    assert op.decompress(compress(raw), ctype, len(raw)) == raw
    points = op.decode(raw)
    assert [(p.name, p.value, p.delta) for p in points] == [
        ("org.apache.kafka.producer.node.request.latency.avg", 5.0, False),
        ("org.apache.kafka.producer.connection.creation.total", 2.0, True),
    ]
    assert points[0].attributes == (("client_id", "spoof"), ("node.id", "1"))
    with pytest.raises(op.PayloadTooLarge):
        op.decompress(compress(raw), ctype, len(raw) - 1)


def test_bombs_stop_at_the_limit_and_garbage_is_bad():
    bomb = zstandard.ZstdCompressor().compress(b"\0" * 10_000_000)
    with pytest.raises(op.PayloadTooLarge):
        op.decompress(bomb, 4, 1000)
    with pytest.raises(op.PayloadTooLarge):
        op.decompress(gzip.compress(b"\0" * 10_000_000), 1, 1000)
    with pytest.raises(op.PayloadTooLarge):
        op.decompress(snappy.compress(b"\0" * 100_000), 2, 1000)
    for ctype in (1, 2, 3, 4):
        with pytest.raises(op.BadPayload):
            op.decompress(b"not compressed at all", ctype, 1000)
    with pytest.raises(op.BadPayload):
        op.decode(b"\xff\xff\xff\xff")
    raw = metrics_data()
    truncated = {
        1: gzip.compress(raw)[:-5],
        3: lz4.frame.compress(raw)[:-5],
        4: zstandard.ZstdCompressor().compress(raw)[:-3],
    }
    for ctype, data in truncated.items():
        with pytest.raises(op.BadPayload):
            op.decompress(data, ctype, 1000)


def test_pushed_series_names_labels_and_bounds():
    pushed = ct.PushedClientMetrics(per_instance=2, total=3)
    points = op.decode(metrics_data(value=5.0))
    assert pushed.record("i1", "app", points) == 0
    assert pushed.record("i1", "app", op.decode(metrics_data(value=7.0))) == 0
    registry = CollectorRegistry()

    class C:
        def collect(self):
            return ct.collect(pushed.snapshot())

    registry.register(C())
    text = generate_latest(registry).decode()
    assert (
        'kafka_client_org_apache_kafka_producer_node_request_latency_avg{client_id="app",'
        'client_instance_id="i1",node_id="1"} 7.0' in text
    )
    # a delta sum adds up
    assert (
        'kafka_client_org_apache_kafka_producer_connection_creation_total{client_id="app",'
        'client_instance_id="i1"} 4.0' in text
    )
    assert pushed.series_count() == 2
    assert pushed.record("i2", "app2", points) == 1  # the total bound
    assert pushed.series_count() == 3
    pushed.drop("i1")
    assert pushed.series_count() == 1
    assert [i for i, _, _ in pushed.snapshot()] == ["i2"]
    assert ct.prometheus_name("a.b-c") == "kafka_client_a_b_c"
