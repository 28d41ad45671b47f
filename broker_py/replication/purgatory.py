"""Requests that wait for a condition (Kafka's ``DelayedOperation`` and
``DelayedOperationPurgatory``).

A :class:`DelayedOperation` completes exactly once: when :meth:`try_complete` finds
its condition met (then :meth:`on_complete` runs), or when its timeout passes first
(then :meth:`on_expiration` and :meth:`on_complete` run). The purgatory watches each
operation under keys (a partition, here) and, when something changes under a key,
:meth:`DelayedOperationPurgatory.check_and_complete` asks that key's operations to try
again. Timeouts run on the injected :class:`~broker_py.utils.time.Time`: the operations
of one delay expire in the order they were watched (their deadlines are the watch time
plus the delay), so they wait in one queue per delay with one timer, set for the first
deadline still pending, instead of a timer each that is set and cancelled per operation
(a follower's fetch parks and completes about once per append). An operation completed
early leaves its queue entry empty; entries are dropped as the timer passes them.

Invariants: an operation is completed once (``completed`` turns True before
``on_complete`` runs); an operation the purgatory completes (its condition met under
one key, its timeout, or :meth:`complete_all`) leaves the watch lists of all its keys
at once, so a fetch watching many partitions is not kept, with its response, under
the partitions that never changed (each key's operations are kept in insertion order,
keyed by identity, so that removal is O(1)).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from broker_py.utils.time import SYSTEM_TIME, Time, Timer

# How early a deadline may be passed to its timer (the event loop's timers may run up
# to its clock's resolution early).
_EARLY_S = 1e-6


class DelayedOperation:
    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.completed = False
        # [deadline, this operation] in its delay's expiry queue; the operation is
        # cleared from it when it completes.
        self._entry: list[Any] | None = None
        self._keys: list[Hashable] = []

    def try_complete(self) -> bool:
        """Checks the condition and, if met, calls :meth:`force_complete`; returns
        whether the operation is complete."""
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Runs before :meth:`on_complete` when the timeout passed first."""

    def force_complete(self) -> bool:
        """Completes the operation now; False if it was already complete."""
        if self.completed:
            return False
        self.completed = True
        entry = self._entry
        if entry is not None:
            entry[1] = None
            self._entry = None
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._entry = None
        if not self.completed:
            self.on_expiration()
            self.force_complete()


class DelayedOperationPurgatory:
    def __init__(self, name: str, time: Time = SYSTEM_TIME) -> None:
        self.name = name
        self._time = time
        # key -> the operations watching it, by identity (read by the appends that notify it)
        self.watchers: dict[Hashable, dict[int, DelayedOperation]] = {}
        # delay_ms -> its expiry queue
        self._expiries: dict[int, _Expiry] = {}

    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> bool:
        """Completes ``operation`` if it can be now; otherwise watches it under
        ``keys`` and starts its timeout. True if it completed now."""
        if operation.try_complete():
            return True
        self.watch(operation, keys)
        return False

    def watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Watches ``operation`` under ``keys`` and starts its timeout, without trying
        it first (the caller just found its condition unmet, and nothing could change
        it since: appends run on the same event loop)."""
        keys = list(dict.fromkeys(keys))
        operation._keys = keys
        for key in keys:
            self.watchers.setdefault(key, {})[id(operation)] = operation
        delay_ms = max(0, operation.delay_ms)
        expiry = self._expiries.get(delay_ms)
        if expiry is None:
            expiry = self._expiries[delay_ms] = _Expiry()
        now = self._time.monotonic()
        entry = [now + delay_ms / 1000, operation]
        operation._entry = entry
        entries = expiry.entries
        entries.append(entry)
        if expiry.timer is None:
            expiry.timer = self._time.call_later(entries[0][0] - now, self._expire_due, expiry)

    def _expire_due(self, expiry: _Expiry) -> None:
        """Expires the operations of ``expiry`` whose deadline passed, then sets its timer
        for the first one still pending."""
        expiry.timer = None
        entries = expiry.entries
        while entries:
            deadline, operation = entries[0]
            if operation is None:
                entries.popleft()
                continue
            now = self._time.monotonic()
            if deadline > now + _EARLY_S:
                break
            entries.popleft()
            operation._expire()
            self._unwatch(operation)
        if entries and expiry.timer is None:
            expiry.timer = self._time.call_later(
                entries[0][0] - self._time.monotonic(), self._expire_due, expiry
            )

    def _unwatch(self, operation: DelayedOperation) -> None:
        """Removes a completed operation from the watch list of every key it had."""
        for key in operation._keys:
            ops = self.watchers.get(key)
            if ops is not None:
                ops.pop(id(operation), None)
                if not ops:
                    del self.watchers[key]
        operation._keys = []

    def check_and_complete(
        self, key: Hashable, only: Callable[[DelayedOperation], bool] | None = None
    ) -> int:
        """Asks the operations watching ``key`` (those ``only`` accepts, if given) to try
        again; returns how many completed."""
        ops = self.watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops.values()):
            if op.completed:
                self._unwatch(op)  # completed outside the purgatory
            elif only is not None and not only(op):
                continue
            elif op.try_complete():
                done += 1
                self._unwatch(op)
        return done

    def complete_all(self, key: Hashable) -> int:
        """Completes every operation watching ``key`` now (leadership lost, partition
        gone): each tries first, so it answers what it finds (NOT_LEADER_OR_FOLLOWER,
        a last read), and is forced complete if it still would wait."""
        ops = list(self.watchers.get(key, {}).values())
        done = 0
        for op in ops:
            if not op.completed and (op.try_complete() or op.force_complete()):
                done += 1
            self._unwatch(op)
        return done

    def watching(self, key: Hashable) -> bool:
        """Whether any operation watches ``key`` (cheap: checked on every append)."""
        return key in self.watchers

    def watched(self) -> int:
        """Operations still waiting (not completed), counted once each."""
        return len(
            {id(op) for ops in self.watchers.values() for op in ops.values() if not op.completed}
        )

    def watch_entries(self) -> int:
        """Watch-list entries held (an operation counts once per key it watches)."""
        return sum(len(ops) for ops in self.watchers.values())

    def shutdown(self) -> None:
        for key in list(self.watchers):
            self.complete_all(key)
        for expiry in self._expiries.values():
            if expiry.timer is not None:
                expiry.timer.cancel()
                expiry.timer = None
            expiry.entries.clear()


class _Expiry:
    """The operations of one delay in deadline order ([deadline, operation or None once
    completed]), and the timer set for the first deadline, if any."""

    __slots__ = ("entries", "timer")

    def __init__(self) -> None:
        self.entries: collections.deque[list[Any]] = collections.deque()
        self.timer: Timer | None = None
