"""The registry's Prometheus series, registered on a given CollectorRegistry (the broker's
metrics endpoint when embedded):

    logstore_schema_registry_requests_total{endpoint,method,status}   counter
    logstore_schema_registry_request_seconds{endpoint,method}         histogram
    logstore_schema_registry_schemas                                  gauge (distinct ids)
    logstore_schema_registry_is_primary                               gauge (1 or 0)

`endpoint` is the route's pattern (`/subjects/{subject}/versions`), never the raw path, so the
label set stays bounded.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class RegistryMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        schema_count: Callable[[], int],
        is_primary: Callable[[], bool],
    ) -> None:
        self.requests = Counter(
            "logstore_schema_registry_requests",
            "Schema registry HTTP requests answered",
            ["endpoint", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "logstore_schema_registry_request_seconds",
            "Schema registry HTTP request latency",
            ["endpoint", "method"],
            buckets=_BUCKETS,
            registry=registry,
        )
        schemas = Gauge(
            "logstore_schema_registry_schemas",
            "Schemas (distinct ids) in the registry",
            registry=registry,
        )
        schemas.set_function(lambda: float(schema_count()))
        primary = Gauge(
            "logstore_schema_registry_is_primary",
            "1 when this registry instance is the primary",
            registry=registry,
        )
        primary.set_function(lambda: 1.0 if is_primary() else 0.0)

    def observe(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, method, str(status)).inc()
        self.latency.labels(endpoint, method).observe(seconds)
