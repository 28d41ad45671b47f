"""The broker's log cleaner (Kafka's ``LogCleaner``): background compaction.

Every ``log.cleaner.backoff.ms``, the partitions whose ``cleanup.policy`` includes
``compact`` are handed to ``log.cleaner.threads`` workers. A worker runs one pass
(``logstore.Log.clean``, in Rust, GIL released) on a thread of the cleaner's own
pool, so the event loop never waits on it and no two workers clean the same
partition. Each pass gets an equal share of ``log.cleaner.dedupe.buffer.size`` for
its offset map; all passes share one ``log.cleaner.io.max.bytes.per.second``
throttler. Changed values (dynamic broker configs) apply from the next round.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import logstore
from broker_py.log.unified_log import UnifiedLog

log = logging.getLogger(__name__)


class LogCleaner:
    def __init__(self, config: Any, partitions: Callable[[], list[UnifiedLog]]) -> None:
        self._config = config
        self._partitions = partitions
        self._executor: ThreadPoolExecutor | None = None
        self._rate: float | None = None
        self.threads = 0
        self.passes = 0
        self.reconfigure()

    def reconfigure(self) -> None:
        """Takes up the current ``log.cleaner.*`` values (they may change at runtime
        as dynamic broker configs); runs between rounds, never during a pass."""
        config = self._config
        threads = max(1, config["log.cleaner.threads"])
        if threads != self.threads:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            self._executor = ThreadPoolExecutor(threads, thread_name_prefix="log-cleaner")
            self.threads = threads
        self.backoff_s = config["log.cleaner.backoff.ms"] / 1000
        self.dedupe_buffer_size = config["log.cleaner.dedupe.buffer.size"] // self.threads
        rate = config["log.cleaner.io.max.bytes.per.second"]
        if rate != self._rate:
            self.throttler = logstore.Throttler(rate)
            self._rate = rate

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.backoff_s)
            self.reconfigure()
            await self.clean_round()

    async def clean_round(self) -> None:
        """One pass over every compacted partition, ``threads`` at a time."""
        queue = list(self._partitions())

        async def worker() -> None:
            while queue:
                await self._clean(queue.pop(0))

        await asyncio.gather(*(worker() for _ in range(min(self.threads, len(queue)))))

    async def _clean(self, partition: UnifiedLog) -> None:
        clean = functools.partial(
            partition.local_log.clean,
            dedupe_buffer_size=self.dedupe_buffer_size,
            throttler=self.throttler,
        )
        try:
            stats = await asyncio.get_running_loop().run_in_executor(self._executor, clean)
        except logstore.LogClosedError:
            return  # the topic was deleted meanwhile
        except logstore.LogStoreError:
            log.exception("cleaning %s-%d", partition.topic, partition.index)
            return
        self.passes += 1
        if stats["segments_cleaned"]:
            log.info("cleaned %s-%d: %s", partition.topic, partition.index, stats)

    def shutdown(self) -> None:
        """Stops taking work; a pass still running stops at its next chunk once the
        broker closes its log (its .cleaned files go on the next open)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
