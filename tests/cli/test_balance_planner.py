"""The balancer's planner (:mod:`logstore.balance.planner`) on random clusters: the
replication factor kept, distinct brokers, excluded brokers emptied, rack spread never
made worse than the eligible brokers allow, replica counts within one without racks
(with the fewest replica moves any plan needs) and with racks of equal size, leaders
locally even, and the plan's bytes equal to what its new replicas copy."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from logstore.balance.planner import Partition, PlanError, plan, rack_count, rack_of

_SETTINGS = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def clusters(draw: st.DrawFn, racks: bool = True, exclude: bool = True):
    n = draw(st.integers(1, 7))
    ids = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n, unique=True))
    rack_names = ["a", "b", "c"] if racks else [None]
    brokers = {b: draw(st.sampled_from(rack_names)) for b in ids}
    # replicas may sit on brokers that are no longer live (ids outside ``brokers``)
    universe = sorted({*ids, *draw(st.lists(st.integers(21, 23), max_size=2))})
    assignment: dict[Partition, list[int]] = {}
    sizes: dict[Partition, int] = {}
    for t in range(draw(st.integers(0, 3))):
        for p in range(draw(st.integers(1, 6))):
            rf = draw(st.integers(1, min(3, len(universe))))
            replicas = draw(st.permutations(universe))[:rf]
            assignment[(f"t{t}", p)] = replicas
            sizes[(f"t{t}", p)] = draw(st.integers(0, 10_000))
    excluded = set(draw(st.lists(st.sampled_from(ids), max_size=2))) if exclude else set()
    return brokers, assignment, sizes, excluded


def _result(brokers, assignment, sizes, excluded):
    eligible = [b for b in brokers if b not in excluded]
    if any(len(r) > len(eligible) for r in assignment.values()):
        with pytest.raises(PlanError):
            plan(brokers, assignment, sizes, excluded)
        assume(False)
    return plan(brokers, assignment, sizes, excluded)


def _after(assignment, result):
    out = {p: list(r) for p, r in assignment.items()}
    for m in result.moves:
        assert out[(m.topic, m.partition)] == list(m.before)
        out[(m.topic, m.partition)] = list(m.after)
    return out


@_SETTINGS
@given(clusters())
def test_plan_keeps_replication_factor_racks_and_empties_excluded(cluster):
    brokers, assignment, sizes, excluded = cluster
    result = _result(brokers, assignment, sizes, excluded)
    after = _after(assignment, result)
    eligible = {b for b in brokers if b not in excluded}
    eligible_racks = len({rack_of(brokers, b) for b in eligible})
    for p, replicas in after.items():
        before = assignment[p]
        assert len(replicas) == len(before)
        assert len(set(replicas)) == len(replicas)
        if set(before) <= eligible:
            assert rack_count(brokers, replicas) >= rack_count(brokers, before)
        else:
            assert set(replicas) <= eligible
            best = min(len(before), eligible_racks)
            assert rack_count(brokers, replicas) >= min(rack_count(brokers, before), best)
    assert result.cost == sum(
        sizes[p] * len(set(after[p]) - set(assignment[p])) for p in assignment
    )
    # replica counts never spread further apart among brokers that were all eligible
    if all(set(r) <= eligible for r in assignment.values()):
        before_counts = [result.replicas_before.get(b, 0) for b in eligible]
        after_counts = [result.replicas_after[b] for b in eligible]
        if before_counts:
            assert max(after_counts) <= max(before_counts)
            assert min(after_counts) >= min(before_counts)


@_SETTINGS
@given(clusters(racks=False))
def test_without_racks_replicas_end_within_one_with_fewest_moves(cluster):
    brokers, assignment, sizes, excluded = cluster
    result = _result(brokers, assignment, sizes, excluded)
    after = _after(assignment, result)
    eligible = sorted(b for b in brokers if b not in excluded)
    counts = Counter(b for r in after.values() for b in r)
    if eligible:
        per = [counts[b] for b in eligible]
        assert max(per) - min(per) <= 1, per
    if not excluded and all(set(r) <= set(eligible) for r in assignment.values()):
        total = sum(len(r) for r in assignment.values())
        floor, extra = divmod(total, len(eligible))
        ceil = floor + (1 if extra else 0)
        before = Counter(b for r in assignment.values() for b in r)
        above = sum(max(0, before[b] - ceil) for b in eligible)
        below = sum(max(0, floor - before[b]) for b in eligible)
        assert result.replica_moves == max(above, below)


@st.composite
def even_racks(draw: st.DrawFn):
    """Two or three racks of one to three brokers each, the same number in every rack;
    replicas anywhere."""
    racks, per = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    brokers = {r * 10 + i: f"rack{r}" for r in range(racks) for i in range(per)}
    ids = sorted(brokers)
    assignment = {
        ("t", p): draw(st.permutations(ids))[: draw(st.integers(1, min(3, len(ids))))]
        for p in range(draw(st.integers(1, 12)))
    }
    return brokers, assignment, {k: draw(st.integers(0, 100)) for k in assignment}


@_SETTINGS
@given(even_racks())
def test_with_racks_of_equal_size_replicas_end_within_one(cluster):
    brokers, assignment, sizes = cluster
    result = plan(brokers, assignment, sizes)
    after = _after(assignment, result)
    for p, replicas in after.items():
        assert rack_count(brokers, replicas) >= rack_count(brokers, assignment[p])
    counts = [result.replicas_after[b] for b in brokers]
    assert max(counts) - min(counts) <= 1, result.replicas_after


def test_a_rack_limit_is_passed_through_a_third_broker():
    """Broker 2 holds two partitions whose other replica is in rack b: neither can go to
    broker 12 (rack b) directly, so broker 1 hands its partition to 12 and takes one of
    broker 2's."""
    brokers = {0: "a", 1: "a", 2: "a", 10: "b", 11: "b", 12: "b"}
    assignment = {("t", 0): [10, 2], ("t", 1): [0], ("t", 2): [1], ("t", 3): [11, 2]}
    result = plan(brokers, assignment, {})
    after = _after(assignment, result)
    assert sorted(result.replicas_after.values()) == [1] * 6
    assert all(rack_count(brokers, r) == len(r) for r in after.values())


