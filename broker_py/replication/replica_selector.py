"""Fetch from the closest replica (KIP-392): which replica a consumer should read a
partition from, chosen by the leader (Kafka's ``ReplicaSelector``). Pure.

``replica.selector.class``:
- unset (Kafka's default) or ``org.apache.kafka.common.replica.LeaderSelector``: always
  the leader;
- ``org.apache.kafka.common.replica.RackAwareReplicaSelector``: for a client that names
  its rack (``client.rack``, Fetch v11+ ``rack_id``), a replica in that rack — the
  leader if it is there, else the candidate with the highest log end offset, then the
  most recently caught up; the leader when no candidate is in the rack.

Candidates are the leader and the followers in the ISR whose log holds the fetch offset
(log start ≤ fetch offset ≤ log end), so a consumer is never sent to a replica that
cannot answer it. A follower serves consumers up to its own high watermark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)


class ReplicaView(NamedTuple):
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def candidates(
    partition: Partition, fetch_offset: int, racks: Mapping[int, str | None], now_ms: int
) -> tuple[ReplicaView, list[ReplicaView]]:
    """(the leader's view, the followers that may serve ``fetch_offset``)."""
    leader = ReplicaView(
        partition.local_broker_id, racks.get(partition.local_broker_id), partition.log_end_offset, 0
    )
    followers = [
        ReplicaView(
            r.broker_id,
            racks.get(r.broker_id),
            r.log_end_offset,
            max(0, now_ms - r.last_caught_up_time_ms),
        )
        for r in partition.remote_replicas.values()
        if r.broker_id in partition.isr
        and r.broker_id in racks
        and r.log_start_offset <= fetch_offset <= r.log_end_offset
    ]
    return leader, followers


def select(
    selector: str | None, client_rack: str, leader: ReplicaView, followers: list[ReplicaView]
) -> int:
    """The broker id the consumer should fetch from."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return leader.broker_id
    if leader.rack == client_rack:
        return leader.broker_id
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return leader.broker_id
    best = max(
        same_rack, key=lambda f: (f.log_end_offset, -f.time_since_caught_up_ms, -f.broker_id)
    )
    return best.broker_id
