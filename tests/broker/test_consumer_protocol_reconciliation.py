"""Reconciliation of one member towards its target (Kafka's CurrentAssignmentBuilder),
with the cases of Kafka's CurrentAssignmentBuilderTest: revoke before assign, never hand
out a partition another member still holds."""

from __future__ import annotations

import uuid

import pytest

from broker_py.coordinator.group.modern.member import ConsumerGroupMember, MemberState
from broker_py.coordinator.group.modern.reconciliation import reconcile
from logstore.protocol.errors import FencedMemberEpochError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
BOTH = frozenset({T1, T2})


def a(t1=(), t2=()):
    out = {}
    if t1:
        out[T1] = frozenset(t1)
    if t2:
        out[T2] = frozenset(t2)
    return out


def member(state, epoch, assigned, pending=None, previous=None):
    return ConsumerGroupMember(
        "m",
        member_epoch=epoch,
        previous_member_epoch=epoch - 1 if previous is None else previous,
        state=state,
        subscribed_topic_names=("t1", "t2"),
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def free(_t, _p):
    return -1


def held_by_others(epoch):
    return lambda _t, _p: epoch


STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def test_stable_to_stable():
    m = member(STABLE, 10, a([1, 2, 3], [4, 5, 6]))
    new = reconcile(m, 11, a([1, 2, 3], [4, 5, 6]), BOTH, None, free)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 10)
    assert new.assigned_partitions == a([1, 2, 3], [4, 5, 6])


def test_stable_to_stable_with_new_partitions():
    m = member(STABLE, 10, a([1, 2, 3], [4, 5, 6]))
    new = reconcile(m, 11, a([1, 2, 3, 4], [4, 5, 6, 7]), BOTH, None, free)
    assert (new.state, new.member_epoch) == (STABLE, 11)
    assert new.assigned_partitions == a([1, 2, 3, 4], [4, 5, 6, 7])


def test_stable_to_unrevoked_partitions():
    m = member(STABLE, 10, a([1, 2, 3], [4, 5, 6]))
    new = reconcile(m, 11, a([2, 3, 4], [5, 6, 7]), BOTH, None, free)
    assert (new.state, new.member_epoch) == (UNREVOKED, 10)
    assert new.assigned_partitions == a([2, 3], [5, 6])
    assert new.partitions_pending_revocation == a([1], [4])


def test_stable_to_unreleased_partitions():
    m = member(STABLE, 10, a([1, 2, 3], [4, 5, 6]))
    new = reconcile(m, 11, a([1, 2, 3, 4], [4, 5, 6, 7]), BOTH, None, held_by_others(10))
    assert (new.state, new.member_epoch) == (UNRELEASED, 11)
    assert new.assigned_partitions == a([1, 2, 3], [4, 5, 6])


def test_revocation_already_done_skips_unrevoked():
    # The member reports it no longer owns the partitions to revoke: straight on.
    m = member(STABLE, 10, a([1, 2, 3], [4, 5, 6]))
    new = reconcile(m, 11, a([2, 3, 4], [5, 6, 7]), BOTH, a([2, 3], [5, 6]), free)
    assert (new.state, new.member_epoch) == (STABLE, 11)
    assert new.assigned_partitions == a([2, 3, 4], [5, 6, 7])


def test_unrevoked_partitions_to_stable():
    m = member(UNREVOKED, 10, a([2, 3], [5, 6]), a([1], [4]))
    new = reconcile(m, 11, a([2, 3], [5, 6]), BOTH, a([2, 3], [5, 6]), free)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 10)
    assert new.partitions_pending_revocation == {}


def test_remains_in_unrevoked_partitions():
    m = member(UNREVOKED, 10, a([2, 3], [5, 6]), a([1], [4]))
    assert reconcile(m, 11, a([2, 3], [5, 6]), BOTH, a([1, 2, 3], [5, 6]), free) is m
    # A heartbeat that does not say what it owns does not complete the revocation.
    assert reconcile(m, 11, a([2, 3], [5, 6]), BOTH, None, free) is m


