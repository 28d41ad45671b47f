"""Bounded waiting: poll a predicate until it holds, fail naming what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    """Polls ``predicate`` every ``interval`` seconds until it returns something truthy
    and returns that; raises AssertionError naming ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
