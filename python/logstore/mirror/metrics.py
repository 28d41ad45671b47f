"""The Prometheus endpoint of a mirror process (``metrics.port``, ``--metrics-port``):
every flow's :class:`.sensors.Sensors` under MirrorMaker 2's metric names, named as the
Prometheus JMX exporter names MM2's MBeans: ``kafka.connect.mirror:type=<T>,...``
attribute ``a-b-c`` becomes ``kafka_connect_mirror_<t lower case>_a_b_c`` with the MBean
tags as labels (e.g. ``kafka_connect_mirror_mirrorsourceconnector_record_count{target,
topic,partition}``). All are gauges.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
from prometheus_client.registry import Collector

from logstore.mirror.sensors import Sensors


def metric_name(kind: str, metric: str) -> str:
    return f"kafka_connect_mirror_{kind.lower()}_{metric.replace('-', '_')}"


class _Collector(Collector):
    def __init__(self, sensors: Sequence[Sensors]) -> None:
        self._sensors = sensors

    def collect(self) -> Iterator[Any]:
        families: dict[str, tuple[GaugeMetricFamily, list[str]]] = {}
        samples = [s for sensors in self._sensors for s in sensors.samples()]
        for kind, metric, labels, value in samples:
            name = metric_name(kind, metric)
            if name not in families:
                keys = list(labels)
                families[name] = (
                    GaugeMetricFamily(name, f"MirrorMaker 2 {kind} {metric}", labels=keys),
                    keys,
                )
            fam, keys = families[name]
            fam.add_metric([labels[k] for k in keys], value)
        for fam, _ in families.values():
            yield fam


def serve(port: int, sensors: Sequence[Sensors], addr: str = "0.0.0.0") -> Any:
    """Serves ``/metrics`` at ``addr:port`` from a daemon thread."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(sensors))
    return start_http_server(port, addr=addr, registry=registry)