def test_unrevoked_partitions_to_unrevoked_partitions():
    m = member(UNREVOKED, 10, a([2, 3], [5, 6]), a([1], [4]))
    new = reconcile(m, 12, a([3], [6]), BOTH, a([2, 3], [5, 6]), free)
    assert (new.state, new.member_epoch) == (UNREVOKED, 10)
    assert new.assigned_partitions == a([3], [6])
    assert new.partitions_pending_revocation == a([2], [5])


def test_unrevoked_partitions_to_unreleased_partitions():
    m = member(UNREVOKED, 10, a([2, 3], [5, 6]), a([1], [4]))
    new = reconcile(m, 11, a([2, 3, 4], [5, 6, 7]), BOTH, a([2, 3], [5, 6]), held_by_others(10))
    assert (new.state, new.member_epoch) == (UNRELEASED, 11)
    assert new.assigned_partitions == a([2, 3], [5, 6])


def test_own_revoked_partition_is_not_unreleased():
    # Partition 1 of t1 is being revoked by this very member; the new target gives it
    # back: it is not waiting on anyone else.
    m = member(UNREVOKED, 10, a([2, 3], [5, 6]), a([1], [4]))
    new = reconcile(m, 11, a([1, 2, 3], [5, 6]), BOTH, a([2, 3], [5, 6]), held_by_others(10))
    assert (new.state, new.member_epoch) == (STABLE, 11)
    assert new.assigned_partitions == a([1, 2, 3], [5, 6])


def test_unreleased_partitions_to_stable():
    m = member(UNRELEASED, 11, a([2, 3], [5, 6]))
    new = reconcile(m, 12, a([2, 3], [5, 6]), BOTH, None, free)
    assert (new.state, new.member_epoch) == (STABLE, 12)


def test_unreleased_partitions_to_stable_with_new_partitions():
    m = member(UNRELEASED, 11, a([2, 3], [5, 6]))
    new = reconcile(m, 11, a([2, 3, 4], [5, 6, 7]), BOTH, None, free)
    assert (new.state, new.member_epoch) == (STABLE, 11)
    assert new.assigned_partitions == a([2, 3, 4], [5, 6, 7])


def test_unreleased_partitions_to_unreleased_partitions():
    m = member(UNRELEASED, 11, a([2, 3], [5, 6]))
    assert reconcile(m, 11, a([2, 3, 4], [5, 6, 7]), BOTH, None, held_by_others(10)) is m


def test_unreleased_partitions_to_unrevoked_partitions():
    m = member(UNRELEASED, 11, a([2, 3], [5, 6]))
    new = reconcile(m, 12, a([3], [6]), BOTH, a([2, 3], [5, 6]), free)
    assert (new.state, new.member_epoch) == (UNREVOKED, 11)
    assert new.assigned_partitions == a([3], [6])
    assert new.partitions_pending_revocation == a([2], [5])


def test_unknown_state_fences_unless_the_member_owns_nothing():
    m = member(MemberState.UNKNOWN, 11, a([2, 3], [5, 6]))
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 11, a([2, 3], [5, 6]), BOTH, None, free)
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 11, a([2, 3], [5, 6]), BOTH, a([2]), free)
    new = reconcile(m, 12, a([2, 3], [5, 6]), BOTH, {}, free)
    assert (new.state, new.member_epoch) == (STABLE, 12)


def test_unsubscribed_topic_is_revoked_at_once():
    m = member(STABLE, 10, a([1, 2], [4, 5]))
    new = reconcile(m, 10, a([1, 2], [4, 5]), frozenset({T1}), a([1, 2], [4, 5]), free)
    assert (new.state, new.member_epoch) == (UNREVOKED, 10)
    assert new.assigned_partitions == a([1, 2])
    assert new.partitions_pending_revocation == a((), [4, 5])
    # Once revoked, the member is stable again at the same epoch.
    done = reconcile(new, 10, a([1, 2], [4, 5]), frozenset({T1}), a([1, 2]), free)
    assert (done.state, done.member_epoch) == (STABLE, 10)
    assert done.assigned_partitions == a([1, 2])
