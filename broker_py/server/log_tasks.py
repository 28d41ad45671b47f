"""The broker's periodic log work (what Kafka's LogManager and ReplicaManager schedule):
retention, the expiry of idle producer ids, the log cleaner, and the high watermark
checkpoint.

- Retention runs every ``log.retention.check.interval.ms`` off the event loop, on
  partitions whose ``cleanup.policy`` includes ``delete``, never past the high
  watermark; transaction index entries below the new log start go after it.
- Idle producer ids (``producer.id.expiration.ms``) are forgotten every
  ``producer.id.expiration.check.interval.ms``.
- The cleaner compacts partitions whose policy includes ``compact``.
- Partitions moving to another log dir are left to the move.
- Every ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown, each log
  dir's ``replication-offset-checkpoint`` records its partitions' high watermarks.
- Segment files unused for ``IDLE_FILES_MS`` are closed (opened again on use).
- The renamed (``-delete``) directories of deleted logs are removed
  ``log.segment.delete.delay.ms`` after their deletion, off the event loop
  (:meth:`~broker_py.log.log_manager.LogManager.delete_logs_due`).
"""

from __future__ import annotations

import asyncio
import logging

import logstore
from broker_py.log.log_cleaner_manager import LogCleaner
from broker_py.log.unified_log import UnifiedLog
from broker_py.utils.time import Time
from logstore.protocol.errors import KafkaError, NotLeaderOrFollowerError

log = logging.getLogger(__name__)

IDLE_FILES_CHECK_S = 60.0
IDLE_FILES_MS = 600_000
LOG_DELETION_MIN_WAIT_S = 1.0  # between rounds of the log deletion task, at least


class LogTasks:
    def __init__(self, config, apis, time: Time) -> None:
        self.config = config
        self._apis = apis
        self._time = time
        self.cleaner: LogCleaner | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="log-retention"))
        self._tasks.append(
            asyncio.create_task(self._producer_expiration_loop(), name="producer-expiration")
        )
        self._tasks.append(
            asyncio.create_task(
                self._high_watermark_checkpoint_loop(), name="high-watermark-checkpoint"
            )
        )
        self._tasks.append(asyncio.create_task(self._idle_files_loop(), name="idle-segment-files"))
        self._tasks.append(asyncio.create_task(self._log_deletion_loop(), name="delete-logs"))
        if self.config["log.cleaner.enable"] and self.config["log.cleaner.threads"] > 0:
            self.cleaner = LogCleaner(
                self.config, lambda: [p.log for p in self.partitions_with_policy("compact")]
            )
            self._tasks.append(asyncio.create_task(self.cleaner.run(), name="log-cleaner"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self._apis.replica_manager.checkpoint_high_watermarks()

    async def _idle_files_loop(self) -> None:
        """Every IDLE_FILES_CHECK_S, closes the segment files unused for IDLE_FILES_MS
        (they open again on their next use; ``rust/src/file_cache.rs``)."""
        while True:
            await self._time.sleep(IDLE_FILES_CHECK_S)
            closed = await asyncio.to_thread(logstore.close_idle_files, IDLE_FILES_MS)
            if closed:
                log.debug("closed %d idle segment files", closed)

    async def _log_deletion_loop(self) -> None:
        """Removes the directories of deleted logs once ``log.segment.delete.delay.ms``
        has passed (Kafka's "kafka-delete-logs" task): sleeps until the oldest is due
        (a whole delay when none is pending), at least LOG_DELETION_MIN_WAIT_S."""
        log_manager = self._apis.replica_manager.log_manager
        while True:
            delay_ms = self.config["log.segment.delete.delay.ms"]
            try:
                await log_manager.delete_logs_due(delay_ms)
            except Exception:
                log.exception("deleting logs")
            wait_ms = log_manager.next_deletion_in_ms(delay_ms)
            wait_s = (delay_ms if wait_ms is None else wait_ms) / 1000
            await self._time.sleep(max(wait_s, LOG_DELETION_MIN_WAIT_S))

    async def _high_watermark_checkpoint_loop(self) -> None:
        interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        while True:
            await self._time.sleep(interval)
            replica_manager = self._apis.replica_manager
            await asyncio.to_thread(
                replica_manager.checkpoint_high_watermarks, replica_manager.high_watermarks_by_dir()
            )

    def partitions_with_policy(self, policy: str) -> list:
        """Partitions the cleaner or retention may work on: not those moving to another dir."""
        mover = self._apis.replica_manager.log_dir_mover
        log_configs = self._apis.log_config_manager
        return [
            p
            for p in self._apis.replica_manager.online_partitions()
            if not mover.moving(p.topic, p.index) and policy in log_configs.cleanup_policy(p.topic)
        ]

    def enforce_retention(self) -> int:
        """Time and size retention, for topics whose cleanup.policy includes delete."""
        deleted = 0
        for p in self.partitions_with_policy("delete"):
            plog: UnifiedLog = p.log
            try:
                deleted += plog.enforce_retention(max_offset=p.high_watermark)
            except NotLeaderOrFollowerError:
                continue  # deleted, or reopened by a move, meanwhile
        return deleted

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await self._time.sleep(interval)
            try:
                deleted = await asyncio.to_thread(self.enforce_retention)
                if deleted:
                    log.info("retention deleted %d segments", deleted)
                for p in self._apis.replica_manager.online_partitions():
                    p.log.delete_aborted_before_log_start()
            except KafkaError:
                log.exception("retention check")

    async def _producer_expiration_loop(self) -> None:
        """Every ``producer.id.expiration.check.interval.ms``, forgets the idempotent
        producers of every partition idle for ``producer.id.expiration.ms``."""
        while True:
            await self._time.sleep(self.config["producer.id.expiration.check.interval.ms"] / 1000)
            now = self._time.milliseconds()
            expiration_ms = self.config["producer.id.expiration.ms"]
            partitions = self._apis.replica_manager.online_partitions()
            removed = sum(
                p.log.producer_state.remove_expired(now, expiration_ms) for p in partitions
            )
            if removed:
                log.info("expired %d idle producer ids", removed)
