"""ShareGroupStatePartitionMetadata (record type 15, KIP-932): its bytes as Kafka 4.1
writes them, its replay into a share group, and the transitions of the partitions with
share-partition state (initializing, initialized, deleting)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share import record_serde, state_partitions
from broker_py.coordinator.group.modern.share.group import ShareGroup
from broker_py.coordinator.group.modern.share.records import (
    ShareMemberMetadataRecord,
    ShareStatePartitionsRecord,
    ShareStatePartitionsTombstone,
)

T1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000002")


def test_bytes_as_kafka_writes_them() -> None:
    record = ShareStatePartitionsRecord("g", {T1: ("a", frozenset({1, 0}))}, {}, {T2: ("b")})
    key, value = record_serde.serialize(record)
    assert key == b"\x00\x0f" + b"\x00\x01g"
    assert value == (
        b"\x00\x00"  # value version 0
        + b"\x02"  # initializing_topics: one (compact array)
        + T1.bytes
        + b"\x02a"  # compact string "a"
        + b"\x03\x00\x00\x00\x00\x00\x00\x00\x01"  # partitions [0, 1]
        + b"\x00"  # tagged fields of the topic
        + b"\x01"  # initialized_topics: none
        + b"\x02"  # deleting_topics: one
        + T2.bytes
        + b"\x02b"
        + b"\x00"
        + b"\x00"  # tagged fields of the value
    )
    assert record_serde.deserialize(key, value) == record
    assert record_serde.deserialize(key, None) == ShareStatePartitionsTombstone("g")
    assert record_serde.serialize(ShareStatePartitionsTombstone("g")) == (key, None)


def _group() -> ShareGroup:
    group = ShareGroup("g")
    group.replay(ShareMemberMetadataRecord("g", "m", None, "c", "/h", ("a", "b")))
    return group


TOPICS = {"a": TopicMetadata(T1, "a", 2), "b": TopicMetadata(T2, "b", 1)}
NAMES = {T1: "a", T2: "b"}


def test_initialize_then_delete() -> None:
    group = _group()
    wanted = state_partitions.to_initialize(group, TOPICS, lambda _tp: False)
    assert wanted == {(T1, 0), (T1, 1), (T2, 0)}
    group.replay(state_partitions.with_initializing(group, wanted, NAMES))
    # Initializing partitions are not asked for again until retried.
    assert state_partitions.to_initialize(group, TOPICS, lambda _tp: False) == set()
    assert state_partitions.to_initialize(group, TOPICS, lambda tp: tp == (T2, 0)) == {(T2, 0)}

    # One failed: it leaves initializing, and the next heartbeat asks for it again.
    group.replay(state_partitions.after_initialize(group, {(T1, 0), (T1, 1)}, {(T2, 0)}, NAMES))
    assert group.state_partitions == ShareStatePartitionsRecord(
        "g", {}, {T1: ("a", frozenset({0, 1}))}, {}
    )
    assert state_partitions.to_initialize(group, TOPICS, lambda _tp: False) == {(T2, 0)}
    assert state_partitions.with_state(group) == {T1: ("a", frozenset({0, 1}))}

    # A deleting topic is not initialized again until its state is gone.
    group.replay(state_partitions.with_deleting(group, {T1: "a"}))
    assert group.state_partitions == ShareStatePartitionsRecord("g", {}, {}, {T1: "a"})
    assert state_partitions.to_initialize(group, TOPICS, lambda _tp: False) == {(T2, 0)}
    group.replay(state_partitions.after_delete(group, {T1}))
    assert group.state_partitions == ShareStatePartitionsRecord("g", {}, {}, {})

    # The record is part of the group's snapshot and of its tombstones.
    assert group.state_partitions in list(group.snapshot_records())
    assert ShareStatePartitionsTombstone("g") in group.tombstones()


PARTITIONS = [(T1, 0), (T1, 1), (T2, 0)]
op = st.one_of(
    st.tuples(st.just("initialize"), st.sets(st.sampled_from(PARTITIONS))),
    st.tuples(
        st.just("finish"),
        st.sets(st.sampled_from(PARTITIONS)),
        st.sets(st.sampled_from(PARTITIONS)),
    ),
    st.tuples(st.just("delete"), st.sets(st.sampled_from([T1, T2]))),
    st.tuples(st.just("deleted"), st.sets(st.sampled_from([T1, T2]))),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=12))
def test_transitions_keep_the_sets_apart(ops) -> None:
    """Whatever the order of heartbeats' initializations, their outcomes, and deletions:
    a partition is never both initializing and initialized, a deleting topic has no
    initialized partition, the record reads back from its bytes, and every partition of
    the subscribed topics is either in a set or asked for by the next heartbeat."""
    group = _group()
    for step in ops:
        if step[0] == "initialize":
            wanted = state_partitions.to_initialize(group, TOPICS, lambda _tp: False)
            add = wanted & step[1]
            if add:
                group.replay(state_partitions.with_initializing(group, add, NAMES))
        elif step[0] == "finish":
            done, failed = step[1], step[2] - step[1]
            group.replay(state_partitions.after_initialize(group, done, failed, NAMES))
        elif step[0] == "delete":
            group.replay(state_partitions.with_deleting(group, {t: NAMES[t] for t in step[1]}))
        else:
            group.replay(state_partitions.after_delete(group, step[1]))
        record = group.state_partitions
        if record is None:
            continue
        initializing = {(t, p) for t, (_, ps) in record.initializing.items() for p in ps}
        initialized = {(t, p) for t, (_, ps) in record.initialized.items() for p in ps}
        assert not initializing & initialized
        assert not set(record.deleting) & {t for t, _ in initialized}
        assert all(name == NAMES[t] for t, (name, _) in record.initialized.items())
        assert record_serde.deserialize(*record_serde.serialize(record)) == record
        asked = state_partitions.to_initialize(group, TOPICS, lambda _tp: False)
        for tp in PARTITIONS:
            assert (tp in asked) == (
                tp not in initialized | initializing and tp[0] not in record.deleting
            )
