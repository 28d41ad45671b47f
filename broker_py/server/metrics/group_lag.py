"""Consumer group lag as kafka_exporter names it, for the groups this broker coordinates:

- ``kafka_consumergroup_current_offset{consumergroup, topic, partition}``: the committed offset;
- ``kafka_consumergroup_lag{consumergroup, topic, partition}``: high watermark minus
  committed offset (never below 0);
- ``kafka_consumergroup_lag_sum{consumergroup, topic}`` and
  ``kafka_consumergroup_members{consumergroup}``.

The high watermark is the local replica's (leader or follower): a committed partition
with no replica on the coordinating broker has no lag series there (kafka_exporter asks
the leaders; a dashboard summing over brokers sees each group once, on its coordinator).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric


def snapshot(apis: Any) -> dict[str, Any]:
    coordinator = apis.group_coordinator
    if coordinator is None:
        return {"offsets": [], "members": {}}
    rm = apis.replica_manager
    offsets = []
    members = {}
    for group_id, group in list(coordinator.groups.items()):
        members[group_id] = len(group.members)
        for (topic, index), committed in list(group.offsets.items()):
            partition = rm.get_partition(topic, index)
            hw = partition.high_watermark if partition is not None else None
            offsets.append((group_id, topic, index, committed.offset, hw))
    return {"offsets": offsets, "members": members}


def collect(snap: dict[str, Any]) -> Iterator[Metric]:
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "Committed offset of a group", labels=labels
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus the group's committed offset",
        labels=labels,
    )
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum",
        "A group's lag over a topic's partitions",
        labels=["consumergroup", "topic"],
    )
    sums: collections.Counter[tuple[str, str]] = collections.Counter()
    for group_id, topic, index, offset, hw in sorted(snap["offsets"]):
        current.add_metric([group_id, topic, str(index)], offset)
        if hw is not None:
            behind = max(0, hw - offset)
            lag.add_metric([group_id, topic, str(index)], behind)
            sums[(group_id, topic)] += behind
    for (group_id, topic), n in sorted(sums.items()):
        lag_sum.add_metric([group_id, topic], n)
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of a group", labels=["consumergroup"]
    )
    for group_id, n in sorted(snap["members"].items()):
        members.add_metric([group_id], n)
    yield current
    yield lag
    yield lag_sum
    yield members
