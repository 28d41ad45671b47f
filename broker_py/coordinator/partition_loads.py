"""The load and unload operations of a coordinator's partitions (Kafka's
``CoordinatorRuntime.scheduleLoadOperation`` / ``scheduleUnloadOperation``), shared by
the group coordinator (``__consumer_offsets``) and the share coordinator
(``__share_group_state``).

A partition of the coordinator's internal topic is, on this broker, in one of three
states:

- owned: its state is loaded and served (what owning means is the coordinator's:
  ``owned(p)``);
- loading: this broker leads it and its log is being replayed (``p in loading``);
  requests for it get COORDINATOR_LOAD_IN_PROGRESS;
- neither: another broker leads it; requests get NOT_COORDINATOR.

Invariants:

- An election starts at most one load of a partition: none while it is owned or
  loading. An empty partition (log start = log end) is owned at once
  (``own_empty(p)``), without a load.
- A load runs as a task of the event loop; a resignation takes the partition out of
  ``loading`` and cancels its task, and a load that finds its partition no longer in
  ``loading`` after reading the log (:meth:`read`) keeps nothing of it.
- A load that raises is logged and leaves the partition neither owned nor loading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.coordinator.partition_writer import KeyedRecords, PartitionWriter

log = logging.getLogger(__name__)


class PartitionLoads:
    def __init__(
        self,
        topic: str,
        writer: PartitionWriter,
        load: Callable[[int], Awaitable[None]],
        owned: Callable[[int], bool],
        own_empty: Callable[[int], None],
    ) -> None:
        """``load(p)``: replays partition ``p``'s log (it calls :meth:`read`, then owns
        the partition and takes it out of ``loading``); ``owned(p)``: the coordinator
        serves ``p``; ``own_empty(p)``: it owns the empty partition ``p``."""
        self.topic = topic
        self._writer = writer
        self._load = load
        self._owned = owned
        self._own_empty = own_empty
        self.loading: set[int] = set()
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def led_partitions(self) -> list[int]:
        """The partitions of the topic this broker leads now (none before it exists)."""
        topic = self._writer.topic(self.topic)
        if topic is None:
            return []
        return [
            p
            for p in range(topic.partitions)
            if (part := self._writer.partition((self.topic, p))) is not None and part.is_leader
        ]

    def coordinator_error(self, p: int) -> ErrorCode | None:
        """COORDINATOR_LOAD_IN_PROGRESS while ``p`` loads, None once it is owned, else
        NOT_COORDINATOR."""
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None if self._owned(p) else ErrorCode.NOT_COORDINATOR

    def on_election(self, p: int) -> None:
        """This broker now leads partition ``p``: its state loads (at once when the
        partition is empty)."""
        if self._owned(p) or p in self.loading:
            return
        partition = self._writer.partition((self.topic, p))
        if partition is None or not partition.is_leader:
            return
        if partition.log_end_offset == partition.log_start_offset:
            self._own_empty(p)
            return
        self.loading.add(p)
        self.tasks[p] = asyncio.get_running_loop().create_task(
            self._load_in_background(p), name=f"load-{self.topic}-{p}"
        )

    async def _load_in_background(self, p: int) -> None:
        try:
            await self._load(p)
        except Exception:
            log.exception("loading %s-%d", self.topic, p)
            self.loading.discard(p)
        finally:
            # A resignation and a new election may have started another load meanwhile.
            if self.tasks.get(p) is asyncio.current_task():
                del self.tasks[p]

    async def read(
        self, p: int, buffer_bytes: int
    ) -> tuple[KeyedRecords, dict[int, KeyedRecords]] | None:
        """The start of a load of ``p``: it is put in ``loading`` and its log read start to
        end, as (records, open transactions' records by producer id); None when the
        partition is not open or was resigned while it was read."""
        self.loading.add(p)
        if self._writer.partition((self.topic, p)) is None:
            log.warning("%s-%d is not open; its state is not loaded", self.topic, p)
            self.loading.discard(p)
            return None
        records, open_txns = await self._writer.read_keyed_records((self.topic, p), buffer_bytes)
        if p not in self.loading:
            return None  # resigned meanwhile
        return records, open_txns

    def on_resignation(self, p: int) -> None:
        """This broker no longer leads partition ``p``: a load of it stops (the
        coordinator drops what it owned of ``p``)."""
        self.loading.discard(p)
        task = self.tasks.pop(p, None)
        if task is not None:
            task.cancel()

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancels every load under way (the coordinator stops); returns their tasks."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        self.tasks.clear()
        return tasks
