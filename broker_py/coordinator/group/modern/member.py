"""A member of a consumer group on the consumer protocol (KIP-848), as the coordinator keeps it.

A member is an immutable value; every change makes a new one (``dataclasses.replace``), so
the state before and after a heartbeat can be compared and turned into records.

Epochs:
- ``member_epoch``: the group epoch whose target assignment the member has reached (or
  is revoking towards); ``0`` never appears on a live member, ``-2`` marks a static
  member that left temporarily (its partitions stay owned until its session expires).
- ``previous_member_epoch``: the member epoch before it last changed (kept while the
  epoch stays the same), accepted once more from a member whose response carrying the
  new epoch was lost, provided it owns nothing outside its assignment.

Assignments map a topic id to a frozen set of partition indexes; a topic never maps to an
empty set.

A member on the classic protocol (served through JoinGroup, SyncGroup, Heartbeat and
LeaveGroup) carries ``classic_member_metadata``; a member on the consumer protocol has none.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker_py.coordinator.group.modern.records import ClassicMemberMetadata

Assignment = Mapping[uuid.UUID, frozenset[int]]

# The member epochs a heartbeat carries to leave: -1 for good, -2 for a static member
# that will come back with the same instance id within its session timeout.
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (the byte Kafka persists)."""

    # Holds exactly its target assignment at the target epoch.
    STABLE = 0
    # Must stop consuming some partitions before it may move to the next epoch.
    UNREVOKED_PARTITIONS = 1
    # At the target epoch, waiting for partitions other members have not released.
    UNRELEASED_PARTITIONS = 2
    # Written by a newer coordinator; the member is fenced on its next heartbeat.
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


EMPTY_ASSIGNMENT: Assignment = {}


def make_assignment(pairs: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment without empty topics."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in pairs.items():
        parts = frozenset(partitions)
        if parts:
            out[topic_id] = parts
    return out


def assignment_size(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


def partitions_of(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def is_subset(owned: Assignment, of: Assignment) -> bool:
    """Whether every partition of ``owned`` is in ``of``."""
    return all(parts <= of.get(t, frozenset()) for t, parts in owned.items())


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    # Sorted, without duplicates.
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def owned_partitions(self) -> set[tuple[uuid.UUID, int]]:
        """Every partition the member may still be consuming: assigned or being revoked."""
        return partitions_of(self.assigned_partitions) | partitions_of(
            self.partitions_pending_revocation
        )

    def metadata_key(self) -> tuple[object, ...]:
        """The fields the MemberMetadata record carries; a change is persisted."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.server_assignor,
            self.classic_member_metadata,
        )

    def assignment_key(self) -> tuple[object, ...]:
        """The fields the CurrentAssignment record carries; a change is persisted."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            dict(self.assigned_partitions),
            dict(self.partitions_pending_revocation),
        )
