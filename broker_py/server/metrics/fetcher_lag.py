"""How far this broker's follower replicas are behind their leaders (Kafka's
``ReplicaFetcherManager`` MaxLag and ``FetcherLagMetrics``), in messages:

- ``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``: the largest lag of
  any partition this broker follows (0 when it follows none, and on a broker alone);
- ``kafka_server_fetcherlagmetrics_consumerlag{clientId, topic, partition}``: each
  followed partition's lag, ``clientId`` the fetcher's (``broker-<id>-fetcher-<n>``,
  one per leader and fetcher id).

A partition's lag is the leader's high watermark minus the follower's next offset, as
of the leader's last answer (``PartitionFetchState.lag``, set by the replica fetcher).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric


def snapshot(replica_manager: Any) -> dict[str, Any]:
    manager = getattr(replica_manager, "replica_fetcher_manager", None)
    lags: list[tuple[str, str, int, int]] = []
    if manager is not None:
        for fetcher_id, (_, fetcher) in list(manager.fetchers.items()):
            client_id = f"broker-{manager.broker_id}-fetcher-{fetcher_id[1]}"
            for (topic, index), state in list(fetcher.partitions.items()):
                lags.append((client_id, topic, index, state.lag))
    return {"lags": lags}


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    lags = snap["lags"]
    max_lag = GaugeMetricFamily(
        "kafka_server_replicafetchermanager_maxlag",
        "Largest lag, in messages, of a partition this broker follows",
        labels=["clientId"],
    )
    max_lag.add_metric(["Replica"], max((lag for *_, lag in lags), default=0))
    yield max_lag
    per_partition = GaugeMetricFamily(
        "kafka_server_fetcherlagmetrics_consumerlag",
        "Lag, in messages, of a partition this broker follows",
        labels=["clientId", "topic", "partition"],
    )
    for client_id, topic, index, lag in sorted(lags):
        per_partition.add_metric([client_id, topic, str(index)], lag)
    yield per_partition
