"""The partition balancer's planner: a pure function from the cluster's brokers and racks,
the current replica assignment and the partitions' sizes to the reassignments that even
it out (``logstore cluster partitions balance`` and ``decommission``).

Inputs:

- ``brokers``: broker id -> rack (``broker.rack``; None when unset). A broker without a
  rack is a rack of its own, so with no racks at all every broker is one.
- ``assignment``: (topic, partition) -> replica ids in order; the first is the
  preferred leader.
- ``sizes``: (topic, partition) -> bytes (its log size; 0 when unknown).
- ``exclude``: brokers to empty (decommission). A replica on a broker missing from
  ``brokers`` (not live) is moved off as well.

The plan, in three passes over a working copy of the assignment:

1. Every replica on an excluded or unknown broker goes to an eligible broker not yet in
   the partition, chosen for, in order: the most racks among the partition's replicas,
   the fewest replicas, the fewest bytes, the lowest id.
2. Replica counts: while the most and least loaded eligible brokers differ by two or more,
   one replica moves from the most loaded (ties: most bytes) to the least loaded (ties:
   fewest bytes): the smallest partition held by the first and not the second whose
   rack count does not drop. The new replica takes the old one's place in the order.
   When that pair has no such partition the next pair (by the same order) is tried, and
   when no pair has one, a chain: one partition from the first broker to a third, and
   another from the third to the second (the rack limit blocks the direct move, e.g. a
   partition whose other replica is in the second broker's rack). Each step lowers the
   sum of squared counts, so the pass ends. Without rack limits the most loaded broker
   always holds a partition the least loaded lacks, the result is within one replica per
   broker, and the number of replicas moved is the least any plan needs: the larger of
   the replicas above the ceiling of the mean and those missing below its floor. With
   racks of equal size the result is within one as well (hypothesis finds no case
   against it); with unequal racks it may not be possible.
3. Preferred leaders: while the brokers' counts of partitions they lead first differ by
   two or more, a partition led by the most loaded gets a replica on the least loaded
   put first (the next pair when none), which moves no bytes.

Invariants (tested with hypothesis): every partition keeps its replication factor and
distinct brokers; no replica stays on an excluded or unknown broker; a partition's rack
count never drops below the smaller of what it was and what the eligible brokers allow
(``min(replication factor, eligible racks)``); with no racks, or racks of equal size,
the replica counts end within one of each other. Bytes per broker are evened only as
the tie-breaks above do: moving more to even bytes would cost more moves.

:class:`PlanError` when a partition's replication factor exceeds the eligible brokers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence

Partition = tuple[str, int]
"""(topic, partition index)."""


class PlanError(ValueError):
    """No plan keeps the replication factor (too few eligible brokers)."""


@dataclasses.dataclass(frozen=True)
class Move:
    """One partition's reassignment: ``before`` -> ``after`` (replica ids, preferred
    leader first)."""

    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size: int

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.after if b not in self.before)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.before if b not in self.after)

    @property
    def cost(self) -> int:
        """Bytes copied: the partition's size once per new replica."""
        return self.size * len(self.adding)


@dataclasses.dataclass(frozen=True)
class Plan:
    moves: tuple[Move, ...]
    """Smallest cost first (then topic, partition); leader-only reorders cost 0."""
    replicas_before: dict[int, int]
    replicas_after: dict[int, int]
    leaders_before: dict[int, int]
    leaders_after: dict[int, int]
    bytes_before: dict[int, int]
    bytes_after: dict[int, int]

    @property
    def cost(self) -> int:
        """Bytes the plan copies between brokers."""
        return sum(m.cost for m in self.moves)

    @property
    def replica_moves(self) -> int:
        """Replicas the plan places on a new broker."""
        return sum(len(m.adding) for m in self.moves)


def rack_of(brokers: Mapping[int, str | None], broker: int) -> str:
    """A broker's rack; one of its own when it has none or is unknown."""
    rack = brokers.get(broker)
    return rack if rack else f"\0broker-{broker}"


def rack_count(brokers: Mapping[int, str | None], replicas: Sequence[int]) -> int:
    return len({rack_of(brokers, b) for b in replicas})


def plan(
    brokers: Mapping[int, str | None],
    assignment: Mapping[Partition, Sequence[int]],
    sizes: Mapping[Partition, int],
    exclude: Collection[int] = (),
) -> Plan:
    """The moves that balance ``assignment`` over the brokers not in ``exclude``."""
    eligible = sorted(b for b in brokers if b not in exclude)
    work: dict[Partition, list[int]] = {p: list(r) for p, r in assignment.items()}
    size = {p: max(0, sizes.get(p, 0)) for p in work}
    counts = dict.fromkeys(eligible, 0)
    load = dict.fromkeys(eligible, 0)
    for p, replicas in work.items():
        if len(set(replicas)) != len(replicas):
            raise PlanError(f"{p[0]}-{p[1]} lists a broker twice: {replicas}")
        for b in replicas:
            if b in counts:
                counts[b] += 1
                load[b] += size[p]
    _evacuate(brokers, eligible, work, size, counts, load)
    _even_replicas(brokers, eligible, work, size, counts, load)
    _even_leaders(eligible, work)
    moves = [
        Move(p[0], p[1], tuple(assignment[p]), tuple(work[p]), size[p])
        for p in sorted(work)
        if tuple(work[p]) != tuple(assignment[p])
    ]
    moves.sort(key=lambda m: (m.cost, m.topic, m.partition))
    every = sorted({*brokers, *(b for r in assignment.values() for b in r)})
    return Plan(
        moves=tuple(moves),
        replicas_before=_tally(every, assignment, lambda p: 1, leaders=False),
        replicas_after=_tally(every, work, lambda p: 1, leaders=False),
        leaders_before=_tally(every, assignment, lambda p: 1, leaders=True),
        leaders_after=_tally(every, work, lambda p: 1, leaders=True),
        bytes_before=_tally(every, assignment, lambda p: size[p], leaders=False),
        bytes_after=_tally(every, work, lambda p: size[p], leaders=False),
    )


