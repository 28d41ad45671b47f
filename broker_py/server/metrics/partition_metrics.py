"""Partition state as Kafka's ReplicaManager, Log and controller beans report it, read from
the broker's partitions (``ReplicaManager.partitions``) at scrape time.

- ``kafka_server_replicamanager_partitioncount``, ``..._leadercount``;
- ``..._underreplicatedpartitions``: led here with an ISR smaller than the replicas;
- ``..._underminisrpartitioncount`` / ``..._atminisrpartitioncount``: led here with an
  ISR below / at the topic's ``min.insync.replicas``;
- ``..._isrshrinks_total`` / ``..._isrexpands_total``: ISR size changes of partitions led
  here, seen by :class:`IsrChangeTracker` (sampled each second and at each scrape, within
  one leader epoch; a shrink undone within one sample is not seen);
- ``kafka_controller_kafkacontroller_offlinepartitionscount``: on the active controller,
  partitions without a reachable leader (0 elsewhere, as in Kafka);
- ``kafka_log_log_size{topic, partition}``, ``..._logstartoffset``, ``..._logendoffset``:
  every replica held here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class IsrChangeTracker:
    """Counts ISR shrinks and expands of led partitions from successive samples."""

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0
        # (topic, index) -> (leader epoch, ISR size) at the last sample
        self._last: dict[tuple[str, int], tuple[int, int]] = {}

    def sample(self, partitions: list[Any]) -> None:
        seen: dict[tuple[str, int], tuple[int, int]] = {}
        for p in partitions:
            if not p.is_leader:
                continue
            key = (p.topic, p.index)
            now = (p.leader_epoch, len(p.isr))
            seen[key] = now
            before = self._last.get(key)
            if before is not None and before[0] == now[0]:
                if now[1] < before[1]:
                    self.shrinks += 1
                elif now[1] > before[1]:
                    self.expands += 1
        self._last = seen


def snapshot(apis: Any, controller: Any, tracker: IsrChangeTracker) -> dict[str, Any]:
    partitions = apis.replica_manager.online_partitions()
    tracker.sample(partitions)
    min_isr: dict[str, int] = {}
    led = under_replicated = under_min = at_min = 0
    logs = []
    for p in partitions:
        try:
            logs.append((p.topic, p.index, p.size_bytes, p.log_start_offset, p.log_end_offset))
        except Exception:  # a log closed under a deletion: left out of this scrape
            continue
        if not p.is_leader:
            continue
        led += 1
        isr = len(p.isr)
        if isr < len(p.assigned_replicas):
            under_replicated += 1
        if p.topic not in min_isr:
            min_isr[p.topic] = apis.log_config_manager.min_insync_replicas(p.topic)
        if isr < min_isr[p.topic]:
            under_min += 1
        elif isr == min_isr[p.topic]:
            at_min += 1
    offline = 0
    if controller is not None and getattr(controller, "active", False):
        cache = apis.metadata_cache
        offline = sum(
            1
            for t in cache.topics.values()
            for i in range(t.partitions)
            if cache.partition_state(t.name, i) is None
        )
    return {
        "partitioncount": len(partitions),
        "leadercount": led,
        "underreplicatedpartitions": under_replicated,
        "underminisrpartitioncount": under_min,
        "atminisrpartitioncount": at_min,
        "offline": offline,
        "shrinks": tracker.shrinks,
        "expands": tracker.expands,
        "logs": logs,
    }


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    for name in (
        "partitioncount",
        "leadercount",
        "underreplicatedpartitions",
        "underminisrpartitioncount",
        "atminisrpartitioncount",
    ):
        yield GaugeMetricFamily(
            f"kafka_server_replicamanager_{name}", f"ReplicaManager {name}", value=snap[name]
        )
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrshrinks",
        "ISR shrinks of partitions led here",
        value=snap["shrinks"],
    )
    yield CounterMetricFamily(
        "kafka_server_replicamanager_isrexpands",
        "ISR expands of partitions led here",
        value=snap["expands"],
    )
    yield GaugeMetricFamily(
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "Partitions without a reachable leader (active controller only)",
        value=snap["offline"],
    )
    size = GaugeMetricFamily(
        "kafka_log_log_size", "Bytes of a partition's log", labels=["topic", "partition"]
    )
    start = GaugeMetricFamily(
        "kafka_log_log_logstartoffset",
        "A partition's log start offset",
        labels=["topic", "partition"],
    )
    end = GaugeMetricFamily(
        "kafka_log_log_logendoffset", "A partition's log end offset", labels=["topic", "partition"]
    )
    for topic, index, size_bytes, log_start, log_end in sorted(snap["logs"]):
        labels = [topic, str(index)]
        size.add_metric(labels, size_bytes)
        start.add_metric(labels, log_start)
        end.add_metric(labels, log_end)
    yield size
    yield start
    yield end
