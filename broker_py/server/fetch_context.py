"""What one Fetch request reads, and which of what it read its response carries.

:func:`new_context` turns a request's session metadata into one of four contexts
(the rules are in :mod:`broker_py.server.fetch_session`):

- :class:`SessionErrorContext`: an unknown session or a wrong epoch; the response is
  only the error, with no partitions.
- :class:`SessionlessFetchContext`: a full request with no session (epoch -1, Fetch
  below v7, or an incremental request that forgot every partition).
- :class:`FullFetchContext`: a full request asking for a session (epoch 0); the
  session is created from the response, so it starts out knowing what was sent.
- :class:`IncrementalFetchContext`: reads every partition of the session and answers
  with those :meth:`CachedPartition.must_respond` selects.

Each context has ``partitions`` (what to read, in order) and ``respond(reads)``,
which takes a :class:`FetchPartitionData` per partition in that order and returns the
response's error code, session id and the reads to send.
"""

from __future__ import annotations

from broker_py.replication.fetch_data import FetchPartitionData
from broker_py.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)
from logstore.protocol.error_codes import ErrorCode

SESSION_MIN_VERSION = 7


class SessionErrorContext:
    def __init__(self, error: ErrorCode) -> None:
        self.error = error
        self.partitions: list[CachedPartition] = []

    def respond(self, reads: list[FetchPartitionData]) -> tuple[int, int, list[FetchPartitionData]]:
        return int(self.error), INVALID_SESSION_ID, []


class SessionlessFetchContext:
    def __init__(self, fetch_data: list[CachedPartition]) -> None:
        self.partitions = fetch_data

    def respond(self, reads: list[FetchPartitionData]) -> tuple[int, int, list[FetchPartitionData]]:
        return 0, INVALID_SESSION_ID, reads


class FullFetchContext:
    def __init__(
        self, cache: FetchSessionCache, fetch_data: list[CachedPartition], uses_topic_ids: bool
    ) -> None:
        self.cache = cache
        self.partitions = fetch_data
        self.uses_topic_ids = uses_topic_ids

    def respond(self, reads: list[FetchPartitionData]) -> tuple[int, int, list[FetchPartitionData]]:
        cached: dict[tuple, CachedPartition] = {}
        for read in reads:
            read.fetch.remember(read.error_code, read.high_watermark, read.log_start_offset)
            cached[read.fetch.key] = read.fetch  # a partition named twice: the last one counts
        session_id = self.cache.maybe_create(list(cached.values()), self.uses_topic_ids)
        return 0, session_id, reads


class IncrementalFetchContext:
    def __init__(self, session: FetchSession) -> None:
        self.session = session
        self.expected_epoch = session.epoch
        self.partitions = list(session.partitions.values())

    def respond(self, reads: list[FetchPartitionData]) -> tuple[int, int, list[FetchPartitionData]]:
        session = self.session
        if session.epoch != self.expected_epoch:
            # Another request of this session arrived while this one waited.
            return int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), session.id, []
        selected = []
        for read in reads:
            size = len(read.records)
            if read.fetch.must_respond(
                read.error_code, read.high_watermark, read.log_start_offset, size
            ):
                selected.append(read)
                if size and read.fetch.key in session.partitions:
                    session.move_to_end(read.fetch)
        return 0, session.id, selected


FetchContext = (
    SessionErrorContext | SessionlessFetchContext | FullFetchContext | IncrementalFetchContext
)


def new_context(
    cache: FetchSessionCache,
    version: int,
    session_id: int,
    epoch: int,
    fetch_data: list[CachedPartition],
    to_forget: list[tuple],
) -> FetchContext:
    """The context for a request with this session metadata (``session_id`` and
    ``epoch`` are ignored below Fetch v7, which has no sessions)."""
    if version < SESSION_MIN_VERSION:
        return SessionlessFetchContext(fetch_data)
    uses_topic_ids = version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return SessionlessFetchContext(fetch_data)
        return FullFetchContext(cache, fetch_data, uses_topic_ids)
    session = cache.get(session_id)
    if session is None:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(fetch_data, to_forget)
    if not len(session):
        cache.remove(session.id)
        return SessionlessFetchContext(fetch_data)
    cache.touch(session)
    session.epoch = next_epoch(session.epoch)
    return IncrementalFetchContext(session)
