"""Time as the broker's decision logic sees it: two clocks and timers (Kafka's ``Time``
and its scheduler), injected so tests drive time instead of sleeping.

- ``milliseconds()``: wall-clock milliseconds since the epoch, for what is stored or
  sent (commit timestamps, expiry deadlines kept in records).
- ``monotonic()``: seconds on a clock that never goes back, for intervals and timeouts.
- ``call_later(delay_s, callback, *args)``: runs ``callback(*args)`` once ``delay_s``
  seconds have passed on the monotonic clock; the returned :class:`Timer` cancels it.
- ``sleep(delay_s)``: waits that long on the same clock.

:class:`SystemTime` is the real one, over the running event loop. :class:`MockTime`
moves only when :meth:`MockTime.advance` is called, and then runs the timers that fell
due, in deadline order (ties in the order they were set), each seeing the clocks at its
own deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...

    def cancelled(self) -> bool: ...


class Time(Protocol):
    def milliseconds(self) -> int: ...

    def monotonic(self) -> float: ...

    def call_later(self, delay_s: float, callback: Callable[..., Any], *args: Any) -> Timer: ...

    async def sleep(self, delay_s: float) -> None: ...


class SystemTime:
    """The real clocks; timers are the running event loop's."""

    def milliseconds(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(
        self, delay_s: float, callback: Callable[..., Any], *args: Any
    ) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay_s), callback, *args)

    async def sleep(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)


SYSTEM_TIME = SystemTime()


class MockTimer:
    __slots__ = ("_cancelled", "args", "callback", "deadline")

    def __init__(
        self, deadline: float, callback: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        self.deadline = deadline
        self.callback = callback
        self.args = args
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled


class MockTime:
    """Clocks that move only by :meth:`advance` (for tests and models).

    Invariant: every timer left in the queue has a deadline after ``monotonic()``,
    except while :meth:`advance` is running them."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_s: float = 1000.0) -> None:
        self._wall_offset_ms = wall_ms - int(monotonic_s * 1000)
        self._now = monotonic_s
        self._timers: list[tuple[float, int, MockTimer]] = []
        self._seq = itertools.count()

    def milliseconds(self) -> int:
        return self._wall_offset_ms + int(round(self._now * 1000))

    def monotonic(self) -> float:
        return self._now

    def call_later(self, delay_s: float, callback: Callable[..., Any], *args: Any) -> MockTimer:
        timer = MockTimer(self._now + max(0.0, delay_s), callback, args)
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        return timer

    async def sleep(self, delay_s: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        self.call_later(delay_s, wake)
        await future

    def pending(self) -> int:
        """Timers set and neither run nor cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled())

    def advance(self, seconds: float = 0.0) -> int:
        """Moves both clocks ``seconds`` forward and runs every timer due by then (a
        timer set by one that runs is run too if it falls due); returns how many ran."""
        if seconds < 0:
            raise ValueError("time does not go back")
        end = self._now + seconds
        ran = 0
        while self._timers and self._timers[0][0] <= end:
            deadline, _, timer = heapq.heappop(self._timers)
            if timer.cancelled():
                continue
            self._now = max(self._now, deadline)
            timer._cancelled = True  # ran: cancelling it now does nothing
            timer.callback(*timer.args)
            ran += 1
        self._now = end
        return ran
