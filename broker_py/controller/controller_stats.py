"""The controller's event timers (Kafka's ``ControllerStats``).

Kafka times each controller event by its ``ControllerState``; the BrokerChange state's
timer keeps its pre-KIP-143 name, ``LeaderElectionRateAndTimeMs``: every broker change
(a broker registered, gone or bounced) the active controller handled, with the time it
took, offline partitions' leader elections included. This class keeps that timer:

- ``count``: broker changes handled while active, since the process started;
- ``sum_ms``: their total handling time in milliseconds;
- ``recent_ms()``: the last :data:`RESERVOIR` handling times, for quantiles.

Written by the thread that drives the controller, read by the metrics scrape on
another: a lock guards the reservoir (events are rare, so it costs nothing).
"""

from __future__ import annotations

import collections
import threading

from broker_py.controller import controller_events as ev

RESERVOIR = 1028


class ControllerStats:
    def __init__(self) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self._recent: collections.deque[float] = collections.deque(maxlen=RESERVOIR)
        self._lock = threading.Lock()

    def record(self, event: object, seconds: float, active: bool) -> None:
        """Counts ``event`` when it is a broker change handled by the active controller."""
        if not active or type(event) is not ev.BrokerChange:
            return
        ms = seconds * 1000.0
        with self._lock:
            self.count += 1
            self.sum_ms += ms
            self._recent.append(ms)

    def snapshot(self) -> tuple[int, float, list[float]]:
        """(count, sum in ms, the recent times in ms, sorted)."""
        with self._lock:
            return self.count, self.sum_ms, sorted(self._recent)
