"""The replication throttles' byte rates (KIP-73), named as the JMX exporter names Kafka's
``kafka.server:type=LeaderReplication`` and ``type=FollowerReplication`` ``byte-rate``:

- ``kafka_server_leaderreplication_byte_rate``: bytes/s this broker, as leader, sent
  followers for the partitions its leader throttle lists;
- ``kafka_server_followerreplication_byte_rate``: bytes/s its replica fetchers took for
  the partitions its follower throttle lists.

Both are measured over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``, throttled or not (0 with no throttled replica).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric


def snapshot(replica_manager: Any) -> dict[str, float]:
    return {
        "leader": replica_manager.leader_quota.byte_rate(),
        "follower": replica_manager.follower_quota.byte_rate(),
    }


def collect(snap: dict[str, float]) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "kafka_server_leaderreplication_byte_rate",
        "Bytes/s sent to followers of throttled replicas (leader.replication.throttled.replicas)",
        value=snap["leader"],
    )
    yield GaugeMetricFamily(
        "kafka_server_followerreplication_byte_rate",
        "Bytes/s fetched for throttled replicas (follower.replication.throttled.replicas)",
        value=snap["follower"],
    )
