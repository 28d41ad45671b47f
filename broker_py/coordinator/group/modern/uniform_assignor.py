"""The ``uniform`` server-side assignor: balanced first, then sticky.

Balance: the sizes of any two members' assignments differ by at most one when every
member subscribes to the same topics; with different subscriptions, no partition can
move to a member that has two or more fewer partitions than its owner. Stickiness: a
member keeps as many of its current partitions as balance allows.

Same subscriptions (homogeneous): with ``P`` partitions and ``M`` members each member's
quota is ``P // M``, and ``P % M`` members get one more (first those already holding
more than ``P // M``, most first). A member keeps its current partitions up to its
quota; the rest, with the partitions nobody holds, fill the members below quota.

Different subscriptions (heterogeneous): each member keeps every current partition of a
topic it still subscribes to; the partitions left are handed out one by one (topics with
the most partitions per subscriber first) to the subscribed member holding the fewest;
then partitions move from a member to a subscribed member holding two or more fewer,
until no such move exists (every move lowers the sum of squared sizes, so this ends).
"""

from __future__ import annotations

import uuid

from broker_py.coordinator.group.modern.assignor import GroupAssignment, GroupSpec, freeze
from broker_py.coordinator.group.modern.config import UNIFORM

TopicPartition = tuple[uuid.UUID, int]


class UniformAssignor:
    @property
    def name(self) -> str:
        return UNIFORM

    def assign(self, spec: GroupSpec) -> GroupAssignment:
        if not spec.members:
            return {}
        if spec.is_homogeneous():
            return _homogeneous(spec)
        return _heterogeneous(spec)


def _valid_current(
    spec: GroupSpec, member_id: str, taken: set[TopicPartition]
) -> list[TopicPartition]:
    """The member's current partitions it may keep: subscribed, existing, not yet taken."""
    member = spec.members[member_id]
    out = []
    for topic_id in sorted(member.assignment):
        if topic_id not in member.subscribed_topic_ids or topic_id not in spec.partitions:
            continue
        count = spec.partitions[topic_id]
        for p in sorted(member.assignment[topic_id]):
            if p < count and (topic_id, p) not in taken:
                out.append((topic_id, p))
    return out


def _homogeneous(spec: GroupSpec) -> GroupAssignment:
    member_ids = sorted(spec.members)
    topics = sorted(
        t for t in spec.members[member_ids[0]].subscribed_topic_ids if t in spec.partitions
    )
    total = sum(spec.partitions[t] for t in topics)
    min_quota, extra = divmod(total, len(member_ids))

    taken: set[TopicPartition] = set()
    current: dict[str, list[TopicPartition]] = {}
    for member_id in member_ids:
        current[member_id] = _valid_current(spec, member_id, taken)
        taken.update(current[member_id])

    # The extra slots go to the members already holding the most.
    by_size = sorted(member_ids, key=lambda m: (-len(current[m]), m))
    quota = {m: min_quota + (1 if i < extra else 0) for i, m in enumerate(by_size)}

    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    kept: set[TopicPartition] = set()
    for member_id in member_ids:
        for topic_id, p in current[member_id][: quota[member_id]]:
            result[member_id].setdefault(topic_id, set()).add(p)
            kept.add((topic_id, p))
    free = [(t, p) for t in topics for p in range(spec.partitions[t]) if (t, p) not in kept]
    pos = 0
    for member_id in member_ids:
        need = quota[member_id] - sum(len(s) for s in result[member_id].values())
        for topic_id, p in free[pos : pos + need]:
            result[member_id].setdefault(topic_id, set()).add(p)
        pos += max(0, need)
    return freeze(result)


def _heterogeneous(spec: GroupSpec) -> GroupAssignment:
    member_ids = sorted(spec.members)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in member_ids:
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            if topic_id in spec.partitions:
                subscribers.setdefault(topic_id, []).append(member_id)

    owner: dict[TopicPartition, str] = {}
    owned: dict[str, set[TopicPartition]] = {m: set() for m in member_ids}
    for member_id in member_ids:
        for tp in _valid_current(spec, member_id, set(owner)):
            owner[tp] = member_id
            owned[member_id].add(tp)

    def order(tp: TopicPartition) -> tuple[float, int, int, uuid.UUID]:
        topic_id, p = tp
        n = len(subscribers[topic_id])
        return (-spec.partitions[topic_id] / n, n, p, topic_id)

    free = sorted(
        ((t, p) for t in subscribers for p in range(spec.partitions[t]) if (t, p) not in owner),
        key=order,
    )
    for tp in free:
        target = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
        owner[tp] = target
        owned[target].add(tp)

    # Move a partition from a member to a subscriber holding two or more fewer.
    moved = True
    while moved:
        moved = False
        for receiver in sorted(member_ids, key=lambda m: (len(owned[m]), m)):
            size = len(owned[receiver])
            best: tuple[int, TopicPartition] | None = None
            for topic_id in spec.members[receiver].subscribed_topic_ids:
                if topic_id not in spec.partitions:
                    continue
                for p in range(spec.partitions[topic_id]):
                    giver = owner[(topic_id, p)]
                    gsize = len(owned[giver])
                    if (
                        giver != receiver
                        and gsize > size + 1
                        and (
                            best is None
                            or gsize > best[0]
                            or (gsize == best[0] and (topic_id, p) > best[1])
                        )
                    ):
                        best = (gsize, (topic_id, p))
            if best is not None:
                tp = best[1]
                owned[owner[tp]].discard(tp)
                owned[receiver].add(tp)
                owner[tp] = receiver
                moved = True
                break

    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    for (topic_id, p), member_id in owner.items():
        result[member_id].setdefault(topic_id, set()).add(p)
    return freeze(result)
