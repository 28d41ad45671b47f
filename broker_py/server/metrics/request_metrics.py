"""Per-API request counts and latencies (Kafka's ``kafka.network:type=RequestMetrics``).

Every handler of the registry is wrapped: the count goes up by request name and
version, and the time from the handler's start to its response (for a long poll or a
rebalance, until the coroutine returns) is recorded. Kafka's TotalTimeMs also holds
the time in queues and sending, which the handler does not see.

Exported, as the JMX exporter names Kafka's beans:

- ``kafka_network_requestmetrics_requests_total{request, version}`` (RequestsPerSec);
- ``kafka_network_requestmetrics_totaltimems{request, quantile}`` with ``_count`` and
  ``_sum``: quantiles 0.50 0.75 0.95 0.98 0.99 0.999 over the last
  :data:`RESERVOIR` requests of that API, as Kafka's histogram reports them;
- ``kafka_network_requestmetrics_totaltime_seconds_bucket{request, le}`` (``_count``,
  ``_sum``): the same times as a Prometheus histogram, for ``histogram_quantile``
  across brokers.

State is plain dicts touched only on the event loop.
"""

from __future__ import annotations

import bisect
import collections
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

RESERVOIR = 1028
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
# Histogram bucket bounds in seconds.
BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class _ApiStats:
    __slots__ = ("buckets", "count", "recent", "sum_s")

    def __init__(self) -> None:
        self.count = 0
        self.sum_s = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.recent: collections.deque[float] = collections.deque(maxlen=RESERVOIR)

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.sum_s += seconds
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.recent.append(seconds)


class RequestMetrics:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.requests: collections.Counter[tuple[str, int]] = collections.Counter()
        self.times: dict[str, _ApiStats] = {}

    def instrument(self, registry: dict[Any, Callable[..., Any]]) -> dict[Any, Callable[..., Any]]:
        """The registry with every handler counted and timed."""
        return {key: self._wrap(key.api_name, fn) for key, fn in registry.items()}

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        stats = self.times.setdefault(name, _ApiStats())
        clock = self.clock
        requests = self.requests

        async def finish(pending: Any, started: float) -> Any:
            try:
                return await pending
            finally:
                stats.observe(clock() - started)

        @functools.wraps(fn)
        def handle(request: Any, connection: Any) -> Any:
            started = clock()
            requests[(name, request.api_version)] += 1
            result = fn(request, connection)
            if hasattr(result, "__await__"):
                return finish(result, started)
            stats.observe(clock() - started)
            return result

        return handle

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "times": {
                name: (s.count, s.sum_s, list(s.buckets), sorted(s.recent))
                for name, s in self.times.items()
                if s.count
            },
        }


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests handled, by API and version",
        labels=["request", "version"],
    )
    for (name, version), n in sorted(snap["requests"].items()):
        requests.add_metric([name, str(version)], n)
    yield requests
    summary = Metric(
        "kafka_network_requestmetrics_totaltimems",
        "Request handling time in ms (recent requests' quantiles)",
        "summary",
    )
    histogram = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltime_seconds",
        "Request handling time",
        labels=["request"],
    )
    for name, (count, sum_s, buckets, recent) in sorted(snap["times"].items()):
        for q in QUANTILES:
            value = recent[min(len(recent) - 1, int(q * len(recent)))] * 1000 if recent else 0.0
            summary.add_sample(
                "kafka_network_requestmetrics_totaltimems",
                {"request": name, "quantile": str(q)},
                value,
            )
        summary.add_sample(
            "kafka_network_requestmetrics_totaltimems_count", {"request": name}, count
        )
        summary.add_sample(
            "kafka_network_requestmetrics_totaltimems_sum", {"request": name}, sum_s * 1000
        )
        cumulative, pairs = 0, []
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), buckets):
            cumulative += n
            pairs.append((bound, cumulative))
        histogram.add_metric([name], pairs, sum_s)
    yield summary
    yield histogram
