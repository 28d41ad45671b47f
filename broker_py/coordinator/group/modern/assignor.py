"""What a server-side assignor is given and returns, and the built-in assignors by name.

An assignor maps a :class:`GroupSpec` (each member's subscribed topic ids and current
target assignment, and the partition count of every subscribed topic) to a new target
assignment: member id -> topic id -> partitions. It must assign every partition of a
topic some member subscribes to, each to exactly one member subscribed to the topic.
Assignors are pure functions; ties are broken by member id, then topic id, so the same
spec gives the same assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker_py.coordinator.group.modern.member import Assignment


@dataclass(frozen=True)
class MemberSpec:
    subscribed_topic_ids: frozenset[uuid.UUID]
    # The member's current target assignment (what the previous run gave it).
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]
    # Partition count of every topic a member subscribes to.
    partitions: Mapping[uuid.UUID, int]

    def is_homogeneous(self) -> bool:
        subscriptions = {m.subscribed_topic_ids for m in self.members.values()}
        return len(subscriptions) <= 1


GroupAssignment = dict[str, dict[uuid.UUID, frozenset[int]]]


class PartitionAssignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(self, spec: GroupSpec) -> GroupAssignment: ...


class PartitionAssignorError(Exception):
    """An assignor could not produce a complete assignment (a bug, not bad input)."""


def freeze(assignment: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> GroupAssignment:
    return {
        member: {t: frozenset(p) for t, p in topics.items() if p}
        for member, topics in assignment.items()
    }


def assignors() -> dict[str, PartitionAssignor]:
    """The built-in assignors by name."""
    from broker_py.coordinator.group.modern.range_assignor import RangeAssignor
    from broker_py.coordinator.group.modern.uniform_assignor import UniformAssignor

    builtins: list[PartitionAssignor] = [UniformAssignor(), RangeAssignor()]
    return {a.name: a for a in builtins}
