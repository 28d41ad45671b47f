"""Kafka's SimpleAssignor for share groups (KIP-932), whose name is ``simple``.

A partition may go to several members. Per member the subscribed partitions are listed
(topics in topic-id order, partitions in order); then:

1. each member takes the partition at index ``abs(java_hash(member_id) % n)`` of its
   list of ``n`` partitions (Java's ``String.hashCode`` and remainder);
2. partitions nobody took in step 1 and no member may keep (step 3) are dealt
   round-robin to the members (all members when the subscriptions are the same, else
   per topic to the members subscribing to it, in member-id order);
3. every member keeps the partitions it holds now of topics it still subscribes to.

Kafka's version counts in step 2 a partition held by a member that stopped subscribing
to its topic as held, which can leave it to nobody; here it is dealt again, so that every
subscribed partition always has a member.

With fewer partitions than members, every partition goes to several members: one
partition is assigned to every member.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from broker_py.coordinator.group.modern.member import Assignment, make_assignment

TopicPartition = tuple[uuid.UUID, int]

NAME = "simple"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _java_abs_rem(a: int, n: int) -> int:
    """Java's ``Math.abs(a % n)`` (its remainder takes the dividend's sign)."""
    return abs(a) % n


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target assignment of every member. ``subscriptions``: member id -> subscribed
    topic ids that exist; ``partitions``: topic id -> partition count; ``current``: the
    members' current target assignments."""
    members = sorted(subscriptions)
    targets: dict[str, list[TopicPartition]] = {
        m: [(t, p) for t in sorted(subscriptions[m]) for p in range(partitions.get(t, 0))]
        for m in members
    }
    # What members hold now and may keep: partitions that exist, of topics they still
    # subscribe to.
    held: dict[TopicPartition, list[str]] = {}
    for m in members:
        for t, parts in current.get(m, {}).items():
            if t not in subscriptions[m]:
                continue
            for p in parts:
                if p < partitions.get(t, 0):
                    held.setdefault((t, p), []).append(m)
    new: dict[TopicPartition, list[str]] = {}
    for m in members:
        target = targets[m]
        if target:
            new.setdefault(target[_java_abs_rem(java_string_hash(m), len(target))], []).append(m)
    homogeneous = len({subscriptions[m] for m in members}) <= 1
    every: list[TopicPartition] = []
    seen: set[TopicPartition] = set()
    for m in members:
        for tp in targets[m]:
            if tp not in seen:
                seen.add(tp)
                every.append(tp)
    unassigned = [tp for tp in every if tp not in new and tp not in held]
    if homogeneous:
        for i, tp in enumerate(unassigned):
            new.setdefault(tp, []).append(members[i % len(members)])
    else:
        by_topic: dict[uuid.UUID, list[TopicPartition]] = {}
        for tp in unassigned:
            by_topic.setdefault(tp[0], []).append(tp)
        for topic, tps in by_topic.items():
            subscribers = [m for m in members if topic in subscriptions[m]]
            for i, tp in enumerate(tps):
                new.setdefault(tp, []).append(subscribers[i % len(subscribers)])
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for tp, holders in held.items():
        for m in holders:
            out[m].setdefault(tp[0], set()).add(tp[1])
    for tp, takers in new.items():
        for m in takers:
            out[m].setdefault(tp[0], set()).add(tp[1])
    return {m: make_assignment(out[m]) for m in members}
