"""Broker-wide gauges read at scrape time:

- ``kafka_controller_kafkacontroller_activecontrollercount``: 1 on the active controller;
- ``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation}`` and
  ``..._numdelayedoperations{delayedOperation}`` for ``Produce`` and ``Fetch``: watch
  entries (an operation waits on each of its partitions) and distinct operations;
- ``kafka_server_socket_server_metrics_connection_count{listener, networkProcessor}``:
  open connections per listener (one network processor, the event loop: ``"0"``);
- ``kafka_log_logmanager_offlinelogdirectorycount``: log dirs offline after an I/O
  failure (KIP-112), and ``kafka_server_replicamanager_offlinereplicacount``: the
  replicas in them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric


def snapshot(apis: Any, controller: Any) -> dict[str, Any]:
    rm = apis.replica_manager
    purgatories = {}
    for name, purgatory in (("Produce", rm.produce_purgatory), ("Fetch", rm.fetch_purgatory)):
        watched = list(purgatory.watchers.values())
        purgatories[name] = (
            sum(len(ops) for ops in watched),
            len({op_id for ops in watched for op_id in ops}),
        )
    connections = {s.name: len(s.connections) for s in apis.listeners.servers}
    active = 1 if controller is not None and getattr(controller, "active", False) else 0
    log_manager = rm.log_manager
    offline_dirs = 0 if log_manager is None else len(log_manager.failure_channel.offline_log_dirs())
    return {
        "active": active,
        "purgatories": purgatories,
        "connections": connections,
        "offline_log_dirs": offline_dirs,
        "offline_replicas": len(rm.offline_partitions),
    }


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "1 on the active controller",
        value=snap["active"],
    )
    size = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Watch entries of a purgatory",
        labels=["delayedOperation"],
    )
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Operations waiting in a purgatory",
        labels=["delayedOperation"],
    )
    for name, (entries, operations) in sorted(snap["purgatories"].items()):
        size.add_metric([name], entries)
        delayed.add_metric([name], operations)
    yield size
    yield delayed
    conns = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count",
        "Open connections per listener",
        labels=["listener", "networkProcessor"],
    )
    for listener, n in sorted(snap["connections"].items()):
        conns.add_metric([listener, "0"], n)
    yield conns
    yield GaugeMetricFamily(
        "kafka_log_logmanager_offlinelogdirectorycount",
        "Log dirs offline after an I/O failure",
        value=snap["offline_log_dirs"],
    )
    yield GaugeMetricFamily(
        "kafka_server_replicamanager_offlinereplicacount",
        "Replicas in offline log dirs",
        value=snap["offline_replicas"],
    )
