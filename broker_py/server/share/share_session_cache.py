"""Share sessions (KIP-932; Kafka's ``ShareSessionCache`` and the session rules of
``SharePartitionManager.newContext``), sans-IO.

A share session belongs to one member of one share group on this broker, keyed by
(group id, member id). It holds the partitions the member fetches here and its epoch:

- ShareFetch with ``share_session_epoch`` 0 opens a session (replacing one the member
  had: the old one's partitions are returned so their records can be released) with the
  request's partitions; the next request must carry epoch 1;
- ShareFetch with epoch ``n`` > 0 must find the session (SHARE_SESSION_NOT_FOUND) at
  epoch ``n`` (INVALID_SHARE_SESSION_EPOCH); it adds its partitions, drops the forgotten
  ones, and the session moves to ``n + 1`` (wrapping from 2^31-1 to 1);
- epoch -1 closes the session after its acknowledgements: it must exist
  (SHARE_SESSION_NOT_FOUND), and a ShareFetch closing it must name no partition to fetch
  (INVALID_REQUEST);
- ShareAcknowledge carries the session's epoch too (0 is INVALID_SHARE_SESSION_EPOCH) and
  moves it on as a fetch does; -1 closes the session;
- an initial ShareFetch carrying acknowledgements is INVALID_REQUEST.

The cache holds at most ``max_sessions`` sessions. When full, a new session replaces the
least recently used one idle for at least ``evict_idle_ms`` (its partitions are returned
to be released, as a session closing); otherwise it is refused with
SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from logstore.protocol.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

# (topic id, partition index)
TopicIdPartition = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int
    last_used_ms: int
    # insertion-ordered set of the partitions the member fetches here
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """What a request did to its session: an error (nothing changed), the session's
    partitions to fetch now, and the partitions whose records the member's leaving
    session frees (a replaced, evicted or closed session)."""

    error: ErrorCode
    partitions: tuple[TopicIdPartition, ...] = ()
    released: tuple[tuple[SessionKey, tuple[TopicIdPartition, ...]], ...] = ()
    closing: bool = False


class ShareSessionCache:
    def __init__(self, max_sessions: int, evict_idle_ms: int) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self.evict_idle_ms = evict_idle_ms
        # least recently used first
        self._sessions: OrderedDict[SessionKey, ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def fetch(
        self,
        key: SessionKey,
        epoch: int,
        partitions: list[TopicIdPartition],
        forgotten: list[TopicIdPartition],
        has_acknowledgements: bool,
        now_ms: int,
    ) -> SessionUpdate:
        """A ShareFetch's session update (see the module)."""
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return SessionUpdate(ErrorCode.INVALID_REQUEST)
            released: list[tuple[SessionKey, tuple[TopicIdPartition, ...]]] = []
            old = self._sessions.pop(key, None)
            if old is not None:
                released.append((key, tuple(old.partitions)))
            if len(self._sessions) >= self.max_sessions:
                evicted = self._evict(now_ms)
                if evicted is None:
                    return SessionUpdate(ErrorCode.SHARE_SESSION_LIMIT_REACHED, (), tuple(released))
                released.append((evicted.key, tuple(evicted.partitions)))
            session = ShareSession(key, 1, now_ms, dict.fromkeys(partitions))
            self._sessions[key] = session
            return SessionUpdate(ErrorCode.NONE, tuple(session.partitions), tuple(released))
        found = self._sessions.get(key)
        if found is None:
            return SessionUpdate(ErrorCode.SHARE_SESSION_NOT_FOUND)
        session = found
        if epoch == FINAL_EPOCH:
            if partitions:
                return SessionUpdate(ErrorCode.INVALID_REQUEST)
            return SessionUpdate(ErrorCode.NONE, tuple(session.partitions), closing=True)
        if epoch != session.epoch:
            return SessionUpdate(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        for tp in partitions:
            session.partitions[tp] = None
        for tp in forgotten:
            session.partitions.pop(tp, None)
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return SessionUpdate(ErrorCode.NONE, tuple(session.partitions))

    def acknowledge(self, key: SessionKey, epoch: int, now_ms: int) -> SessionUpdate:
        """A ShareAcknowledge's session update."""
        if epoch == INITIAL_EPOCH:
            return SessionUpdate(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session = self._sessions.get(key)
        if session is None:
            return SessionUpdate(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return SessionUpdate(ErrorCode.NONE, tuple(session.partitions), closing=True)
        if epoch != session.epoch:
            return SessionUpdate(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return SessionUpdate(ErrorCode.NONE, tuple(session.partitions))

    def close(self, key: SessionKey) -> tuple[TopicIdPartition, ...]:
        """Drop a session; its partitions (whose records the member held) or ()."""
        session = self._sessions.pop(key, None)
        return () if session is None else tuple(session.partitions)

    def _touch(self, session: ShareSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session.key)

    def _evict(self, now_ms: int) -> ShareSession | None:
        for key, session in self._sessions.items():
            if now_ms - session.last_used_ms >= self.evict_idle_ms:
                del self._sessions[key]
                return session
            return None  # least recently used first: the others are younger
        return None
