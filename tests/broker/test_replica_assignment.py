"""Replica assignment as Kafka's AdminUtils does it: Kafka's own examples, then
properties over random broker sets."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.controller.replica_assignment import (
    BrokerMetadata,
    assign_replicas,
    rack_alternated,
    validate_assignment,
)
from logstore.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


def brokers(*ids, racks=None):
    return [BrokerMetadata(i, None if racks is None else racks[i]) for i in ids]


def test_kafkas_rack_unaware_example():
    # Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0.
    assert assign_replicas(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_kafkas_rack_aware_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assignment = assign_replicas(brokers(*racks, racks=racks), 7, 3, fixed_start_index=0)
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_new_partitions_continue_the_leaders_round_robin():
    # As Kafka adds partitions: from the existing count, with partition 0's first replica
    # as the start. The follower shift starts afresh (Kafka does not rebuild it).
    whole = assign_replicas(brokers(0, 1, 2, 3), 12, 2, fixed_start_index=1)
    tail = assign_replicas(brokers(0, 1, 2, 3), 4, 2, fixed_start_index=1, start_partition_id=8)
    assert sorted(tail) == [8, 9, 10, 11]
    assert [tail[p][0] for p in tail] == [whole[p][0] for p in range(8, 12)]
    assert tail == {8: [1, 0], 9: [2, 1], 10: [3, 2], 11: [0, 3]}


def test_refusals():
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers(0, 1), 0, 1)
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0"):
        assign_replicas(brokers(0, 1), 1, 0)
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas(brokers(0, 1), 1, 3)
    with pytest.raises(InvalidReplicationFactorError, match="rack information"):
        assign_replicas([BrokerMetadata(0, "a"), BrokerMetadata(1)], 1, 1)


def test_explicit_assignments_are_checked():
    validate_assignment({0: [1, 2], 1: [2, 3]}, [1, 2, 3])
    validate_assignment({4: [1], 5: [2]}, [1, 2], first_partition=4)
    for bad, why in (
        ({}, "empty"),
        ({0: [1], 2: [2]}, "without gaps"),
        ({0: [1, 2], 1: [3]}, "different replication factors"),
        ({0: []}, "no replicas"),
        ({0: [1, 1]}, "twice"),
        ({0: [1, 9]}, "broker 9"),
    ):
        with pytest.raises(InvalidReplicaAssignmentError, match=why):
            validate_assignment(bad, [1, 2, 3])


@settings(max_examples=200, deadline=None)
@given(
    ids=st.sets(st.integers(0, 50), min_size=1, max_size=9),
    partitions=st.integers(1, 40),
    data=st.data(),
    rack_count=st.integers(0, 4),
    seed=st.integers(0, 2**32),
)
def test_every_assignment_is_valid_and_spreads(ids, partitions, data, rack_count, seed):
    rf = data.draw(st.integers(1, len(ids)))
    ids = sorted(ids)
    racks = (
        None
        if rack_count == 0
        else {b: f"r{data.draw(st.integers(0, rack_count - 1))}" for b in ids}
    )
    assignment = assign_replicas(
        brokers(*ids, racks=racks), partitions, rf, rng=random.Random(seed)
    )
    assert sorted(assignment) == list(range(partitions))
    validate_assignment(assignment, ids)
    for replicas in assignment.values():
        assert len(replicas) == rf
        if racks is not None:
            assert len({racks[r] for r in replicas}) == min(rf, len(set(racks.values())))
    if racks is None:
        # Leaders go round robin over the brokers.
        leaders = Counter(r[0] for r in assignment.values())
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
