"""The one prometheus-client collector of a broker: each scrape takes one snapshot of
every part on the event loop (:mod:`.on_loop`) and turns it into metric families."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker_py.server.metrics import (
    broker_gauges,
    client_quotas,
    client_telemetry,
    controller_metrics,
    exporter_partitions,
    fetcher_lag,
    group_lag,
    partition_metrics,
    replication_quotas,
    request_metrics,
    share_groups,
    topic_metrics,
)
from broker_py.server.metrics.on_loop import LoopUnavailable, call_on_loop

log = logging.getLogger(__name__)


class BrokerCollector(Collector):
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        snapshot: Callable[[], dict[str, Any]],
        broker_id: int,
    ) -> None:
        self.loop = loop
        self.snapshot = snapshot
        self.broker_id = broker_id

    def collect(self) -> Iterator[Metric]:
        try:
            snap = call_on_loop(self.loop, self.snapshot)
        except LoopUnavailable as exc:
            log.warning("metrics scrape: %s", exc)
            yield GaugeMetricFamily(
                "logstore_metrics_snapshot_ok", "1 when the scrape read the broker's state", value=0
            )
            return
        yield GaugeMetricFamily(
            "logstore_metrics_snapshot_ok", "1 when the scrape read the broker's state", value=1
        )
        yield from request_metrics.collect(snap["requests"])
        yield from topic_metrics.collect(snap["topics"])
        yield from partition_metrics.collect(snap["partitions"])
        yield from broker_gauges.collect(snap["broker"])
        yield from group_lag.collect(snap["groups"])
        yield from share_groups.collect(snap["share_groups"])
        yield from exporter_partitions.collect(snap["exporter"])
        yield from fetcher_lag.collect(snap["fetchers"])
        yield from replication_quotas.collect(snap["replication_quotas"])
        yield from client_quotas.collect(snap["client_quotas"])
        yield from controller_metrics.collect(snap["controller"])
        yield from client_telemetry.collect(snap["client_telemetry"])
        idle = snap["idle"]
        if idle["network"] is not None:
            yield GaugeMetricFamily(
                "kafka_network_socketserver_networkprocessoravgidlepercent",
                "Share of the last minute the event loop waited for I/O (0-1)",
                value=idle["network"],
            )
        if idle["handler"] is not None:
            yield GaugeMetricFamily(
                "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
                "Share of the last minute the event loop ran no request handler (0-1)",
                value=idle["handler"],
            )
