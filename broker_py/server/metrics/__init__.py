"""The broker's Prometheus endpoint (prometheus-client), on ``metrics.host:metrics.port``
(``/metrics``; off unless ``metrics.port`` is set).

Metric names follow the JMX exporter's Kafka rules (``kafka_<domain>_<type>_<name>``,
lower case, ``_total`` for the PerSec meters) and kafka_exporter's for consumer groups,
so existing Grafana dashboards chart them. One concept per module:

- :mod:`.request_metrics`: requests, latency, queue time and error codes per API
  (handlers wrapped; :mod:`.response_errors` finds a response's codes);
- :mod:`.topic_metrics`: messages and bytes in and out, failed produces and fetches,
  per topic and broker-wide;
- :mod:`.loop_idle`: the network processor and request handler idle ratios;
- :mod:`.partition_metrics`: under-replicated / under-min-ISR / offline partitions,
  leader count, ISR shrinks and expands, log size per partition;
- :mod:`.exporter_partitions`: kafka_exporter's ``kafka_brokers`` and
  ``kafka_topic_partition_*``;
- :mod:`.fetcher_lag`: the replica fetchers' lag;
- :mod:`.replication_quotas`: the replication throttles' byte rates;
- :mod:`.client_quotas`: the client quota sensors' rates and throttle times;
- :mod:`.controller_metrics`: the controller's leader election timer;
- :mod:`.broker_gauges`: active controller, purgatory sizes, connections per listener;
- :mod:`.group_lag`: consumer group lag;
- :mod:`.client_telemetry`: the metrics clients push (KIP-714), ``kafka_client_*``;
- prometheus-client's ``ProcessCollector``: ``process_cpu_seconds_total``,
  ``process_resident_memory_bytes``, ``process_open_fds``, ... of the broker process;
- :mod:`.collector` and :mod:`.on_loop`: scrapes read all of it on the event loop.

Wiring (``KafkaServer``): :func:`instrumented` wraps the handler registry,
:meth:`BrokerMetrics.start` once the broker serves (it sets ``KafkaApis.metrics``, which
Produce and Fetch report their per-partition outcomes to), :meth:`BrokerMetrics.stop`
first on stop. Nothing is counted or timed while ``metrics.port`` is unset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from broker_py.config.kafka_config import BrokerConfig, ConfigError
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
    share_groups,
)
from broker_py.server.metrics.collector import BrokerCollector
from broker_py.server.metrics.loop_idle import LoopIdle
from broker_py.server.metrics.request_metrics import RequestMetrics
from broker_py.server.metrics.topic_metrics import BrokerTopicMetrics
from logstore.protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

# Seconds between ISR samples (partition_metrics.IsrChangeTracker) and idle samples
# (loop_idle.LoopIdle).
ISR_SAMPLE_INTERVAL_S = 1.0


class BrokerMetrics:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.requests = RequestMetrics()
        self.topics = BrokerTopicMetrics()
        self.isr_changes = partition_metrics.IsrChangeTracker()
        self.idle = LoopIdle(lambda: self.requests.busy_s)
        self._produce_errors = self.requests.errors_of("Produce")
        self._fetch_errors = self.requests.errors_of("Fetch")
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        self._http: Any = None
        self._sampler: asyncio.Task[None] | None = None
        self._server: Any = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> BrokerMetrics | None:
        port = config["metrics.port"]
        return None if port is None else cls(config["metrics.host"], port)

    def instrument(self, registry: dict[Any, Callable[..., Any]]) -> dict[Any, Callable[..., Any]]:
        if ApiKey.PRODUCE in registry:
            registry = {
                **registry,
                ApiKey.PRODUCE: self.topics.wrap_produce(registry[ApiKey.PRODUCE]),
            }
        return self.requests.instrument(registry)

    def on_produce_results(self, results: Any) -> None:
        """``results`` (``[(topic, [ProducePartitionResult, ...]), ...]``) of a Produce
        about to be answered: its error codes and failed partitions."""
        self.topics.on_produce_results(results)
        errors = self._produce_errors
        for _topic, parts in results:
            for p in parts:
                errors[p.error_code] += 1

    def on_fetch_response(self, error_code: int, reads: Any, selected: Any) -> None:
        """A Fetch about to be answered: ``reads``, every partition read; ``selected``,
        those its response carries (an incremental fetch leaves out the unchanged)."""
        self.topics.on_fetch_response(reads)
        errors = self._fetch_errors
        errors[error_code] += 1
        for read in selected:
            errors[read.error_code] += 1

    def snapshot(self) -> dict[str, Any]:
        """Every part's state; runs on the event loop."""
        server = self._server
        apis = server.apis
        controller = getattr(server.support, "controller", None)
        return {
            "requests": self.requests.snapshot(),
            "topics": self.topics.snapshot(),
            "partitions": partition_metrics.snapshot(apis, controller, self.isr_changes),
            "broker": broker_gauges.snapshot(apis, controller),
            "groups": group_lag.snapshot(apis),
            "share_groups": share_groups.snapshot(apis),
            "idle": self.idle.snapshot(),
            "exporter": exporter_partitions.snapshot(apis, controller),
            "fetchers": fetcher_lag.snapshot(apis.replica_manager),
            "replication_quotas": replication_quotas.snapshot(apis.replica_manager),
            "client_quotas": client_quotas.snapshot(apis.client_quotas, apis.time.milliseconds()),
            "controller": controller_metrics.snapshot(controller),
            "client_telemetry": client_telemetry.snapshot(apis.client_telemetry),
        }

    async def start(self, server: Any) -> None:
        """Serves ``/metrics`` for ``server`` (a KafkaServer that is serving);
        ConfigError naming ``metrics.port`` when the address cannot be listened on."""
        self._server = server
        self.topics.watch_fetches(server.apis.replica_manager)
        server.apis.metrics = self
        if server.apis.client_telemetry is not None:
            server.apis.client_telemetry.keep_points = True
        self.idle.install(asyncio.get_running_loop())
        self.registry.register(
            BrokerCollector(asyncio.get_running_loop(), self.snapshot, server.broker_id)
        )
        try:
            self._http = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as e:
            raise ConfigError(
                "metrics.port",
                self.port,
                f"cannot listen on {self.host}:{self.port}: {e.strerror or e}",
            ) from None
        if isinstance(self._http, tuple) and self.port == 0:
            self.port = self._http[0].server_address[1]
        self._sampler = asyncio.create_task(self._sample_isr(), name="metrics-isr-sampler")
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host, self.port)

    async def _sample_isr(self) -> None:
        while True:
            await asyncio.sleep(ISR_SAMPLE_INTERVAL_S)
            self.isr_changes.sample(self._server.apis.replica_manager.online_partitions())
            self.idle.sample()

    async def stop(self) -> None:
        self.idle.uninstall()
        if self._server is not None:
            self._server.apis.metrics = None
            if self._server.apis.client_telemetry is not None:
                self._server.apis.client_telemetry.keep_points = False
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if isinstance(self._http, tuple):
            http, thread = self._http
            await asyncio.to_thread(http.shutdown)
            http.server_close()
            thread.join(5)
        self._http = None


def instrumented(
    metrics: BrokerMetrics | None, registry: dict[Any, Callable[..., Any]]
) -> dict[Any, Callable[..., Any]]:
    """The handler registry, counted and timed when metrics are on."""
    return registry if metrics is None else metrics.instrument(registry)
