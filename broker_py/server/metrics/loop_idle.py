"""The network processor and request handler idle ratios of a broker whose network
processor and request handlers are one asyncio event loop.

Kafka's two gauges, as the JMX exporter names them, both a fraction in [0, 1]:

- ``kafka_network_socketserver_networkprocessoravgidlepercent``: the share of wall
  time the event loop waited in ``select()`` for sockets or timers, with nothing to
  run (Kafka's processors: the time blocked in their selector's poll). Measured by
  timing each ``select()`` call of the loop's selector;
- ``kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent``: one minus the
  share of wall time spent running request handlers on the loop (their synchronous
  calls and each step of a waiting handler's coroutine: ``RequestMetrics.busy_s``).
  Kafka's handler threads count the time they wait for a request; the loop's handler
  "thread" is waiting whenever it runs no handler.

Both are averaged over the last :data:`WINDOW_S` seconds (Kafka's one-minute meters),
from samples taken every second, the window ending at the scrape. Near 0 the loop is
saturated: requests wait in their connections' queues (see the request queue time).

The selector is timed by putting a wrapper in place of the loop's ``_selector`` (the
attribute every ``SelectorEventLoop`` reads it from) while metrics run; a loop without
one (not a SelectorEventLoop) has no network processor idle ratio.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any

WINDOW_S = 60


class _TimedSelector:
    """A selector that adds the time each ``select()`` blocked to ``owner.waited_s``."""

    def __init__(self, inner: Any, owner: LoopIdle) -> None:
        self._inner = inner
        self._owner = owner

    def select(self, timeout: float | None = None) -> Any:
        clock = self._owner.clock
        started = clock()
        try:
            return self._inner.select(timeout)
        finally:
            self._owner.waited_s += clock() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LoopIdle:
    """Samples (wall clock, loop wait, handler busy time) once a second."""

    def __init__(
        self, handler_busy: Callable[[], float], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.clock = clock
        self.handler_busy = handler_busy
        self.waited_s = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inner: Any = None
        self._samples: collections.deque[tuple[float, float, float]] = collections.deque(
            maxlen=WINDOW_S + 1
        )

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Times ``loop``'s ``select()`` calls (nothing when it has no selector)."""
        inner = getattr(loop, "_selector", None)
        if inner is not None and not isinstance(inner, _TimedSelector):
            self._loop, self._inner = loop, inner
            loop._selector = _TimedSelector(inner, self)  # type: ignore[attr-defined]
        self.sample()

    def uninstall(self) -> None:
        if self._loop is not None:
            self._loop._selector = self._inner  # type: ignore[attr-defined]
            self._loop = self._inner = None

    def sample(self) -> None:
        self._samples.append((self.clock(), self.waited_s, self.handler_busy()))

    def snapshot(self) -> dict[str, float | None]:
        """The two idle ratios over the window ending now (None: not measured)."""
        now, waited, busy = self.clock(), self.waited_s, self.handler_busy()
        if not self._samples:
            return {"network": None, "handler": None}
        then, waited_then, busy_then = self._samples[0]
        wall = now - then
        if wall <= 0:
            return {"network": None, "handler": None}
        return {
            "network": _ratio((waited - waited_then) / wall) if self._inner is not None else None,
            "handler": _ratio(1.0 - (busy - busy_then) / wall),
        }


def _ratio(x: float) -> float:
    return min(1.0, max(0.0, x))
