"""A fetch waiting for ``min_bytes`` (Kafka's ``DelayedFetch``).

The replica manager checks the fetch each time one of its partitions is appended to
(at most once per event-loop turn for any number of appends) by reading its partitions
again through :meth:`ReplicaManager.read_from_local_log`, which sees each partition as
it is now: its high watermark or log end, its leadership and leader epoch, the bytes
past the fetch offset. The fetch completes with that read once it holds ``min_bytes``
or none of its partitions is held here any longer, and with one last read when
``max_wait_ms`` passes or its partitions go away. Reads are whole: the response is the
last read made, never a mix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_py.replication.fetch_data import (
    FetchInfo,
    FetchParams,
    FetchPartitionData,
    LogReadResult,
)
from broker_py.replication.purgatory import DelayedOperation

if TYPE_CHECKING:
    from broker_py.replication.replica_manager import ReplicaManager


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        manager: ReplicaManager,
        params: FetchParams,
        infos: list[FetchInfo],
        response_callback: Callable[[list[FetchPartitionData]], None],
    ) -> None:
        super().__init__(params.max_wait_ms)
        self._manager = manager
        self.params = params
        self.infos = infos
        self._response_callback = response_callback
        self._response: list[FetchPartitionData] | None = None

    def _read(self) -> LogReadResult:
        return self._manager.read_from_local_log(self.params, self.infos)

    def try_complete(self) -> bool:
        result = self._read()
        if result.bytes_read >= self.params.min_bytes or not result.partitions:
            self._response = result.reads
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self._response is None:  # expired, or its partitions went away: read once more
            self._response = self._read().reads
        self._response_callback(self._response)
