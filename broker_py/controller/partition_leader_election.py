"""Leader selection (Kafka's ``PartitionLeaderElectionAlgorithms``), pure.

Each returns the new leader, or None when no replica qualifies. Replica lists are in
preference order, so the first qualifying replica wins.

- offline: the first live replica in the ISR; with unclean election enabled and none,
  the first live replica (the election is then unclean and the ISR becomes the leader
  alone);
- reassignment: the first target replica live and in the ISR;
- preferred: the head of the assignment, only if live and in the ISR;
- controlled shutdown: the first replica live, in the ISR and not shutting down.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_enabled: bool
) -> tuple[int | None, bool]:
    """(leader, whether the election was unclean)."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, False
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return replica, True
    return None, False


def reassign_partition_leader(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    return next((r for r in target if r in live and r in isr), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)