@_SETTINGS
@given(clusters())
def test_leaders_end_locally_even(cluster):
    """No single reorder of a partition's replicas brings two brokers' preferred-leader
    counts closer when they differ by two or more."""
    brokers, assignment, sizes, excluded = cluster
    result = _result(brokers, assignment, sizes, excluded)
    after = _after(assignment, result)
    leaders = Counter(r[0] for r in after.values() if r)
    assert dict(leaders) == {b: n for b, n in result.leaders_after.items() if n}
    for replicas in after.values():
        for other in replicas[1:]:
            assert leaders[replicas[0]] - leaders[other] < 2


def test_a_new_broker_gets_the_smallest_partition_each_broker_can_hand_over():
    brokers = {1: None, 2: None, 3: None, 4: None}
    assignment = {("t", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)}
    sizes = {("t", p): 100 * (p + 1) for p in range(6)}
    result = plan(brokers, assignment, sizes)
    assert result.replicas_after[4] == 3
    assert sorted(result.replicas_after.values()) == [3, 3, 3, 3]
    assert result.replica_moves == 3
    # b3 (most bytes) hands over t-1 (200), b1 t-0 (100); b2 holds both, so t-3 (400)
    assert result.cost == 200 + 100 + 400
    assert [m.cost for m in result.moves] == sorted(m.cost for m in result.moves)


def test_decommission_keeps_racks_apart():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b"}
    assignment = {("t", 0): [1, 3], ("t", 1): [3, 1], ("t", 2): [2, 4]}
    result = plan(brokers, assignment, {}, exclude={1})
    after = _after(assignment, result)
    assert all(1 not in r for r in after.values())
    assert all(rack_count(brokers, r) == 2 for r in after.values())
    assert {b for r in after.values() for b in r if brokers[b] == "a"} == {2}


def test_too_few_brokers_left_is_refused():
    with pytest.raises(PlanError, match="3 replicas and only 2 brokers"):
        plan({1: None, 2: None, 3: None}, {("t", 0): [1, 2, 3]}, {}, exclude={3})
