"""The share coordinator's sans-IO core: the records of ``__share_group_state`` byte for
byte, batch merging against a per-offset model, the fencing rules, and a log replayed into
a fresh shard rebuilding the state (hypothesis)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.coordinator.share.share_coordinator_records import (
    SharePartitionKey,
    ShareSnapshot,
    ShareTombstone,
    ShareUpdate,
    StateBatch,
    coordinator_key,
    deserialize,
    parse_coordinator_key,
    serialize,
    state_partition_for,
)
from broker_py.coordinator.share.share_coordinator_shard import (
    READ_UNINITIALIZED,
    WRITE_UNINITIALIZED,
    ShareCoordinatorShard,
)
from broker_py.coordinator.share.state_batch_combiner import combine
from logstore.protocol.error_codes import ErrorCode

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")
KEY = SharePartitionKey("g", TOPIC, 0)


def _shard(per_snapshot: int = 500) -> ShareCoordinatorShard:
    return ShareCoordinatorShard(per_snapshot, lambda t: 3 if t == TOPIC else None, CLOCK.pop)


class _Clock:
    """Milliseconds going up by one at each reading."""

    def __init__(self) -> None:
        self.ms = 1_000

    def pop(self) -> int:
        self.ms += 1
        return self.ms


CLOCK = _Clock()


def _apply(shard: ShareCoordinatorShard, outcome) -> None:
    for record in outcome.records:
        shard.replay(record)


# ---- records ----


def test_snapshot_bytes() -> None:
    record = ShareSnapshot(KEY, 1, 2, 3, 10, (StateBatch(10, 12, 2, 1),), 7, 9)
    key, value = serialize(record)
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC.bytes + b"\x00\x00\x00\x00"
    assert value == (
        b"\x00\x00"  # value version 0
        + b"\x00\x00\x00\x01"  # snapshot epoch
        + b"\x00\x00\x00\x02"  # state epoch
        + b"\x00\x00\x00\x03"  # leader epoch
        + (10).to_bytes(8, "big")  # start offset
        + (7).to_bytes(8, "big")  # create timestamp
        + (9).to_bytes(8, "big")  # write timestamp
        + b"\x02"  # one batch (compact array: n + 1)
        + (10).to_bytes(8, "big")
        + (12).to_bytes(8, "big")
        + b"\x02"  # delivery state ACKNOWLEDGED
        + b"\x00\x01"  # delivery count
        + b"\x00"  # the batch's tagged fields
        + b"\x00"  # the value's tagged fields
    )
    assert deserialize(key, value) == record


def test_update_and_tombstone_bytes() -> None:
    update = ShareUpdate(KEY, 0, 5, -1, ())
    key, value = serialize(update)
    assert key[:2] == b"\x00\x01"
    assert (
        value
        == b"\x00\x00" + b"\x00" * 3 + b"\x00" + b"\x00\x00\x00\x05" + b"\xff" * 8 + b"\x01\x00"
    )
    assert deserialize(key, value) == update
    key, value = serialize(ShareTombstone(KEY))
    assert value is None and key[:2] == b"\x00\x00"
    assert deserialize(key, None) == ShareTombstone(KEY)
    assert deserialize(b"\x00\x03" + key[2:], b"") is None  # another record type


def test_coordinator_key_and_partition() -> None:
    key = coordinator_key("g", TOPIC, 7)
    assert key == "g:ASNFZ4mrze8BI0VniavN7w:7"
    assert parse_coordinator_key(key) == SharePartitionKey("g", TOPIC, 7)
    for bad in ("g:ASNFZ4mrze8BI0VniavN7w", ":ASNFZ4mrze8BI0VniavN7w:1", "g:xyz:1", "g:a:b:c"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)
    with pytest.raises(ValueError):
        parse_coordinator_key("g:ASNFZ4mrze8BI0VniavN7w:x")
    assert 0 <= state_partition_for(SharePartitionKey("g", TOPIC, 7), 50) < 50


# ---- merging ----

_batch = st.builds(
    lambda first, length, state, count: StateBatch(first, first + length, state, count),
    st.integers(0, 40),
    st.integers(0, 10),
    st.sampled_from([0, 1, 2, 4]),
    st.integers(0, 3),
)


def _per_offset(batches, start: int) -> dict[int, tuple[int, int]]:
    best: dict[int, tuple[int, int]] = {}
    for b in batches:
        for o in range(b.first_offset, b.last_offset + 1):
            if start != -1 and o < start:
                continue
            p = (b.delivery_count, b.delivery_state)
            if o not in best or p > best[o]:
                best[o] = p
    return best


@given(st.lists(_batch, max_size=6), st.lists(_batch, max_size=6), st.integers(-1, 30))
def test_combine_matches_per_offset_model(so_far, new, start) -> None:
    out = combine(so_far, new, start)
    model = _per_offset([*so_far, *new], start)
    assert {
        o: (b.delivery_count, b.delivery_state)
        for b in out
        for o in range(b.first_offset, b.last_offset + 1)
    } == model
    for a, b in zip(out, out[1:], strict=False):
        assert a.last_offset < b.first_offset  # sorted, disjoint
        if a.last_offset + 1 == b.first_offset:  # adjacent only with different states
            assert (a.delivery_count, a.delivery_state) != (b.delivery_count, b.delivery_state)


# ---- fencing and errors ----


def test_uninitialized_and_invalid() -> None:
    shard = _shard()
    assert shard.read_state(KEY, 0).error == ErrorCode.INVALID_REQUEST
    assert shard.read_state(KEY, 0).message == READ_UNINITIALIZED
    w = shard.write_state(KEY, 0, 0, 0, [])
    assert (w.error, w.message, w.records) == (ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED, [])
    bad = SharePartitionKey("g", TOPIC, -1)
    assert shard.initialize_state(bad, 0, 0).error == ErrorCode.INVALID_REQUEST
    unknown = SharePartitionKey("g", uuid.uuid4(), 0)
    assert shard.initialize_state(unknown, 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    beyond = SharePartitionKey("g", TOPIC, 3)
    assert shard.delete_state(beyond).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert shard.delete_state(KEY).records == []  # nothing to delete
    summary = shard.read_state_summary(KEY, 0)
    assert (summary.error, summary.start_offset, summary.state_epoch) == (ErrorCode.NONE, -1, 0)


def test_fencing() -> None:
    shard = _shard()
    _apply(shard, shard.initialize_state(KEY, 1, 5))
    read = shard.read_state(KEY, 3)  # a new leader: its epoch is written
    assert read.error == ErrorCode.NONE and read.start_offset == 5 and len(read.records) == 1
    _apply(shard, read)
    assert shard.read_state(KEY, 3).records == []
    assert shard.read_state(KEY, 2).error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write_state(KEY, 1, 2, 5, []).error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write_state(KEY, 0, 3, 5, []).error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.initialize_state(KEY, 0, 0).error == ErrorCode.FENCED_STATE_EPOCH
    ok = shard.write_state(KEY, 1, 3, 6, [StateBatch(6, 9, 2, 1)])
    assert ok.error == ErrorCode.NONE
    _apply(shard, ok)
    state = shard.read_state(KEY, 3)
    assert (state.start_offset, state.state_batches) == (6, (StateBatch(6, 9, 2, 1),))
    _apply(shard, shard.delete_state(KEY))
    assert shard.read_state(KEY, 3).error == ErrorCode.INVALID_REQUEST
    assert KEY not in shard.leader_epochs


def test_snapshot_every_n_updates() -> None:
    shard = _shard(per_snapshot=2)
    _apply(shard, shard.initialize_state(KEY, 0, 0))
    kinds = []
    for i in range(7):
        out = shard.write_state(KEY, 0, 0, -1, [StateBatch(i, i, 2, 1)])
        kinds.append(type(out.records[0]).__name__)
        _apply(shard, out)
    # The first update after the initial snapshot counts 0, a later snapshot resets the
    # count to 0: as in Kafka's shard, three updates then two between snapshots.
    assert kinds == ["ShareUpdate"] * 3 + ["ShareSnapshot"] + ["ShareUpdate"] * 2 + [
        "ShareSnapshot"
    ]
    state = shard.states[KEY]
    assert state.snapshot_epoch == 2
    assert state.create_timestamp < state.write_timestamp  # created at init, written later
    assert shard.states[KEY].state_batches == (StateBatch(0, 6, 2, 1),)


# ---- replay rebuilds the state ----

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("init"), st.integers(0, 2), st.integers(0, 2), st.integers(0, 20)),
        st.tuples(
            st.just("write"),
            st.integers(0, 2),
            st.integers(-1, 2),
            st.integers(-1, 3),
            st.integers(-1, 20),
            st.lists(_batch, max_size=3),
        ),
        st.tuples(st.just("read"), st.integers(0, 2), st.integers(-1, 4)),
        st.tuples(st.just("delete"), st.integers(0, 2)),
        st.tuples(st.just("prune"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_ops, st.integers(0, 3))
def test_replaying_the_log_rebuilds_the_state(ops, per_snapshot) -> None:
    shard = _shard(per_snapshot)
    log: list[tuple[bytes, bytes | None]] = []
    pruned_below = 0  # the log may start here: every state has a snapshot after it
    for op in ops:
        key = SharePartitionKey("g", TOPIC, op[1])
        if op[0] == "prune":
            pruned_below = len(log)
            for record in shard.snapshot_all():
                log.append(serialize(record))
                shard.replay(record)
            continue
        if op[0] == "init":
            out = shard.initialize_state(key, op[2], op[3])
        elif op[0] == "write":
            out = shard.write_state(key, op[2], op[3], op[4], op[5])
        elif op[0] == "read":
            out = shard.read_state(key, op[2])
        else:
            out = shard.delete_state(key)
        if out.error != ErrorCode.NONE:
            assert out.records == []
        for record in out.records:
            log.append(serialize(record))
            shard.replay(record)
    # A load of the whole log, or of the log from the last prune on, gives the same states.
    for start in (0, pruned_below):
        fresh = _shard(per_snapshot)
        for k, v in log[start:]:
            record = deserialize(k, v)
            assert record is not None
            fresh.replay(record)
        assert fresh.states == shard.states
        assert fresh.state_epochs == shard.state_epochs
        assert fresh.leader_epochs == shard.leader_epochs
        for key, state in shard.states.items():
            read = fresh.read_state(key, -1)
            assert (read.start_offset, read.state_batches) == (
                state.start_offset,
                state.state_batches,
            )


def test_the_states_of_deleted_topics_get_tombstones() -> None:
    shard = _shard()
    other = SharePartitionKey("h", TOPIC, 1)
    _apply(shard, shard.initialize_state(KEY, 0, 0))
    _apply(shard, shard.initialize_state(other, 0, 0))
    assert shard.delete_topics({uuid.uuid4()}) == []
    tombstones = shard.delete_topics({TOPIC})
    assert sorted(tombstones, key=lambda t: t.key.group_id) == [
        ShareTombstone(KEY),
        ShareTombstone(other),
    ]
    shard.replay_all(tombstones)
    assert shard.states == {} and shard.leader_epochs == {} and shard.state_epochs == {}
