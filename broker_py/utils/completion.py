"""A result delivered through a callback, now or later (what Kafka's response
callbacks give their caller): pass the :class:`Completion` as the callback, then
:meth:`Completion.result` is the value when the callback already ran, or else a future
the callback completes. A callback that runs before anyone asks costs no future and no
trip through the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Completion:
    __slots__ = ("_done", "_future", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._future: asyncio.Future[Any] | None = None

    def __call__(self, value: Any) -> None:
        if self._done:
            return
        self._done = True
        self._value = value
        if self._future is not None and not self._future.done():
            self._future.set_result(value)

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        """The value if the callback ran; otherwise an ``asyncio.Future`` of it."""
        if self._done:
            return self._value
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return self._future
