"""Client metrics pushed with PushTelemetry (KIP-714), served on ``/metrics``.

Each pushed gauge or sum keeps its latest value per series (a delta sum is added up
into a running total; a cumulative one is taken as it comes). Names map as::

    kafka_client_ + the OpenTelemetry name with every character outside [a-zA-Z0-9_]
    replaced by "_"

    org.apache.kafka.producer.node.request.latency.avg
        -> kafka_client_org_apache_kafka_producer_node_request_latency_avg

served as gauges, labelled ``client_instance_id``, ``client_id`` and the point's own
attributes, their keys mapped the same way (``node.id`` -> ``node_id``; an attribute
named like one of the first two is left out).

Bounds: at most ``MAX_SERIES_PER_INSTANCE`` series a client instance and
``MAX_SERIES`` in all (points of new series past either are dropped, the others still
update); an instance's series go when the instance expires (:meth:`drop`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import Metric

MAX_SERIES_PER_INSTANCE = 1000
MAX_SERIES = 100_000
PREFIX = "kafka_client_"
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_]")
_OWN_LABELS = ("client_instance_id", "client_id")

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


def prometheus_name(otel_name: str) -> str:
    return PREFIX + _OUTSIDE.sub("_", otel_name)


def _label(key: str) -> str:
    label = _OUTSIDE.sub("_", key)
    return "_" + label if label[:1].isdigit() else label


class PushedClientMetrics:
    """instance id -> (client id, {(metric name, labels): value})."""

    def __init__(
        self, per_instance: int = MAX_SERIES_PER_INSTANCE, total: int = MAX_SERIES
    ) -> None:
        self.per_instance, self.total = per_instance, total
        self._instances: dict[str, tuple[str, dict[SeriesKey, float]]] = {}
        self._count = 0

    def record(self, instance_id: str, client_id: str, points: Iterable[Any]) -> int:
        """Takes the points of one push (``telemetry.otlp_payload.Point``); returns how many
        were dropped by the bounds."""
        _, series = self._instances.setdefault(instance_id, (client_id, {}))
        self._instances[instance_id] = (client_id, series)
        dropped = 0
        for p in points:
            labels = tuple(
                (label, v)
                for label, v in ((_label(k), v) for k, v in p.attributes)
                if label not in _OWN_LABELS
            )
            key = (prometheus_name(p.name), labels)
            if key not in series:
                if len(series) >= self.per_instance or self._count >= self.total:
                    dropped += 1
                    continue
                self._count += 1
                series[key] = 0.0
            series[key] = series[key] + p.value if p.delta else p.value
        return dropped

    def drop(self, instance_id: str) -> None:
        gone = self._instances.pop(instance_id, None)
        if gone is not None:
            self._count -= len(gone[1])

    def instance_ids(self) -> list[str]:
        return list(self._instances)

    def series_count(self) -> int:
        return self._count

    def snapshot(self) -> list[tuple[str, str, dict[SeriesKey, float]]]:
        return [(i, c, dict(s)) for i, (c, s) in self._instances.items()]


def collect(snapshot: list[tuple[str, str, dict[SeriesKey, float]]]) -> Iterator[Metric]:
    families: dict[str, Metric] = {}
    for instance_id, client_id, series in snapshot:
        for (name, labels), value in series.items():
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, "Client metric pushed (KIP-714)", "gauge")
            family.add_sample(
                name,
                {"client_instance_id": instance_id, "client_id": client_id, **dict(labels)},
                value,
            )
    yield from families.values()


def snapshot(telemetry: Any) -> list[tuple[str, str, dict[SeriesKey, float]]]:
    """The pushed series of ``telemetry`` (a ``ClientTelemetry``, or None), expired
    instances dropped first; runs on the event loop."""
    if telemetry is None:
        return []
    telemetry.expire()
    pushed: PushedClientMetrics = telemetry.pushed
    return pushed.snapshot()
