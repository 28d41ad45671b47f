"""One classic consumer group: its members, generation, state and committed offsets.

This is Kafka's ``GroupMetadata`` (its members are
:class:`~broker_py.coordinator.group.member_metadata.MemberMetadata`): plain state plus
the checks and transitions that only look at that state. The protocol logic (who rebalances when,
timers, persistence) is :class:`broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

States and the transitions allowed into each (Kafka's ``validPreviousStates``)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- every state

Invariants:

- ``leader_id`` is ``None`` exactly when ``members`` is empty.
- ``supported_protocols[name]`` counts the members that list protocol ``name``.
- A member is *awaiting join* while it has a JoinGroup response pending
  (``join_future``), *awaiting sync* while it has a SyncGroup response pending.
- ``pending_members`` hold member ids handed out with MEMBER_ID_REQUIRED that have
  not joined yet; they hold up the rebalance like members that did not rejoin.
- ``protocol_name`` is set in CompletingRebalance and Stable, ``None`` when Empty.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import Counter
from collections.abc import Iterable

from broker_py.coordinator.group.consumer_protocol import (
    InvalidSubscriptionError,
    subscribed_topics,
)
from broker_py.coordinator.group.member_metadata import (
    JoinGroupResult,
    MemberMetadata,
    Protocols,
    SyncGroupResult,
)
from broker_py.utils.time import Timer
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaException

# The protocol type of groups whose members run the consumer protocol.
CONSUMER_PROTOCOL_TYPE = "consumer"

__all__ = [
    "Group",
    "GroupState",
    "IllegalGroupStateError",
    "JoinGroupResult",
    "MemberMetadata",
    "OffsetAndMetadata",
    "SyncGroupResult",
]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# The short names the coordinator's modules use.
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

_VALID_PREVIOUS_STATES = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


class IllegalGroupStateError(KafkaException):
    """A state transition that Kafka's group state machine does not allow."""


@dataclasses.dataclass(slots=True)
class OffsetAndMetadata:
    """A committed offset. ``leader_epoch`` -1: unknown; ``expire_timestamp`` -1: none."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


class DelayedJoin:
    """The rebalance's pending completion (Kafka's DelayedJoin / InitialDelayedJoin).

    An initial one (first rebalance of an Empty group) never completes early; when it
    expires with new members having joined meanwhile and rebalance time left, it is
    replaced by another initial one. A plain one completes as soon as every member
    has rejoined, or when the rebalance timeout expires.
    """

    __slots__ = ("delay_ms", "initial", "remaining_ms", "timer")

    def __init__(self, initial: bool, delay_ms: int, remaining_ms: int = 0) -> None:
        self.initial = initial
        self.delay_ms = delay_ms
        self.remaining_ms = remaining_ms
        self.timer: Timer | None = None

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class Group:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.current_state_timestamp: int | None = now_ms
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # producer id -> offsets written in its ongoing transaction (applied on COMMIT)
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # timers (of the coordinator's Time), owned by the coordinator
        self.delayed_join: DelayedJoin | None = None
        self.sync_timer: Timer | None = None
        self.pending_member_timers: dict[str, Timer] = {}

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, state={self.state}, generation={self.generation_id}, "
            f"members={len(self.members)}, protocol={self.protocol_name!r})"
        )

    # ---- state ----

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int | None = None) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise IllegalGroupStateError(
                f"group {self.group_id} should be in one of "
                f"{sorted(str(s) for s in _VALID_PREVIOUS_STATES[state])} "
                f"before moving to {state}, "
                f"not {self.state}"
            )
        self.state = state
        if now_ms is not None:
            self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # ---- members ----

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(
        self, member: MemberMetadata, join_future: asyncio.Future[JoinGroupResult] | None = None
    ) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.join_future = join_future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            self.supported_protocols += Counter()  # drop zero counts
            if (
                member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id
            ):
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names)
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None and member.join_future not in (None, join_future):
            # A JoinGroup this member sent before, on a connection it has given up on.
            member.complete_join(JoinGroupResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.join_future = join_future

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Moves a static member to a new member id, fencing what the old id awaits."""
        member = self.members.pop(old_member_id)
        member.complete_join(JoinGroupResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        member.complete_sync(SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps the leader if it rejoined, else picks a member that did; False if none."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # ---- protocols ----

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote);
        ties go to the leader's preference."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateError(
                f"group {self.group_id} has no protocol every member supports"
            )
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        order = leader.protocol_names if leader is not None else []
        rank = {name: i for i, name in enumerate(order)}
        return max(votes, key=lambda name: (votes[name], -rank.get(name, len(order))))

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members of a ``consumer`` group subscribe to, or None when
        that is not known (another protocol type, or metadata that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(subscribed_topics(m.metadata(self.protocol_name)))
        except (InvalidSubscriptionError, KeyError):
            return None
        return topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            raise IllegalGroupStateError(
                f"group {self.group_id} has no selected protocol in state {self.state}"
            )
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.current_state_timestamp = now_ms
        self.pending_sync_members.clear()

    # ---- offsets ----

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets due for expiry, as Kafka's ``GroupMetadata.removeExpiredOffsets``
        decides for an Empty group (retention counts from when it became Empty) and for
        a group used only for offset storage (from each commit)."""

        def expired(base: int, o: OffsetAndMetadata) -> bool:
            if o.expire_timestamp >= 0:
                return now_ms >= o.expire_timestamp
            return base + retention_ms <= now_ms

        if self.protocol_type is None:
            return [tp for tp, o in self.offsets.items() if expired(o.commit_timestamp, o)]
        if self.is_(GroupState.EMPTY):
            return [
                tp
                for tp, o in self.offsets.items()
                if expired(
                    self.current_state_timestamp
                    if self.current_state_timestamp is not None
                    else o.commit_timestamp,
                    o,
                )
            ]
        return []
