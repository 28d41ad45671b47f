"""The ``range`` server-side assignor: per topic, contiguous ranges, sticky.

For each topic, with ``n`` subscribed members and ``p`` partitions, every member gets
``p // n`` partitions and the first ``p % n`` members to claim one get one more. A
member keeps the lowest-numbered of the partitions it already has, up to its quota; the
partitions left over are handed out in ascending order to members still below quota,
members in member-id order. Members with the same subscription to topics of the same
partition count (co-partitioned topics) thus get the same partition numbers of each
topic when the group starts from nothing.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from broker_py.coordinator.group.modern.assignor import GroupAssignment, GroupSpec, freeze
from broker_py.coordinator.group.modern.config import RANGE


class RangeAssignor:
    @property
    def name(self) -> str:
        return RANGE

    def assign(self, spec: GroupSpec) -> GroupAssignment:
        members_per_topic: dict[uuid.UUID, list[str]] = defaultdict(list)
        for member_id in sorted(spec.members):
            for topic_id in spec.members[member_id].subscribed_topic_ids:
                if topic_id in spec.partitions:
                    members_per_topic[topic_id].append(member_id)

        result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.members}
        for topic_id in sorted(members_per_topic):
            members = members_per_topic[topic_id]
            count = spec.partitions[topic_id]
            min_quota, extra = divmod(count, len(members))
            kept: set[int] = set()
            unfilled: list[tuple[str, int]] = []
            for member_id in members:
                current = sorted(
                    p
                    for p in spec.members[member_id].assignment.get(topic_id, frozenset())
                    if p < count and p not in kept
                )
                retain = current[:min_quota]
                remaining = min_quota - len(current)
                if remaining < 0 and extra > 0:
                    extra -= 1
                    retain = current[: min_quota + 1]
                else:
                    unfilled.append((member_id, remaining))
                if retain:
                    result[member_id][topic_id] = set(retain)
                    kept.update(retain)
            free = [p for p in range(count) if p not in kept]
            pos = 0
            for member_id, remaining in unfilled:
                if extra > 0:
                    remaining += 1
                    extra -= 1
                if remaining > 0:
                    take = free[pos : pos + remaining]
                    pos += remaining
                    result[member_id].setdefault(topic_id, set()).update(take)
        return freeze(result)
