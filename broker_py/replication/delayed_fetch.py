"""A fetch waiting for ``min_bytes`` (Kafka's ``DelayedFetch``).

The fetch is read again each time one of its partitions is appended to; it completes
with that read once the read holds ``min_bytes`` or none of its partitions can be read
any longer, and with one last read when ``max_wait_ms`` passes. Reads are whole: the
response is the last read made, never a mix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_py.replication.purgatory import DelayedOperation

# (the response of one read, bytes it found, partitions it read)
FetchRead = tuple[Any, int, list]


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        max_wait_ms: int,
        min_bytes: int,
        read: Callable[[], FetchRead],
        response_callback: Callable[[Any], None],
    ) -> None:
        super().__init__(max_wait_ms)
        self.min_bytes = min_bytes
        self._read = read
        self._response_callback = response_callback
        self._response: Any = None

    def try_complete(self) -> bool:
        response, total, touched = self._read()
        if total >= self.min_bytes or not touched:
            self._response = response
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self._response is None:  # expired, or its partitions went away: read once more
            self._response = self._read()[0]
        self._response_callback(self._response)
