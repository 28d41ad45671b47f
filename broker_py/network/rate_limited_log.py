"""Warnings a client can provoke at will (malformed requests, refused connections,
failed accepts), logged at most once per interval per kind, with the count of the
occurrences the interval held back.

The first occurrence of a kind is logged at once; later ones within ``interval_s`` are
counted, and the next one logged after the interval says how many were held back. So a
client sending 2,000 malformed requests in 0.4 s costs one line, not 2,000, and nothing
said is lost: its count is in the next line of that kind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 10.0


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.interval_s = interval_s
        self._clock = clock
        # kind -> (when it was last logged, occurrences held back since)
        self._kinds: dict[str, tuple[float, int]] = {}

    def log(self, level: int, kind: str, msg: str, *args: object) -> bool:
        """Logs ``msg % args`` unless ``kind`` was logged less than the interval ago (then
        it is counted); True if it was logged."""
        now = self._clock()
        last = self._kinds.get(kind)
        if last is not None and now - last[0] < self.interval_s:
            self._kinds[kind] = (last[0], last[1] + 1)
            return False
        held = last[1] if last is not None else 0
        self._kinds[kind] = (now, 0)
        if held and last is not None:
            msg += " (%d more like it held back in the %.1f s before)"
            args = (*args, held, now - last[0])
        self._logger.log(level, msg, *args)
        if len(self._kinds) > 1024:  # kinds are few; bound them anyway
            self._kinds = {k: v for k, v in self._kinds.items() if now - v[0] < self.interval_s}
        return True

    def warning(self, kind: str, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, kind, msg, *args)

    def held_back(self, kind: str) -> int:
        """Occurrences of ``kind`` counted and not yet reported."""
        return self._kinds.get(kind, (0.0, 0))[1]
