"""Incremental fetch sessions (KIP-227): what the broker remembers between Fetch requests.

A session holds the partitions a fetcher reads, each with the request parameters it
last sent (fetch offset, partition max bytes, leader epoch) and the high watermark and
log start offset the broker last answered. An incremental request then names only
the partitions whose parameters changed (and those to forget), and an incremental
response carries only the partitions with something new: records, a changed high
watermark or log start offset, or an error.

Session metadata on the wire (``session_id``, ``session_epoch``, Fetch v7+):
- epoch ``-1`` (FINAL): a full request, and no session is created; a named session
  is closed.
- epoch ``0`` (INITIAL): a full request that asks for a new session; a named
  session is closed first. The response's ``session_id`` is the new session's id,
  or 0 when the cache has no room.
- epoch ``n > 0``: an incremental request in session ``session_id``, whose epoch must
  be exactly the session's next one (1 after creation, then 2, ..., wrapping from
  2**31-1 to 1); otherwise FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH.

Invariants:
- A session's partitions keep insertion order, and a partition that returns records
  moves to the end, so under ``max_bytes`` every partition gets its turn.
- A session created by v13+ requests (topic ids) is only used by v13+ requests,
  and one created by named requests only by named ones (FETCH_SESSION_TOPIC_ID_ERROR).
- The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. A
  new session may evict the least recently used one if it was idle for more than
  ``eviction_ms``, or else the smallest session older than ``eviction_ms`` if the
  new one has strictly more partitions; otherwise it is not created.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
INT32_MAX = 2**31 - 1
NULL_UUID = uuid.UUID(int=0)


def next_epoch(epoch: int) -> int:
    """The epoch expected after ``epoch``: FINAL stays FINAL, 2**31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


class CachedPartition:
    """One partition of a fetch request or session: the fetcher's request parameters,
    and (in a session) the high watermark and log start offset last sent to it
    (-1 before the first response and after an error, so it is sent again)."""

    __slots__ = (
        "topic",
        "topic_id",
        "partition",
        "fetch_offset",
        "fetcher_log_start_offset",
        "max_bytes",
        "current_leader_epoch",
        "high_watermark",
        "log_start_offset",
        "last_fetched_epoch",
    )

    def __init__(
        self,
        topic: str | None,
        topic_id: uuid.UUID,
        partition: int,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int = -1,
        fetcher_log_start_offset: int = -1,
        last_fetched_epoch: int = -1,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.fetcher_log_start_offset = fetcher_log_start_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.high_watermark = -1
        self.log_start_offset = -1

    @property
    def key(self) -> tuple:
        """Topic id and partition when the topic has an id (v13+), else name and partition."""
        return (self.topic_id if self.topic_id != NULL_UUID else self.topic, self.partition)

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.fetcher_log_start_offset = other.fetcher_log_start_offset
        self.last_fetched_epoch = other.last_fetched_epoch

    def must_respond(
        self, error_code: int, high_watermark: int, log_start_offset: int, records_size: int
    ) -> bool:
        """Whether an incremental response must carry this partition; remembers what
        the response tells the fetcher."""
        respond = (
            records_size > 0
            or error_code != 0
            or self.high_watermark != high_watermark
            or self.log_start_offset != log_start_offset
        )
        self.remember(error_code, high_watermark, log_start_offset)
        return respond

    def remember(self, error_code: int, high_watermark: int, log_start_offset: int) -> None:
        """What a response told the fetcher; after an error the high watermark is
        forgotten, so the partition is sent again once the error is gone."""
        self.high_watermark = -1 if error_code != 0 else high_watermark
        self.log_start_offset = log_start_offset

    def __repr__(self) -> str:
        return (
            f"CachedPartition({self.topic or self.topic_id}-{self.partition} @ {self.fetch_offset})"
        )


class FetchSession:
    """A fetcher's partitions between requests; see the module comment for the rules."""

    __slots__ = ("id", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch", "partitions")

    def __init__(
        self, session_id: int, uses_topic_ids: bool, partitions: list[CachedPartition], now_ms: int
    ) -> None:
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.partitions: OrderedDict[tuple, CachedPartition] = OrderedDict(
            (p.key, p) for p in partitions
        )

    def update(self, fetch_data: list[CachedPartition], to_forget: list[tuple]) -> None:
        """Adds the request's new partitions, updates the parameters of those it names
        again, and removes those it forgets."""
        for p in fetch_data:
            cached = self.partitions.get(p.key)
            if cached is None:
                self.partitions[p.key] = p
            else:
                cached.update_request(p)
        for key in to_forget:
            self.partitions.pop(key, None)

    def move_to_end(self, partition: CachedPartition) -> None:
        self.partitions.move_to_end(partition.key)

    def __len__(self) -> int:
        return len(self.partitions)

    def __repr__(self) -> str:
        return f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self.partitions)})"


class FetchSessionCache:
    """The broker's fetch sessions by id, least recently used first."""

    def __init__(
        self, max_slots: int, eviction_ms: int = EVICTION_MS, clock=time.monotonic
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.now_ms()
        self._sessions.move_to_end(session.id)

    def maybe_create(self, partitions: list[CachedPartition], uses_topic_ids: bool) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        now = self.now_ms()
        if len(self._sessions) >= self.max_slots and not self._try_evict(len(partitions), now):
            return INVALID_SESSION_ID
        session_id = random.randint(1, INT32_MAX)
        while session_id in self._sessions:
            session_id = random.randint(1, INT32_MAX)
        self._sessions[session_id] = FetchSession(session_id, uses_topic_ids, partitions, now)
        return session_id

    def _try_evict(self, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            # The smallest session past its protected youth (ties: the lower id goes).
            candidates = [
                s for s in self._sessions.values() if now - s.creation_ms > self.eviction_ms
            ]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (len(s), s.id))
            if size <= len(victim):
                return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True
