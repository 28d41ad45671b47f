"""Per-element work over a request's arrays, in steps that let the event loop serve
others: a request may honestly name a million distinct topics or groups, and answering
each costs microseconds of Python.

``for_each(items, fn, then)`` calls ``fn(item)`` for every item and returns ``then()``:
at once for at most ``STEP`` items, else as a coroutine that yields the loop after every
``STEP`` items (a handler may return either). State read by ``fn`` may change between
steps, as it may between two requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
STEP = 5_000


def for_each(items: Sequence[Any], fn: Callable[[Any], None], then: Callable[[], T]) -> T | Any:
    if len(items) <= STEP:
        for item in items:
            fn(item)
        return then()
    return _in_steps(items, fn, then)


async def _in_steps(items: Sequence[Any], fn: Callable[[Any], None], then: Callable[[], T]) -> T:
    for start in range(0, len(items), STEP):
        for item in items[start : start + STEP]:
            fn(item)
        await asyncio.sleep(0)
    return then()
