"""The consumer protocol's server-side assignors (``uniform`` and ``range``): cases from
Kafka's RangeAssignorTest and Uniform*AssignmentBuilderTest, and properties over any
group (every subscribed partition assigned once, to a subscriber; balance; a second run
over its own result changes nothing)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.coordinator.group.modern.assignor import GroupSpec, MemberSpec, assignors
from broker_py.coordinator.group.modern.range_assignor import RangeAssignor
from broker_py.coordinator.group.modern.uniform_assignor import UniformAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def spec(partitions, **members):
    return GroupSpec(
        members={
            name: MemberSpec(frozenset(topics), {t: frozenset(p) for t, p in current.items()})
            for name, (topics, current) in members.items()
        },
        partitions=partitions,
    )


def asg(**topics):
    return {t: frozenset(p) for t, p in topics.items()}


def test_builtin_assignors_by_name():
    assert set(assignors()) == {"uniform", "range"}


# --- range ---------------------------------------------------------------------------


def test_range_first_assignment_same_subscriptions():
    s = spec({T1: 3, T3: 2}, A=({T1, T3}, {}), B=({T1, T3}, {}))
    assert RangeAssignor().assign(s) == {
        "A": {T1: frozenset({0, 1}), T3: frozenset({0})},
        "B": {T1: frozenset({2}), T3: frozenset({1})},
    }


def test_range_first_assignment_different_subscriptions():
    s = spec({T1: 3, T2: 3, T3: 2}, A=({T1, T2}, {}), B=({T3}, {}), C=({T2, T3}, {}))
    assert RangeAssignor().assign(s) == {
        "A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1})},
        "B": {T3: frozenset({0})},
        "C": {T2: frozenset({2}), T3: frozenset({1})},
    }


def test_range_more_members_than_partitions_keeps_owners():
    s = spec(
        {T1: 2, T2: 2},
        A=({T1, T2}, {T1: {0}, T2: {0}}),
        B=({T1, T2}, {T1: {1}, T2: {1}}),
        C=({T1, T2}, {}),
    )
    assert RangeAssignor().assign(s) == {
        "A": {T1: frozenset({0}), T2: frozenset({0})},
        "B": {T1: frozenset({1}), T2: frozenset({1})},
        "C": {},
    }


def test_range_member_added_moves_one_range_per_topic():
    s = spec(
        {T1: 3, T2: 3},
        A=({T1, T2}, {T1: {0, 1}, T2: {0, 1}}),
        B=({T1, T2}, {T1: {2}, T2: {2}}),
        C=({T1, T2}, {}),
    )
    assert RangeAssignor().assign(s) == {
        "A": {T1: frozenset({0}), T2: frozenset({0})},
        "B": {T1: frozenset({2}), T2: frozenset({2})},
        "C": {T1: frozenset({1}), T2: frozenset({1})},
    }


def test_range_member_removed_gives_its_partitions_to_the_rest():
    s = spec({T1: 3, T2: 3}, A=({T1, T2}, {T1: {0, 1}, T2: {0, 1}}))
    assert RangeAssignor().assign(s) == {"A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}}


def test_range_co_partitioned_topics_get_the_same_numbers():
    s = spec({T1: 6, T2: 6}, A=({T1, T2}, {}), B=({T1, T2}, {}), C=({T1, T2}, {}))
    result = RangeAssignor().assign(s)
    for member in result.values():
        assert member[T1] == member[T2]


# --- uniform -------------------------------------------------------------------------


def test_uniform_one_member_gets_everything():
    s = spec({T1: 3, T3: 2}, A=({T1, T3}, {}))
    assert UniformAssignor().assign(s) == {"A": {T1: frozenset({0, 1, 2}), T3: frozenset({0, 1})}}


def test_uniform_member_removed_sticky():
    # Kafka: A keeps t1[0,1] t2[0], B keeps t1[2] t2[1] and takes C's t2[2].
    s = spec(
        {T1: 3, T2: 3},
        A=({T1, T2}, {T1: {0, 1}, T2: {0}}),
        B=({T1, T2}, {T1: {2}, T2: {1}}),
    )
    assert UniformAssignor().assign(s) == {
        "A": {T1: frozenset({0, 1}), T2: frozenset({0})},
        "B": {T1: frozenset({2}), T2: frozenset({1, 2})},
    }


def test_uniform_member_added_takes_only_the_surplus():
    s = spec(
        {T1: 3, T2: 3},
        A=({T1, T2}, {T1: {0, 1, 2}}),
        B=({T1, T2}, {T2: {0, 1, 2}}),
        C=({T1, T2}, {}),
    )
    result = UniformAssignor().assign(s)
    assert [sum(len(p) for p in result[m].values()) for m in "ABC"] == [2, 2, 2]
    assert result["A"][T1] <= frozenset({0, 1, 2}) and T2 not in result["A"]
    assert result["B"][T2] <= frozenset({0, 1, 2}) and T1 not in result["B"]


def test_uniform_unsubscribed_topic_is_dropped():
    s = spec({T1: 2, T2: 2}, A=({T1}, {T1: {0}, T2: {0, 1}}), B=({T1, T2}, {T1: {1}}))
    result = UniformAssignor().assign(s)
    assert T2 not in result["A"]
    assert result["B"][T2] == frozenset({0, 1})


def test_uniform_heterogeneous_balances_what_it_can():
    # A alone subscribes to T1 (6 partitions); A and B share T2 (2 partitions): B gets T2.
    s = spec({T1: 6, T2: 2}, A=({T1, T2}, {}), B=({T2}, {}))
    result = UniformAssignor().assign(s)
    assert result["A"] == {T1: frozenset(range(6))}
    assert result["B"] == {T2: frozenset({0, 1})}


# --- properties ----------------------------------------------------------------------

TOPICS = [uuid.UUID(int=i) for i in range(1, 5)]


@st.composite
def group_specs(draw, homogeneous: bool):
    partitions = {t: draw(st.integers(0, 7)) for t in TOPICS[: draw(st.integers(1, 4))]}
    topics = sorted(partitions)
    n = draw(st.integers(1, 6))
    common = frozenset(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
    members = {}
    taken: set[tuple[uuid.UUID, int]] = set()
    for i in range(n):
        subs = (
            common
            if homogeneous
            else frozenset(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
        )
        current: dict[uuid.UUID, set[int]] = {}
        # Current assignments may name topics no longer subscribed and partitions that
        # no longer exist.
        for t in draw(st.lists(st.sampled_from(topics), unique=True)):
            for p in draw(st.lists(st.integers(0, 8), max_size=4, unique=True)):
                if (t, p) not in taken:
                    taken.add((t, p))
                    current.setdefault(t, set()).add(p)
        members[f"m{i}"] = MemberSpec(subs, {t: frozenset(p) for t, p in current.items()})
    return GroupSpec(members=members, partitions=partitions)


def check_valid(s: GroupSpec, result):
    assert set(result) == set(s.members)
    seen = set()
    for member, topics in result.items():
        for t, parts in topics.items():
            assert parts, "no empty topic in an assignment"
            assert t in s.members[member].subscribed_topic_ids
            for p in parts:
                assert 0 <= p < s.partitions[t]
                assert (t, p) not in seen
                seen.add((t, p))
    subscribed = {t for m in s.members.values() for t in m.subscribed_topic_ids}
    assert seen == {(t, p) for t in subscribed for p in range(s.partitions[t])}


def sizes(result):
    return {m: sum(len(p) for p in topics.values()) for m, topics in result.items()}


def rerun(assignor, s, result):
    again = GroupSpec(
        members={
            m: MemberSpec(spec_.subscribed_topic_ids, result[m]) for m, spec_ in s.members.items()
        },
        partitions=s.partitions,
    )
    return assignor.assign(again)


@settings(max_examples=150, deadline=None)
@given(group_specs(homogeneous=True))
def test_uniform_homogeneous_properties(s):
    result = UniformAssignor().assign(s)
    check_valid(s, result)
    n = sizes(result).values()
    assert max(n) - min(n) <= 1
    # Balance first, then stickiness: a member keeps min(valid current, quota).
    total = sum(n)
    for m, member in s.members.items():
        valid = {
            (t, p)
            for t, parts in member.assignment.items()
            if t in member.subscribed_topic_ids and t in s.partitions
            for p in parts
            if p < s.partitions[t]
        }
        kept = {(t, p) for t, parts in result[m].items() for p in parts} & valid
        assert len(kept) >= min(len(valid), total // len(s.members))
    assert rerun(UniformAssignor(), s, result) == result


@settings(max_examples=150, deadline=None)
@given(group_specs(homogeneous=False))
def test_uniform_heterogeneous_properties(s):
    result = UniformAssignor().assign(s)
    check_valid(s, result)
    n = sizes(result)
    owner = {
        (t, p): m for m, topics in result.items() for t, parts in topics.items() for p in parts
    }
    # No partition could move to a subscriber holding two or more fewer.
    for m, member in s.members.items():
        for t in member.subscribed_topic_ids:
            for p in range(s.partitions[t]):
                assert n[owner[(t, p)]] <= n[m] + 1
    assert rerun(UniformAssignor(), s, result) == result


@settings(max_examples=150, deadline=None)
@given(st.booleans().flatmap(lambda h: group_specs(homogeneous=h)))
def test_range_properties(s):
    result = RangeAssignor().assign(s)
    check_valid(s, result)
    # Per topic, the subscribers' shares differ by at most one.
    for t in s.partitions:
        subs = [m for m, member in s.members.items() if t in member.subscribed_topic_ids]
        if subs:
            shares = [len(result[m].get(t, ())) for m in subs]
            assert max(shares) - min(shares) <= 1
    assert rerun(RangeAssignor(), s, result) == result
