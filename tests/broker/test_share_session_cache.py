"""Share sessions (KIP-932's ShareSessionCache), sans-IO: the rules per request, and a
hypothesis model of several members' fetches, acknowledgements and closes against a
bounded cache."""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker_py.server.share.share_session_cache import ShareSessionCache, next_epoch
from logstore.protocol.error_codes import ErrorCode

T = uuid.UUID(int=1)
KEY = ("g", "m")


def test_epoch_zero_opens_and_the_epochs_follow() -> None:
    cache = ShareSessionCache(10, 1000)
    opened = cache.fetch(KEY, 0, [(T, 0)], [], False, 0)
    assert opened.error == ErrorCode.NONE and opened.partitions == ((T, 0),)
    assert cache.fetch(KEY, 2, [], [], False, 1).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    more = cache.fetch(KEY, 1, [(T, 1)], [(T, 0)], True, 2)
    assert more.error == ErrorCode.NONE and more.partitions == ((T, 1),)
    assert cache.acknowledge(KEY, 2, 3).error == ErrorCode.NONE
    assert cache.get(KEY).epoch == 3
    closing = cache.acknowledge(KEY, -1, 4)
    assert closing.closing and closing.partitions == ((T, 1),)
    assert cache.close(KEY) == ((T, 1),)
    assert cache.fetch(KEY, 3, [], [], False, 5).error == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_request_errors() -> None:
    cache = ShareSessionCache(10, 1000)
    assert cache.fetch(KEY, 0, [(T, 0)], [], True, 0).error == ErrorCode.INVALID_REQUEST
    assert cache.fetch(KEY, -1, [], [], False, 0).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge(KEY, 0, 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge(KEY, 1, 0).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    cache.fetch(KEY, 0, [(T, 0)], [], False, 0)
    assert cache.fetch(KEY, -1, [(T, 0)], [], False, 0).error == ErrorCode.INVALID_REQUEST
    closing = cache.fetch(KEY, -1, [], [], True, 0)
    assert closing.error == ErrorCode.NONE and closing.closing


def test_reopening_releases_the_old_session_and_the_bound() -> None:
    cache = ShareSessionCache(2, 1000)
    cache.fetch(("g", "a"), 0, [(T, 0)], [], False, 0)
    again = cache.fetch(("g", "a"), 0, [(T, 1)], [], False, 10)
    assert again.released == ((("g", "a"), ((T, 0),)),)
    cache.fetch(("g", "b"), 0, [(T, 0)], [], False, 20)
    full = cache.fetch(("g", "c"), 0, [(T, 0)], [], False, 500)
    assert full.error == ErrorCode.SHARE_SESSION_LIMIT_REACHED and len(cache) == 2
    # The least recently used session, idle long enough, makes room.
    evicting = cache.fetch(("g", "c"), 0, [(T, 2)], [], False, 1010)
    assert evicting.error == ErrorCode.NONE
    assert evicting.released == ((("g", "a"), ((T, 1),)),)
    assert cache.get(("g", "a")) is None and len(cache) == 2


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(1) == 2


MEMBERS = [("g", "a"), ("g", "b"), ("h", "a")]
PARTITIONS = [(T, 0), (T, 1), (uuid.UUID(int=2), 0)]


class Sessions(RuleBasedStateMachine):
    """Against a model: per key, its epoch and partitions; the cache never over its bound
    and every partition a session loses is handed back exactly once."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = ShareSessionCache(2, 100)
        self.now = 0
        self.model: dict[tuple[str, str], tuple[int, set]] = {}

    def _released(self, update) -> None:
        for key, partitions in update.released:
            assert set(partitions) == self.model.pop(key)[1]

    @rule(
        key=st.sampled_from(MEMBERS),
        epoch=st.integers(-1, 4),
        add=st.lists(st.sampled_from(PARTITIONS), max_size=2),
        forget=st.lists(st.sampled_from(PARTITIONS), max_size=2),
        acks=st.booleans(),
        wait=st.integers(0, 150),
    )
    def fetch(self, key, epoch, add, forget, acks, wait) -> None:
        self.now += wait
        update = self.cache.fetch(key, epoch, add, forget, acks, self.now)
        held = self.model.get(key)
        if epoch == 0:
            if acks:
                assert update.error == ErrorCode.INVALID_REQUEST
                return
            self._released(update)
            if update.error == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
                assert len(self.model) == 2
                return
            assert update.error == ErrorCode.NONE
            self.model[key] = (1, set(add))
        elif held is None:
            assert update.error == ErrorCode.SHARE_SESSION_NOT_FOUND
        elif epoch == -1:
            if add:
                assert update.error == ErrorCode.INVALID_REQUEST
            else:
                assert update.closing and set(update.partitions) == held[1]
                assert set(self.cache.close(key)) == held[1]
                del self.model[key]
        elif epoch != held[0]:
            assert update.error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        else:
            partitions = (held[1] | set(add)) - set(forget)
            assert update.error == ErrorCode.NONE and set(update.partitions) == partitions
            self.model[key] = (epoch + 1, partitions)

    @rule(key=st.sampled_from(MEMBERS), epoch=st.integers(-1, 4))
    def acknowledge(self, key, epoch) -> None:
        update = self.cache.acknowledge(key, epoch, self.now)
        held = self.model.get(key)
        if epoch == 0:
            assert update.error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        elif held is None:
            assert update.error == ErrorCode.SHARE_SESSION_NOT_FOUND
        elif epoch == -1:
            assert update.closing and set(self.cache.close(key)) == held[1]
            del self.model[key]
        elif epoch != held[0]:
            assert update.error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        else:
            assert update.error == ErrorCode.NONE
            self.model[key] = (epoch + 1, held[1])

    @invariant()
    def agrees(self) -> None:
        assert len(self.cache) == len(self.model) <= 2
        for key, (epoch, partitions) in self.model.items():
            session = self.cache.get(key)
            assert session is not None
            assert session.epoch == epoch and set(session.partitions) == partitions


TestSessions = Sessions.TestCase
TestSessions.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
