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
  across brokers;
- ``kafka_network_requestmetrics_requestqueuetimems{request, quantile}`` (``_count``,
  ``_sum``) and ``kafka_network_requestmetrics_requestqueuetime_seconds_bucket``: the
  time from the socket read that completed the request to its handler's start (it
  waited behind the earlier requests of its connection; a large request's decoding on
  a worker thread is in it), Kafka's RequestQueueTimeMs;
- ``kafka_network_requestmetrics_errors_total{request, error}`` (ErrorsPerSec): each
  error code the responses carried, NONE included (:mod:`.response_errors`); a handler
  that raised counts the code it is answered with (a KafkaError's, else
  UNKNOWN_SERVER_ERROR).

The handlers' busy time (``busy_s``: their synchronous calls, and each step of a
waiting handler's coroutine, on the event loop) feeds the request handler idle ratio
(:mod:`.loop_idle`).

State is plain dicts touched only on the event loop.
"""

from __future__ import annotations

import bisect
import collections
import functools
import time
import types
from collections.abc import Callable, Generator, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from broker_py.server.metrics import response_errors
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

RESERVOIR = 1028
_UNKNOWN_SERVER_ERROR = int(ErrorCode.UNKNOWN_SERVER_ERROR)
_SELF_COUNTED = frozenset({"Produce", "Fetch"})
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
        self.queue_times: dict[str, _ApiStats] = {}
        # API name -> error code -> responses' count of it
        self.errors: dict[str, collections.Counter[int]] = {}
        self.busy_s = 0.0

    def instrument(self, registry: dict[Any, Callable[..., Any]]) -> dict[Any, Callable[..., Any]]:
        """The registry with every handler counted and timed."""
        return {key: self._wrap(key.api_name, fn) for key, fn in registry.items()}

    def errors_of(self, name: str) -> collections.Counter[int]:
        return self.errors.setdefault(name, collections.Counter())

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        stats = self.times.setdefault(name, _ApiStats())
        queued = self.queue_times.setdefault(name, _ApiStats())
        errors = self.errors_of(name)
        # Produce and Fetch report their codes from their per-partition outcomes.
        walk_errors = name not in _SELF_COUNTED
        clock = self.clock
        requests = self.requests
        metrics = self

        @functools.wraps(fn)
        def handle(request: Any, connection: Any) -> Any:
            started = clock()
            received = getattr(connection, "request_received", None)
            if received:
                queued.observe(max(0.0, started - received))
            requests[(name, request.api_version)] += 1
            try:
                result = fn(request, connection)
            except Exception as exc:
                metrics.busy_s += clock() - started
                errors[_raised_code(exc)] += 1
                stats.observe(clock() - started)
                raise
            done = clock()
            metrics.busy_s += done - started
            if hasattr(result, "__await__"):
                return metrics._finish(result, started, stats, errors, walk_errors)
            stats.observe(done - started)
            if walk_errors and result is not None:
                response_errors.count(result, errors)
            return result

        return handle

    @types.coroutine
    def _finish(
        self,
        pending: Any,
        started: float,
        stats: _ApiStats,
        errors: collections.Counter[int],
        walk_errors: bool,
    ) -> Generator[Any, Any, Any]:
        """Awaits a waiting handler's coroutine, adding the time of each of its steps
        to ``busy_s``; its response's codes are counted once it returns."""
        clock = self.clock
        steps = pending.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        try:
            while True:
                t = clock()
                try:
                    yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
                except StopIteration as stop:
                    self.busy_s += clock() - t
                    result = stop.value
                    break
                except Exception as exc:
                    self.busy_s += clock() - t
                    errors[_raised_code(exc)] += 1
                    raise
                self.busy_s += clock() - t
                try:
                    sent, thrown = (yield yielded), None
                except GeneratorExit:
                    steps.close()
                    raise
                except BaseException as exc:  # handed to the handler, as await would
                    sent, thrown = None, exc
        finally:
            stats.observe(clock() - started)
        if walk_errors and result is not None:
            response_errors.count(result, errors)
        return result

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "times": _times(self.times),
            "queue_times": _times(self.queue_times),
            "errors": {name: dict(codes) for name, codes in self.errors.items() if codes},
            "busy_s": self.busy_s,
        }


def _times(per_api: dict[str, _ApiStats]) -> dict[str, Any]:
    return {
        name: (s.count, s.sum_s, list(s.buckets), sorted(s.recent))
        for name, s in per_api.items()
        if s.count
    }


def _raised_code(exc: Exception) -> int:
    """The code a handler's exception is answered with: a KafkaError's own (the request
    refused as a whole), else UNKNOWN_SERVER_ERROR."""
    return int(exc.errno) if isinstance(exc, KafkaError) else _UNKNOWN_SERVER_ERROR


def _error_name(code: int) -> str:
    member = ErrorCode._value2member_map_.get(code)
    return member.name if member is not None else f"UNKNOWN_{code}"


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests handled, by API and version",
        labels=["request", "version"],
    )
    for (name, version), n in sorted(snap["requests"].items()):
        requests.add_metric([name, str(version)], n)
    yield requests
    yield from _timing(
        snap["times"],
        "totaltime",
        "Request handling time (from the handler's start to its response)",
    )
    yield from _timing(
        snap["queue_times"],
        "requestqueuetime",
        "Request queue time (from the read that completed the request to its handler's start)",
    )
    errors = CounterMetricFamily(
        "kafka_network_requestmetrics_errors",
        "Error codes in responses, by API (NONE included)",
        labels=["request", "error"],
    )
    for name, codes in sorted(snap["errors"].items()):
        for code, n in sorted(codes.items()):
            errors.add_metric([name, _error_name(code)], n)
    yield errors


def _timing(times: dict[str, Any], kind: str, doc: str) -> Iterator[Metric]:
    """``kafka_network_requestmetrics_<kind>ms`` (a summary in ms, quantiles of the
    recent requests) and ``..._<kind>_seconds`` (a histogram)."""
    summary_name = f"kafka_network_requestmetrics_{kind}ms"
    summary = Metric(summary_name, f"{doc}, ms (recent requests' quantiles)", "summary")
    histogram = HistogramMetricFamily(
        f"kafka_network_requestmetrics_{kind}_seconds", doc, labels=["request"]
    )
    for name, (count, sum_s, buckets, recent) in sorted(times.items()):
        for q in QUANTILES:
            value = recent[min(len(recent) - 1, int(q * len(recent)))] * 1000 if recent else 0.0
            summary.add_sample(summary_name, {"request": name, "quantile": str(q)}, value)
        summary.add_sample(f"{summary_name}_count", {"request": name}, count)
        summary.add_sample(f"{summary_name}_sum", {"request": name}, sum_s * 1000)
        cumulative, pairs = 0, []
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), buckets):
            cumulative += n
            pairs.append((bound, cumulative))
        histogram.add_metric([name], pairs, sum_s)
    yield summary
    yield histogram
