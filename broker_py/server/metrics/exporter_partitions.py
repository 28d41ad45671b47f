"""Cluster and partition series as kafka_exporter names them, served so that a scrape of
every broker of a cluster yields each series once:

- ``kafka_brokers`` and ``kafka_topic_partitions{topic}``: on the active controller
  only, from its metadata cache (live brokers; partitions per topic);
- ``kafka_topic_partition_{current_offset, oldest_offset, leader, leader_is_preferred,
  replicas, in_sync_replica, under_replicated_partition}{topic, partition}``: by the
  partition's leader, from its own replica (current offset: the high watermark, what
  kafka_exporter's ListOffsets(latest) reads; oldest: the log start offset);
- a partition without a reachable leader has no leader to report it: the active
  controller reports its ``leader`` (-1), ``replicas``, ``in_sync_replica`` and
  ``under_replicated_partition`` (1) from its metadata cache, and no offsets.

While leadership moves, a partition may for one scrape be reported by its old and its
new leader, or by neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

_PARTITION_SERIES = {
    "current_offset": "High watermark of a partition (its leader's)",
    "oldest_offset": "Log start offset of a partition (its leader's)",
    "leader": "Leader broker id of a partition (-1: none)",
    "leader_is_preferred": "1 when a partition's leader is its preferred replica",
    "replicas": "Replicas of a partition",
    "in_sync_replica": "In-sync replicas of a partition",
    "under_replicated_partition": "1 when a partition's ISR is smaller than its replicas",
}


def snapshot(apis: Any, controller: Any) -> dict[str, Any]:
    broker_id = apis.broker_id
    # (topic, index) -> {series suffix: value}
    partitions: dict[tuple[str, int], dict[str, int]] = {}
    for p in apis.replica_manager.online_partitions():
        if not p.is_leader:
            continue
        try:
            current, oldest = p.high_watermark, p.log_start_offset
        except Exception:  # a log closed under a deletion: left out of this scrape
            continue
        replicas = list(p.assigned_replicas)
        isr = len(p.isr)
        partitions[(p.topic, p.index)] = {
            "current_offset": current,
            "oldest_offset": oldest,
            "leader": broker_id,
            "leader_is_preferred": int(bool(replicas) and replicas[0] == broker_id),
            "replicas": len(replicas),
            "in_sync_replica": isr,
            "under_replicated_partition": int(isr < len(replicas)),
        }
    brokers = None
    topics: dict[str, int] = {}
    if controller is not None and getattr(controller, "active", False):
        cache = apis.metadata_cache
        brokers = len(cache.alive_broker_ids())
        for t in cache.topics.values():
            topics[t.name] = t.partitions
            for i in range(t.partitions):
                if cache.partition_state(t.name, i) is not None:
                    continue  # led: its leader reports it
                raw = cache.raw_partition_state(t.name, i)
                if raw is None:
                    continue
                partitions[(t.name, i)] = {
                    "leader": -1,
                    "replicas": len(raw.replicas),
                    "in_sync_replica": len(raw.isr),
                    "under_replicated_partition": 1,
                }
    return {"brokers": brokers, "topics": topics, "partitions": partitions}


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    if snap["brokers"] is not None:
        yield GaugeMetricFamily(
            "kafka_brokers",
            "Live brokers in the cluster (active controller)",
            value=snap["brokers"],
        )
    topics = GaugeMetricFamily(
        "kafka_topic_partitions", "Partitions of a topic (active controller)", labels=["topic"]
    )
    for topic, n in sorted(snap["topics"].items()):
        topics.add_metric([topic], n)
    yield topics
    families = {
        suffix: GaugeMetricFamily(
            f"kafka_topic_partition_{suffix}", doc, labels=["topic", "partition"]
        )
        for suffix, doc in _PARTITION_SERIES.items()
    }
    for (topic, index), values in sorted(snap["partitions"].items()):
        labels = [topic, str(index)]
        for suffix, value in values.items():
            families[suffix].add_metric(labels, value)
    yield from families.values()
