"""Fetch sessions (KIP-227) without a socket: the session cache, its eviction rules and
the four fetch contexts."""

from __future__ import annotations

import uuid

from broker_py.replication.fetch_data import FetchPartitionData
from broker_py.server.fetch_context import (
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    new_context,
)
from broker_py.server.fetch_session import (
    INT32_MAX,
    INVALID_SESSION_ID,
    NULL_UUID,
    CachedPartition,
    FetchSessionCache,
    next_epoch,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.types import DeferredRecords


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def part(
    p: int, topic: str = "t", offset: int = 0, topic_id: uuid.UUID = NULL_UUID
) -> CachedPartition:
    return CachedPartition(topic, topic_id, p, offset, 1 << 20)


def read(
    fp: CachedPartition,
    hw: int,
    records: int = 0,
    error: ErrorCode = ErrorCode.NONE,
    log_start: int = 0,
):
    return FetchPartitionData(
        fp, int(error), hw, log_start, DeferredRecords(records) if records else b""
    )


def full_session(cache: FetchSessionCache, n: int = 3, hw: int = 5) -> int:
    ctx = new_context(cache, 12, 0, 0, [part(i) for i in range(n)], [])
    assert isinstance(ctx, FullFetchContext)
    error, session_id, sent = ctx.respond([read(p, hw) for p in ctx.partitions])
    assert error == 0 and session_id != INVALID_SESSION_ID and len(sent) == n
    return session_id


def test_epochs_count_up_and_wrap_to_one():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(INT32_MAX) == 1
    assert next_epoch(-1) == -1


def test_full_request_creates_a_session_and_incremental_ones_send_only_news():
    cache = FetchSessionCache(10)
    sid = full_session(cache)
    ctx = new_context(cache, 12, sid, 1, [], [])
    assert isinstance(ctx, IncrementalFetchContext)
    assert [p.partition for p in ctx.partitions] == [0, 1, 2]
    # Nothing changed: nothing is sent. Partition 1 got records, 2 a new high watermark.
    error, got_sid, sent = ctx.respond([read(p, 5) for p in ctx.partitions])
    assert (error, got_sid, sent) == (0, sid, [])
    ctx = new_context(cache, 12, sid, 2, [], [])
    updates = [
        read(ctx.partitions[0], 5),
        read(ctx.partitions[1], 7, records=100),
        read(ctx.partitions[2], 6),
    ]
    _, _, sent = ctx.respond(updates)
    assert [r.fetch.partition for r in sent] == [1, 2]
    # Partition 1 returned records, so it moved to the end of the session.
    assert [p.partition for p in cache.get(sid).partitions.values()] == [0, 2, 1]


def test_an_error_is_always_sent_and_the_recovery_too():
    cache = FetchSessionCache(10)
    sid = full_session(cache, n=1)
    for epoch in (1, 2):
        ctx = new_context(cache, 12, sid, epoch, [], [])
        _, _, sent = ctx.respond(
            [read(ctx.partitions[0], -1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        )
        assert len(sent) == 1
    ctx = new_context(cache, 12, sid, 3, [], [])
    _, _, sent = ctx.respond([read(ctx.partitions[0], 5)])
    assert len(sent) == 1, "the high watermark was forgotten with the error, so it is sent again"


def test_incremental_request_updates_adds_and_forgets_partitions():
    cache = FetchSessionCache(10)
    sid = full_session(cache)
    ctx = new_context(cache, 12, sid, 1, [part(1, offset=40), part(7, offset=3)], [("t", 0)])
    session = cache.get(sid)
    assert [(p.partition, p.fetch_offset) for p in session.partitions.values()] == [
        (1, 40),
        (2, 0),
        (7, 3),
    ]
    _, _, sent = ctx.respond([read(p, 5) for p in ctx.partitions])
    assert [r.fetch.partition for r in sent] == [7], (
        "only the new partition's high watermark is news"
    )


def test_forgetting_every_partition_closes_the_session():
    cache = FetchSessionCache(10)
    sid = full_session(cache, n=2)
    ctx = new_context(cache, 12, sid, 1, [], [("t", 0), ("t", 1)])
    assert isinstance(ctx, SessionlessFetchContext)
    assert ctx.respond([])[1] == INVALID_SESSION_ID
    assert cache.get(sid) is None


def test_session_errors():
    cache = FetchSessionCache(10)
    sid = full_session(cache)
    unknown = new_context(cache, 12, sid + 1 if sid < INT32_MAX else 1, 1, [], [])
    assert (
        isinstance(unknown, SessionErrorContext)
        and unknown.respond([])[0] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    )
    wrong_epoch = new_context(cache, 12, sid, 2, [], [])
    assert wrong_epoch.respond([])[0] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    ids = new_context(cache, 13, sid, 1, [], [])
    assert ids.respond([])[0] == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # The errors did not consume the epoch.
    assert isinstance(new_context(cache, 12, sid, 1, [], []), IncrementalFetchContext)


def test_a_second_request_of_the_session_invalidates_the_one_still_waiting():
    cache = FetchSessionCache(10)
    sid = full_session(cache)
    waiting = new_context(cache, 12, sid, 1, [], [])
    new_context(cache, 12, sid, 2, [], [])
    error, got_sid, sent = waiting.respond([read(p, 9) for p in waiting.partitions])
    assert (error, got_sid, sent) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])


def test_full_requests_close_the_named_session():
    cache = FetchSessionCache(10)
    for epoch in (0, -1):
        sid = full_session(cache)
        ctx = new_context(cache, 12, sid, epoch, [part(0)], [])
        assert cache.get(sid) is None
        assert isinstance(ctx, FullFetchContext if epoch == 0 else SessionlessFetchContext)


def test_no_sessions_below_v7_or_with_no_slots():
    cache = FetchSessionCache(10)
    assert isinstance(new_context(cache, 6, 0, 0, [part(0)], []), SessionlessFetchContext)
    none = FetchSessionCache(0)
    ctx = new_context(none, 12, 0, 0, [part(0)], [])
    assert ctx.respond([read(ctx.partitions[0], 1)])[1] == INVALID_SESSION_ID
    assert len(none) == 0


def test_topic_id_sessions_key_partitions_by_id():
    cache = FetchSessionCache(10)
    tid = uuid.uuid4()
    ctx = new_context(cache, 13, 0, 0, [part(0, topic=None, topic_id=tid)], [])
    _, sid, _ = ctx.respond([read(ctx.partitions[0], 1)])
    new_context(cache, 13, sid, 1, [], [(tid, 0)])
    assert cache.get(sid) is None


def test_eviction_takes_a_stale_session_first():
    clock = FakeClock()
    cache = FetchSessionCache(2, eviction_ms=120_000, clock=clock)
    a = full_session(cache)
    clock.now += 100
    b = full_session(cache)
    clock.now += 30  # a idle for 130 s, b for 30 s
    c = full_session(cache, n=1)
    assert cache.get(a) is None and cache.get(b) is not None and cache.get(c) is not None
    assert cache.evictions == 1


def test_eviction_of_a_busy_cache_prefers_bigger_sessions_and_protects_young_ones():
    clock = FakeClock()
    cache = FetchSessionCache(2, eviction_ms=120_000, clock=clock)
    small = full_session(cache, n=1)
    big = full_session(cache, n=5)
    # Both young: a new session of any size is refused.
    assert (
        new_context(cache, 12, 0, 0, [part(i) for i in range(9)], []).respond([])[1]
        == INVALID_SESSION_ID
    )
    clock.now += 200
    for sid, epoch in ((small, 1), (big, 1)):  # both in use, so neither is stale
        new_context(cache, 12, sid, epoch, [], [])
    # Not bigger than the smallest: refused. Bigger: the smallest goes.
    ctx = new_context(cache, 12, 0, 0, [part(0)], [])
    assert ctx.respond([read(ctx.partitions[0], 1)])[1] == INVALID_SESSION_ID
    ctx = new_context(cache, 12, 0, 0, [part(0), part(1)], [])
    _, new, _ = ctx.respond([read(p, 1) for p in ctx.partitions])
    assert new != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None
