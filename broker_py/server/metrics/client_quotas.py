"""Client quota sensors (KIP-13, KIP-124), one series per sensor's ``user`` and
``client_id`` labels, named as the JMX exporter (with lower-case names, as every series
here) names Kafka's ``kafka.server:type=Produce|Fetch|Request,user=..,client-id=..``:

- ``kafka_server_produce_byte_rate`` / ``kafka_server_fetch_byte_rate``: bytes/s the
  sensor's clients produced / consumers fetched;
- ``kafka_server_request_request_time``: percent of the event loop their requests took;
- ``kafka_server_produce_throttle_time``, ``kafka_server_fetch_throttle_time``,
  ``kafka_server_request_throttle_time``: the average throttle time (ms) given.

All over ``quota.window.num`` windows of ``quota.window.size.seconds``. A sensor exists
while a quota of its type exists anywhere and its clients sent within the last hour (an
empty label is a tag the quota level does not use, as Kafka's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

_TYPES = (
    ("produce", "byte_rate", "Bytes/s produced by the clients of a produce quota"),
    ("fetch", "byte_rate", "Bytes/s fetched by the consumers of a fetch quota"),
    ("request", "request_time", "Percent of the event loop taken by a request quota's clients"),
)

Rows = list[tuple[tuple[str, str], float, float]]


def snapshot(quotas: Any, now_ms: int) -> dict[str, Rows]:
    if quotas is None:
        return {}
    return {kind: getattr(quotas, kind).sensors(now_ms) for kind, _, _ in _TYPES}


def collect(snap: dict[str, Rows]) -> Iterator[Metric]:
    for kind, name, doc in _TYPES:
        rows = snap.get(kind, [])
        rate = GaugeMetricFamily(f"kafka_server_{kind}_{name}", doc, labels=["user", "client_id"])
        throttle = GaugeMetricFamily(
            f"kafka_server_{kind}_throttle_time",
            f"Average throttle time (ms) given the clients of a {kind} quota",
            labels=["user", "client_id"],
        )
        for (user, client_id), value, throttle_avg in rows:
            rate.add_metric([user, client_id], value)
            throttle.add_metric([user, client_id], throttle_avg)
        yield rate
        yield throttle
