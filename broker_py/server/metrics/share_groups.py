"""Share groups (KIP-932) on this broker's share-partitions, per group: the sums over the
share-partitions this broker leads and holds (those a ShareFetch has loaded) of

- ``logstore_share_group_acquired_records{group}``: records ACQUIRED by a member now;
- ``logstore_share_group_in_flight_records{group}``: records in the in-flight window not
  yet done (AVAILABLE or ACQUIRED);
- ``logstore_share_group_redelivered_records_total{group}``: acquisitions of a record
  delivered before, since each share-partition was loaded here (it restarts at 0 when its
  leadership moves: a counter reset).

Read from the share-partition manager (``apis.share_partition_manager``): a dashboard sums
over brokers, each share-partition being held by its leader only.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


def snapshot(apis: Any) -> dict[str, tuple[int, int, int]]:
    """Group id -> (acquired, in flight, redelivered)."""
    manager = getattr(apis, "share_partition_manager", None)
    if manager is None:
        return {}
    sums: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for key, share_partition in list(manager.held()):
        counts = share_partition.counts()
        row = sums[key.group_id]
        row[0] += counts.acquired
        row[1] += counts.in_flight
        row[2] += counts.redelivered
    return {group: (a, i, r) for group, (a, i, r) in sums.items()}


def collect(snap: dict[str, tuple[int, int, int]]) -> Iterator[Metric]:
    acquired = GaugeMetricFamily(
        "logstore_share_group_acquired_records",
        "Records acquired by a share group's members now, on this broker's share-partitions",
        labels=["group"],
    )
    in_flight = GaugeMetricFamily(
        "logstore_share_group_in_flight_records",
        "Records in a share group's in-flight windows not yet done (available or acquired)",
        labels=["group"],
    )
    redelivered = CounterMetricFamily(
        "logstore_share_group_redelivered_records",
        "Acquisitions of records delivered before, since the share-partitions were loaded",
        labels=["group"],
    )
    for group, (a, i, r) in sorted(snap.items()):
        acquired.add_metric([group], a)
        in_flight.add_metric([group], i)
        redelivered.add_metric([group], r)
    yield acquired
    yield in_flight
    yield redelivered
