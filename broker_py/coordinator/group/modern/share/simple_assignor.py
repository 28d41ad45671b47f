"""Kafka's SimpleAssignor for share groups (KIP-932), whose name is ``simple``, with the rules
of Kafka 4.1 and 4.2: balance first, then stickiness.

A partition may go to several members. For a set of members ``M`` (in member-id order) and
of partitions ``P`` (topics in topic-id order, partitions in order) the balance is:

- every partition goes to ``sharing = ceil(|M| / |P|)`` members: one when there are at
  least as many partitions as members, else enough that every member gets some;
- the ``i``-th member (from 0) is owed ``ceil(s * (i + 1) / |M|) - ceil(s * i / |M|)``
  partitions, where ``s = sharing * |P|`` is the number of places: ``floor(|P| / |M|)`` or
  one more when ``|P| >= |M|``, one or two when ``|M| > |P|``; the counts add up to ``s``
  and are computed exactly in integers.

Starting from the members' current target assignments:

1. a member drops the partitions of topics it does not subscribe to (and of partitions that
   do not exist);
2. a member holding more than it is owed drops its lowest partitions until it holds its due;
3. a partition held by more than ``sharing`` members is dropped by the first of them (in
   member-id order) until ``sharing`` hold it;
4. the members holding less than they are owed ("unfilled", in member-id order) are dealt
   the partitions that lack members: one pass over the partitions in order with one cursor
   over the unfilled members that wraps around; a member leaves the list once it holds its
   due, and skips a partition it already has. If the cursor goes once around the list
   without placing a partition, dealing stops: every remaining unfilled member already has
   the partition. That can only happen with more members than partitions; the partition
   then has fewer than ``sharing`` members (never none), and the dealing is left short.

When all the members subscribe to the same topics the rules run once over all their
partitions (Kafka's SimpleHomogeneousAssignmentBuilder); otherwise once per topic, over the
members subscribing to it, and a member's assignment is the union of its topics' (Kafka's
SimpleHeterogeneousAssignmentBuilder). Kafka iterates hash sets where this module uses the
orders above; the counts and the guarantees are the same.

Guarantees (per topic when the subscriptions differ): every partition of a subscribed topic
has a member; with at least as many partitions as members each has exactly one and the
members' counts are within one of each other; from no current assignment, with more members
than partitions, each partition has exactly ``sharing`` members and each member one or two
partitions. An assignment computed here is a fixed point: with the same members,
subscriptions and partitions every member keeps what it has.

Kafka's heterogeneous builder only visits topics someone subscribes to, so a member can keep
partitions of a topic nobody subscribes to any more; here step 1 drops them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from broker_py.coordinator.group.modern.member import Assignment, make_assignment

TopicPartition = tuple[uuid.UUID, int]

NAME = "simple"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def desired_counts(num_members: int, num_partitions: int) -> tuple[int, list[int]]:
    """``(sharing, owed)``: how many members each partition goes to and how many partitions
    each member (by position) is owed."""
    if num_members == 0:
        return 0, []
    sharing = _ceil_div(num_members, num_partitions) if num_partitions else 0
    places = sharing * num_partitions
    owed = [
        _ceil_div(places * (i + 1), num_members) - _ceil_div(places * i, num_members)
        for i in range(num_members)
    ]
    return sharing, owed


def _balance(
    members: Sequence[str],
    targets: Sequence[TopicPartition],
    held: Mapping[str, set[TopicPartition]],
) -> dict[str, set[TopicPartition]]:
    """Steps 2-4 over ``members`` and ``targets``; ``held`` is what each member holds now,
    already limited to ``targets``."""
    sharing, owed_list = desired_counts(len(members), len(targets))
    owed = dict(zip(members, owed_list))
    by_member: dict[str, set[TopicPartition]] = {m: set(held.get(m, ())) for m in members}
    by_partition: dict[TopicPartition, set[str]] = {tp: set() for tp in targets}
    for m in members:
        for tp in by_member[m]:
            by_partition[tp].add(m)
    # 2. Members over their due drop their lowest partitions.
    for m in members:
        extra = len(by_member[m]) - owed[m]
        if extra > 0:
            for tp in sorted(by_member[m])[:extra]:
                by_member[m].discard(tp)
                by_partition[tp].discard(m)
    # 3. Partitions over their sharing are dropped by their first members.
    for tp in targets:
        holders = by_partition[tp]
        extra = len(holders) - sharing
        if extra > 0:
            for m in [m for m in members if m in holders][:extra]:
                holders.discard(m)
                by_member[m].discard(tp)
    # 4. Deal to the unfilled members with one wrapping cursor.
    unfilled = [m for m in members if len(by_member[m]) < owed[m]]
    pos = 0
    placed_since_wrap = False
    for tp in targets:
        if not unfilled:
            break
        holders = by_partition[tp]
        need = sharing - len(holders)
        while need > 0 and unfilled:
            if pos >= len(unfilled):
                if not placed_since_wrap:
                    break
                pos = 0
                placed_since_wrap = False
            m = unfilled[pos]
            if m in holders:
                pos += 1
                continue
            holders.add(m)
            by_member[m].add(tp)
            need -= 1
            placed_since_wrap = True
            if len(by_member[m]) >= owed[m]:
                del unfilled[pos]
            else:
                pos += 1
    return by_member


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target assignment of every member. ``subscriptions``: member id -> subscribed
    topic ids that exist; ``partitions``: topic id -> partition count; ``current``: the
    members' current target assignments."""
    members = sorted(subscriptions)
    # 1. What each member may keep: existing partitions of topics it subscribes to.
    held: dict[str, set[TopicPartition]] = {
        m: {
            (t, p)
            for t, parts in current.get(m, {}).items()
            if t in subscriptions[m]
            for p in parts
            if 0 <= p < partitions.get(t, 0)
        }
        for m in members
    }
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if len({subscriptions[m] for m in members}) == 1:
        topics = sorted(subscriptions[members[0]])
        targets = [(t, p) for t in topics for p in range(partitions.get(t, 0))]
        out.update(_balance(members, targets, held))
    else:
        for t in sorted(set().union(*subscriptions.values())):
            subscribers = [m for m in members if t in subscriptions[m]]
            targets = [(t, p) for p in range(partitions.get(t, 0))]
            mine = {m: {tp for tp in held[m] if tp[0] == t} for m in subscribers}
            for m, tps in _balance(subscribers, targets, mine).items():
                out[m] |= tps
    result: dict[str, Assignment] = {}
    for m in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in out[m]:
            by_topic.setdefault(t, set()).add(p)
        result[m] = make_assignment(by_topic)
    return result
