"""A response a handler gives later by a callback, without a task (a follower's parked
Fetch).

A handler that must wait may return a coroutine (run as a task) or a
:class:`PendingResponse`, on which it later calls :meth:`PendingResponse.complete` with a
function building the response. The connection's request channel then encodes and
sends that response at once, in the same event-loop turn, instead of waking a task in
the next one. Invariants: the response is built and sent at most once; after
:meth:`cancel` (the connection was lost) :meth:`complete` does nothing; the channel
handles no other request of the connection until the response is sent, as with a task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PendingResponse:
    __slots__ = ("_build", "_cancelled", "_on_complete", "done")

    def __init__(self) -> None:
        self._on_complete: Callable[[Callable[[], Any]], None] | None = None
        self._build: Callable[[], Any] | None = None  # completed before on_complete
        self._cancelled = False
        self.done = False

    def on_complete(self, callback: Callable[[Callable[[], Any]], None]) -> None:
        """Set by the request channel: ``callback(build)`` sends what ``build()`` returns
        (at once if the response was completed already)."""
        if self._cancelled:
            return
        build, self._build = self._build, None
        if build is not None:
            callback(build)
        else:
            self._on_complete = callback

    def complete(self, build: Callable[[], Any]) -> None:
        """The response is ready: ``build()`` returns it (called once, by the channel)."""
        if self.done:
            return
        self.done = True
        callback, self._on_complete = self._on_complete, None
        if callback is not None:
            callback(build)
        elif not self._cancelled:
            self._build = build

    def cancel(self) -> None:
        """Nothing is sent any more (the connection is gone)."""
        self.done = self._cancelled = True
        self._on_complete = self._build = None
