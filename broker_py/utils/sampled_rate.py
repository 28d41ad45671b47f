"""A windowed rate as Kafka's metrics measure quotas (``SampledStat`` summed by ``Rate``),
sans-IO: every call takes the time in milliseconds.

A rate keeps ``samples`` windows of ``window_ms`` each, used round-robin. A value is added
to the current window; a window is complete once ``window_ms`` has passed since it opened,
and the next value then opens the next window (resetting the one it reuses). A window older
than ``samples x window_ms`` counts as empty.

The rate is the sum over the windows divided by the elapsed time since the oldest window
opened, in seconds, where that elapsed time is never taken as less than ``samples - 1``
whole windows (nor less than 1 ms). So a burst at start-up is spread over the full span
instead of a few milliseconds, and the first values are not reported as a huge rate.

The throttle time of a rate over its bound (``QuotaUtils.throttleTime``, KIP-219) is how long
the client must stay silent for the rate over the same span to fall to the bound:
``(rate - bound) / bound x span``, rounded to whole milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RateConfig:
    """``samples`` windows of ``window_ms`` (Kafka's ``quota.window.num`` and
    ``quota.window.size.seconds`` x 1000, or the replication and controller-mutation
    equivalents)."""

    samples: int = 11
    window_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, got {self.samples}")
        if self.window_ms < 1:
            raise ValueError(f"window_ms must be at least 1, got {self.window_ms}")


@dataclass
class _Window:
    start_ms: int
    total: float = 0.0


@dataclass
class SampledRate:
    """A per-second rate of what :meth:`record` adds, over ``config``'s windows."""

    config: RateConfig = field(default_factory=RateConfig)
    _windows: list[_Window] = field(default_factory=list, init=False, repr=False)
    _current: int = field(default=0, init=False, repr=False)

    def record(self, value: float, now_ms: int) -> None:
        if not self._windows:
            self._windows.append(_Window(now_ms))
        window = self._windows[self._current]
        if now_ms - window.start_ms >= self.config.window_ms:
            self._current = (self._current + 1) % self.config.samples
            if self._current >= len(self._windows):
                self._windows.append(_Window(now_ms))
            else:
                self._windows[self._current] = _Window(now_ms)
            window = self._windows[self._current]
        window.total += value

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.config.samples * self.config.window_ms
        for i, window in enumerate(self._windows):
            if now_ms - window.start_ms >= expire_ms:
                self._windows[i] = _Window(now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the values in the windows still counted at ``now_ms``."""
        self._purge(now_ms)
        return sum(w.total for w in self._windows)

    def span_ms(self, now_ms: int) -> int:
        """The elapsed time the rate divides by: since the oldest window opened, at least
        ``samples - 1`` whole windows, and at least 1 ms."""
        self._purge(now_ms)
        oldest = min((w.start_ms for w in self._windows), default=now_ms)
        elapsed = now_ms - oldest
        whole = elapsed // self.config.window_ms
        floor = self.config.samples - 1
        if whole < floor:
            elapsed += (floor - whole) * self.config.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        return self.total(now_ms) / (self.span_ms(now_ms) / 1000)

    def throttle_time_ms(self, bound: float, now_ms: int) -> int:
        """0 while the rate is within ``bound`` (per second); otherwise how long the client
        must wait for the rate to fall back to it."""
        return throttle_time_ms(self.rate(now_ms), bound, self.span_ms(now_ms))


def throttle_time_ms(rate: float, bound: float, span_ms: int) -> int:
    """``(rate - bound) / bound x span``, rounded; 0 when ``rate <= bound``. A bound of 0
    allows nothing: the whole span."""
    if rate <= bound:
        return 0
    if bound <= 0:
        return span_ms
    return round((rate - bound) / bound * span_ms)
