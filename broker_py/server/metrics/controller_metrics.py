"""The controller's leader election timer (Kafka's ``ControllerStats``
LeaderElectionRateAndTimeMs: each broker change the active controller handled, offline
partitions' elections included; :mod:`broker_py.controller.controller_stats`), as the
JMX exporter names a Kafka timer:

- ``kafka_controller_controllerstats_leaderelectionrateandtimems{quantile}``: handling
  time in ms, quantiles 0.5 ... 0.999 of the recent ones;
- ``..._count`` (rate it for elections per second) and ``..._sum`` (ms).

Counted on the broker that was the active controller; 0 on the others and on a broker
alone (it has no broker changes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric

QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
NAME = "kafka_controller_controllerstats_leaderelectionrateandtimems"


def snapshot(controller: Any) -> dict[str, Any]:
    stats = getattr(controller, "stats", None)
    if stats is None:
        return {"count": 0, "sum_ms": 0.0, "recent_ms": []}
    count, sum_ms, recent = stats.snapshot()
    return {"count": count, "sum_ms": sum_ms, "recent_ms": recent}


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    summary = Metric(
        NAME, "Leader elections (broker changes handled) and their time, ms", "summary"
    )
    recent = snap["recent_ms"]
    for q in QUANTILES:
        value = recent[min(len(recent) - 1, int(q * len(recent)))] if recent else 0.0
        summary.add_sample(NAME, {"quantile": str(q)}, value)
    summary.add_sample(f"{NAME}_count", {}, snap["count"])
    summary.add_sample(f"{NAME}_sum", {}, snap["sum_ms"])
    yield summary
