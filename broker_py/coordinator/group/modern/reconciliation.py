"""Reconciliation: moves one member from its current assignment towards its target
(Kafka's CurrentAssignmentBuilder), revoking before assigning.

Given the member, the target epoch and the member's target partitions, the topics the
member subscribes to, the partitions it reports owning (``None`` when the heartbeat did
not say) and who owns each partition now (``partition_epoch``: the epoch of the member
that holds it, assigned or pending revocation, or ``-1`` when free):

- STABLE at the target epoch: nothing to do, except dropping topics the member no longer
  subscribes to (they become pending revocation).
- UNREVOKED_PARTITIONS: stays until the member no longer reports any partition pending
  revocation; then it moves on as below.
- otherwise (STABLE behind the target, UNRELEASED_PARTITIONS, or revoked): compute
      assigned'   = assigned ∩ target            (target empty for unsubscribed topics)
      revoking    = assigned − assigned'
      pending     = target − assigned' − partitions another member still holds
  and then, in this order:
  1. revoking non-empty and still owned by the member: UNREVOKED_PARTITIONS, epoch kept;
  2. pending non-empty: pending joins the assignment, epoch = target epoch, state
     UNRELEASED_PARTITIONS if some target partition is still held elsewhere, else STABLE;
  3. some target partition held elsewhere: UNRELEASED_PARTITIONS at the target epoch;
  4. STABLE at the target epoch.
A partition is never handed to a member while another member holds it, so no partition
is ever owned twice.
- UNKNOWN: fenced (FENCED_MEMBER_EPOCH) unless the member reports owning nothing, in which
  case it restarts from its assignment at the target epoch.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from broker_py.coordinator.group.modern.member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from logstore.protocol.errors import FencedMemberEpochError

PartitionEpoch = Callable[[uuid.UUID, int], int]


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still reports a partition of ``partitions`` (``None``: unknown,
    so assumed yes)."""
    if owned is None:
        return True
    return any(parts & partitions.get(t, frozenset()) for t, parts in owned.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owned: Assignment | None,
    partition_epoch: PartitionEpoch,
) -> ConsumerGroupMember:
    """The member's next state (``member`` itself when nothing changes)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(
                member,
                member.member_epoch,
                target_epoch,
                target,
                subscribed_topic_ids,
                owned,
                partition_epoch,
            )
        return _drop_unsubscribed(member, subscribed_topic_ids, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return _drop_unsubscribed(member, subscribed_topic_ids, owned)
        return _next(
            member,
            member.member_epoch,
            target_epoch,
            target,
            subscribed_topic_ids,
            owned,
            partition_epoch,
        )
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(
            member,
            member.member_epoch,
            target_epoch,
            target,
            subscribed_topic_ids,
            owned,
            partition_epoch,
        )
    if owned is None or any(owned.values()):
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next(
        member, target_epoch, target_epoch, target, subscribed_topic_ids, owned, partition_epoch
    )


def _drop_unsubscribed(
    member: ConsumerGroupMember,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owned: Assignment | None,
) -> ConsumerGroupMember:
    """Moves the assigned partitions of topics no longer subscribed to pending revocation."""
    dropped = {t: p for t, p in member.assigned_partitions.items() if t not in subscribed_topic_ids}
    if not dropped:
        return member
    assigned = {t: p for t, p in member.assigned_partitions.items() if t in subscribed_topic_ids}
    pending = dict(member.partitions_pending_revocation)
    for t, parts in dropped.items():
        pending[t] = pending.get(t, frozenset()) | parts
    if _owns_any(owned, pending):
        return dataclasses.replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=assigned,
            partitions_pending_revocation=pending,
        )
    return dataclasses.replace(member, assigned_partitions=assigned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owned: Assignment | None,
    partition_epoch: PartitionEpoch,
) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        want = (
            target.get(topic_id, frozenset()) if topic_id in subscribed_topic_ids else frozenset()
        )
        have = member.assigned_partitions.get(topic_id, frozenset())
        keep = have & want
        drop = have - keep
        mine_revoking = member.partitions_pending_revocation.get(topic_id, frozenset())
        free = set()
        for p in want - keep:
            if partition_epoch(topic_id, p) != -1 and p not in mine_revoking:
                unreleased = True
            else:
                free.add(p)
        if keep:
            assigned[topic_id] = keep
        if drop:
            revoking[topic_id] = drop
        if free:
            pending[topic_id] = frozenset(free)

    if revoking and _owns_any(owned, revoking):
        return _with(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    if pending:
        for topic_id, parts in pending.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _with(member, state, target_epoch, assigned, {})
    if unreleased:
        return _with(member, MemberState.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return _with(member, MemberState.STABLE, target_epoch, assigned, {})


def _with(
    member: ConsumerGroupMember,
    state: MemberState,
    epoch: int,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerGroupMember:
    new = dataclasses.replace(
        member,
        state=state,
        member_epoch=epoch,
        previous_member_epoch=(
            member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
        ),
        assigned_partitions=assigned,
        partitions_pending_revocation=revoking,
    )
    return member if new == member else new
