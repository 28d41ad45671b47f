"""The share groups' SimpleAssignor (Kafka 4.1/4.2's rules): the counts it owes, worked
examples (librdkafka's 0172 case: two members over four partitions get two each), and
hypothesis properties over random members, subscriptions and current assignments:

- every partition of a subscribed topic goes to at least one member subscribing to it, and
  no member gets a partition of a topic it does not subscribe to;
- per topic, with at least as many partitions as its subscribers, every partition goes to
  exactly one member and the members' counts are within one of each other;
- per topic, with more subscribers than partitions and no current assignment, every
  partition goes to ``ceil(members / partitions)`` members and every member gets one or two
  partitions (the counts ``desired_counts`` gives);
- stickiness: an assignment it computed is kept as it is while the members, subscriptions
  and partitions stay the same.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share.group import ShareGroupState
from broker_py.coordinator.group.modern.share.manager import (
    ShareGroupManager,
    ShareHeartbeatRequest,
)
from broker_py.coordinator.group.modern.share.simple_assignor import assign, desired_counts
from broker_py.utils.time import MockTime

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def _parts(out: Mapping[str, Assignment], m: str, t: uuid.UUID) -> set[int]:
    return set(out[m].get(t, ()))


def test_desired_counts() -> None:
    assert desired_counts(2, 4) == (1, [2, 2])
    assert desired_counts(3, 7) == (1, [3, 2, 2])
    assert desired_counts(4, 6) == (1, [2, 1, 2, 1])
    assert desired_counts(3, 2) == (2, [2, 1, 1])
    assert desired_counts(4, 1) == (4, [1, 1, 1, 1])
    assert desired_counts(2, 0) == (0, [0, 0])
    assert desired_counts(0, 5) == (0, [])


def test_two_members_over_four_partitions_get_two_each() -> None:
    alone = assign({"m1": frozenset({A})}, {A: 4}, {})
    assert alone == {"m1": {A: frozenset(range(4))}}
    both = assign({"m1": frozenset({A}), "m2": frozenset({A})}, {A: 4}, alone)
    # m1 keeps two of its four; m2 gets the two m1 gave up.
    assert both == {"m1": {A: frozenset({2, 3})}, "m2": {A: frozenset({0, 1})}}
    fresh = assign({"m1": frozenset({A}), "m2": frozenset({A})}, {A: 4}, {})
    assert fresh == {"m1": {A: frozenset({0, 2})}, "m2": {A: frozenset({1, 3})}}


def test_more_members_than_partitions_share_them() -> None:
    subs = {m: frozenset({A}) for m in ("a", "b", "c")}
    out = assign(subs, {A: 2}, {})
    assert out == {"a": {A: frozenset({0, 1})}, "b": {A: frozenset({0})}, "c": {A: frozenset({1})}}
    # One partition: every member gets it.
    assert assign(subs, {A: 1}, {}) == {m: {A: frozenset({0})} for m in subs}


def test_a_member_leaving_more_members_than_partitions_leaves_the_dealing_short() -> None:
    # Four members over two partitions share each partition by two. When b leaves, a is
    # owed two partitions but already has partition 0, the only one lacking a member: the
    # dealing stops there, as Kafka's does, and partition 0 keeps one member.
    four = {m: frozenset({A}) for m in ("a", "b", "c", "d")}
    before = assign(four, {A: 2}, {})
    assert before == {
        "a": {A: frozenset({0})},
        "b": {A: frozenset({0})},
        "c": {A: frozenset({1})},
        "d": {A: frozenset({1})},
    }
    three = {m: four[m] for m in ("a", "c", "d")}
    current = {m: before[m] for m in three}
    after = assign(three, {A: 2}, current)
    assert after == current
    assert assign(three, {A: 2}, after) == after


def test_heterogeneous_balances_each_topic_over_its_subscribers() -> None:
    subs = {"m1": frozenset({A}), "m2": frozenset({B}), "m3": frozenset({A, B})}
    out = assign(subs, {A: 4, B: 2}, {})
    assert _parts(out, "m1", A) | _parts(out, "m3", A) == set(range(4))
    assert len(_parts(out, "m1", A)) == len(_parts(out, "m3", A)) == 2
    assert _parts(out, "m2", B) | _parts(out, "m3", B) == set(range(2))
    assert len(_parts(out, "m2", B)) == len(_parts(out, "m3", B)) == 1
    assert B not in out["m1"] and A not in out["m2"]


def test_partitions_of_an_unsubscribed_topic_are_dealt_again() -> None:
    both = assign({"m0": frozenset({B}), "m1": frozenset({B})}, {B: 6}, {})
    assert set(both["m0"][B]) | set(both["m1"][B]) == set(range(6))
    moved = assign({"m0": frozenset({A}), "m1": frozenset({B})}, {A: 1, B: 6}, both)
    assert moved == {"m0": {A: frozenset({0})}, "m1": {B: frozenset(range(6))}}
    # A topic nobody subscribes to any more is dropped too.
    gone = assign({"m0": frozenset({A}), "m1": frozenset({A, C})}, {A: 2, C: 1}, moved)
    assert all(B not in a for a in gone.values())


def test_empty_subscriptions_and_no_members() -> None:
    assert assign({}, {}, {}) == {}
    assert assign({"m": frozenset()}, {A: 3}, {"m": {A: frozenset({0})}}) == {"m": {}}
    out = assign({"m": frozenset(), "n": frozenset({A})}, {A: 2}, {"m": {A: frozenset({1})}})
    assert out == {"m": {}, "n": {A: frozenset({0, 1})}}


def test_the_manager_spreads_four_partitions_over_two_members() -> None:
    """librdkafka 0172's mixed-mode case through ShareGroupHeartbeat: the first member
    joins alone and gets all four partitions; once the second joins and both heartbeat,
    each holds two."""
    topic = TopicMetadata(uuid.UUID(int=7), "four", 4)
    m = ShareGroupManager(MockTime(), 200)
    m.update_topics([topic])

    def beat(member: str, epoch: int, topics: tuple[str, ...] | None = None) -> None:
        req = ShareHeartbeatRequest("g", member, epoch, None, topics)
        assert m.heartbeat(req, 45000, 5000).response.error_code == 0

    beat("m1", 0, ("four",))
    beat("m2", 0, ("four",))
    beat("m1", m.groups["g"].members["m1"].member_epoch)
    group = m.groups["g"]
    assert group.state is ShareGroupState.STABLE
    held = [set(mem.assigned_partitions[topic.topic_id]) for mem in group.members.values()]
    assert sorted(map(len, held)) == [2, 2] and held[0] | held[1] == set(range(4))


# --- properties ------------------------------------------------------------------------

TOPICS = [uuid.UUID(int=i) for i in range(1, 4)]


@st.composite
def scenarios(
    draw: st.DrawFn, homogeneous: bool
) -> tuple[dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int], dict[str, Assignment]]:
    members = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=7, unique=True))
    partitions = {t: draw(st.integers(0, 9)) for t in TOPICS}
    topic_sets = st.frozensets(st.sampled_from(TOPICS), min_size=1 if homogeneous else 0)
    if homogeneous:
        one = draw(topic_sets)
        subs = {m: one for m in members}
    else:
        subs = {m: draw(topic_sets) for m in members}
    # Any current assignment, also of topics a member does not subscribe to and of
    # partitions that do not exist.
    current: dict[str, Assignment] = {}
    for m in members:
        current[m] = {
            t: frozenset(ps)
            for t in TOPICS
            if (ps := draw(st.frozensets(st.integers(0, 10), max_size=6)))
        }
    if draw(st.booleans()):
        current = {}
    return subs, partitions, current


def _check_per_topic(
    subs: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
    out: Mapping[str, Assignment],
) -> None:
    assert set(out) == set(subs)
    for m, a in out.items():
        assert set(a) <= subs[m]
        assert all(p < partitions[t] for t, ps in a.items() for p in ps)
    for t in TOPICS:
        subscribers = sorted(m for m in subs if t in subs[m])
        n = partitions[t]
        if not subscribers or n == 0:
            continue
        owners = {p: {m for m in subscribers if p in out[m].get(t, ())} for p in range(n)}
        counts = [len(out[m].get(t, ())) for m in subscribers]
        assert all(owners.values()), "every partition has a member"
        sharing, owed = desired_counts(len(subscribers), n)
        assert all(c <= o for c, o in zip(counts, owed))
        assert all(len(o) <= sharing for o in owners.values())
        if n >= len(subscribers):
            assert all(len(o) == 1 for o in owners.values())
            assert max(counts) - min(counts) <= 1
            assert counts == owed
        elif not current:
            assert sharing == math.ceil(len(subscribers) / n)
            assert all(len(o) == sharing for o in owners.values())
            assert counts == owed and set(counts) <= {1, 2}


@settings(max_examples=300, deadline=None)
@given(scenarios(homogeneous=True))
def test_homogeneous_properties(
    scenario: tuple[dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int], dict[str, Assignment]],
) -> None:
    subs, partitions, current = scenario
    out = assign(subs, partitions, current)
    if len(subs[next(iter(subs))]) == 1:
        _check_per_topic(subs, partitions, current, out)
    else:
        # Balanced over all the subscribed partitions together.
        every = [(t, p) for t in sorted(subs[next(iter(subs))]) for p in range(partitions[t])]
        owners = {tp: {m for m in subs if tp[1] in out[m].get(tp[0], ())} for tp in every}
        assert all(owners.values())
        counts = [sum(len(ps) for ps in out[m].values()) for m in sorted(subs)]
        sharing, owed = desired_counts(len(subs), len(every))
        if len(every) >= len(subs):
            assert all(len(o) == 1 for o in owners.values()) and counts == owed
            assert max(counts) - min(counts) <= 1
        elif not current:
            assert all(len(o) == sharing for o in owners.values()) and counts == owed
    assert assign(subs, partitions, out) == out


@settings(max_examples=300, deadline=None)
@given(scenarios(homogeneous=False))
def test_heterogeneous_properties(
    scenario: tuple[dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, int], dict[str, Assignment]],
) -> None:
    subs, partitions, current = scenario
    out = assign(subs, partitions, current)
    if len(set(subs.values())) > 1:
        _check_per_topic(subs, partitions, current, out)
    assert assign(subs, partitions, out) == out