def _tally(
    every: list[int],
    assignment: Mapping[Partition, Sequence[int]],
    weight: Callable[[Partition], int],
    leaders: bool,
) -> dict[int, int]:
    out = dict.fromkeys(every, 0)
    for p, replicas in assignment.items():
        for b in replicas[:1] if leaders else replicas:
            out[b] += weight(p)
    return out


def _evacuate(
    brokers: Mapping[int, str | None],
    eligible: list[int],
    work: dict[Partition, list[int]],
    size: dict[Partition, int],
    counts: dict[int, int],
    load: dict[int, int],
) -> None:
    allowed = set(eligible)
    for p in sorted(work):
        replicas = work[p]
        if all(b in allowed for b in replicas):
            continue
        if len(replicas) > len(eligible):
            raise PlanError(
                f"{p[0]}-{p[1]} has {len(replicas)} replicas and only {len(eligible)} "
                f"brokers can hold them ({', '.join(map(str, eligible)) or 'none'})"
            )
        for i, b in enumerate(replicas):
            if b in allowed:
                continue
            kept = [r for r in replicas if r in allowed]
            racks = {rack_of(brokers, r) for r in kept}
            target = min(
                (c for c in eligible if c not in replicas),
                key=lambda c: (
                    rack_of(brokers, c) in racks,
                    counts[c],
                    load[c],
                    c,
                ),
            )
            replicas[i] = target
            counts[target] += 1
            load[target] += size[p]


def _even_replicas(
    brokers: Mapping[int, str | None],
    eligible: list[int],
    work: dict[Partition, list[int]],
    size: dict[Partition, int],
    counts: dict[int, int],
    load: dict[int, int],
) -> None:
    held: dict[int, set[Partition]] = {b: set() for b in eligible}
    for p, replicas in work.items():
        for b in replicas:
            if b in held:
                held[b].add(p)
    by_size = sorted(work, key=lambda p: (size[p], p))

    def shift(p: Partition, src: int, dst: int) -> None:
        replicas = work[p]
        replicas[replicas.index(src)] = dst
        held[src].discard(p)
        held[dst].add(p)
        counts[src] -= 1
        counts[dst] += 1
        load[src] -= size[p]
        load[dst] += size[p]

    def pairs() -> list[tuple[int, int]]:
        sources = sorted(eligible, key=lambda b: (-counts[b], -load[b], b))
        targets = sorted(eligible, key=lambda b: (counts[b], load[b], b))
        return [(s, d) for s in sources for d in targets if counts[s] - counts[d] >= 2]

    def direct() -> bool:
        for src, dst in pairs():
            chosen = _movable(brokers, work, held, by_size, src, dst)
            if chosen is not None:
                shift(chosen, src, dst)
                return True
        return False

    def chained() -> bool:
        """src -> mid and another partition mid -> dst: mid keeps its count (a rack
        limit blocks src -> dst directly)."""
        for src, dst in pairs():
            for mid in eligible:
                if mid in (src, dst):
                    continue
                first = _movable(brokers, work, held, by_size, src, mid)
                if first is None:
                    continue
                shift(first, src, mid)
                second = _movable(brokers, work, held, by_size, mid, dst, avoid=first)
                if second is not None:
                    shift(second, mid, dst)
                    return True
                shift(first, mid, src)
        return False

    while direct() or chained():
        pass


def _movable(
    brokers: Mapping[int, str | None],
    work: dict[Partition, list[int]],
    held: dict[int, set[Partition]],
    by_size: list[Partition],
    src: int,
    dst: int,
    avoid: Partition | None = None,
) -> Partition | None:
    """The smallest partition on ``src`` and not ``dst`` (nor ``avoid``) whose rack count
    a move from ``src`` to ``dst`` keeps."""
    candidates = held[src] - held[dst] - {avoid}
    if not candidates:
        return None
    for p in by_size:
        if p not in candidates:
            continue
        replicas = work[p]
        after = [dst if b == src else b for b in replicas]
        if rack_count(brokers, after) >= rack_count(brokers, replicas):
            return p
    return None


def _even_leaders(eligible: list[int], work: dict[Partition, list[int]]) -> None:
    leading: dict[int, list[Partition]] = {b: [] for b in eligible}
    for p in sorted(work):
        if work[p] and work[p][0] in leading:
            leading[work[p][0]].append(p)
    while True:
        sources = sorted(eligible, key=lambda b: (-len(leading[b]), b))
        targets = sorted(eligible, key=lambda b: (len(leading[b]), b))
        moved = False
        for src in sources:
            for dst in targets:
                if len(leading[src]) - len(leading[dst]) < 2:
                    break
                chosen = next((q for q in leading[src] if dst in work[q]), None)
                if chosen is None:
                    continue
                replicas = work[chosen]
                replicas.remove(dst)
                replicas.insert(0, dst)
                leading[src].remove(chosen)
                leading[dst].append(chosen)
                moved = True
                break
            if moved:
                break
        if not moved:
            return
