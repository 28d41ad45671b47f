"""Reading the broker's state from the metrics HTTP thread.

prometheus-client serves scrapes on a thread of its own, while every broker object
belongs to the asyncio event loop. A collector never reads them from that thread: it
asks the loop to build a snapshot (plain values) with :func:`call_on_loop` and waits
for it, so a scrape sees one consistent state and the loop needs no locks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class LoopUnavailable(Exception):
    """The event loop did not answer in time (stopped, or blocked)."""


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout: float = 5.0) -> T:
    """``fn()`` run on ``loop``'s thread; its exception is raised here."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the waiting thread
            future.set_exception(exc)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError as exc:  # the loop is closed
        raise LoopUnavailable(str(exc)) from None
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise LoopUnavailable(f"no answer from the event loop within {timeout}s") from None
