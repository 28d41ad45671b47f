"""The partition logs of this broker across its ``log.dirs`` (Kafka's LogManager).

Invariants:
- Each partition lives in exactly one log dir, as ``<log dir>/<topic>-<partition>``.
- A new partition goes to the log dir that holds the fewest partitions.
- Every open ``logstore.Log`` is closed cleanly by :meth:`shutdown`, which leaves the
  clean-shutdown marker so the next start needs no recovery.
- A log dir that failed (KIP-112, :meth:`LogManager.handle_log_dir_failure`) is offline
  until the broker restarts: its logs are dropped without a write (the next start
  recovers them) and no log opens or is created in it, nor is a partition whose log is
  there created anew in another dir.
- No partition has a directory in two log dirs: the broker refuses to start on finding
  one (as Kafka does), as either copy may be the one that counts.
- A deleted log (:meth:`LogManager.delete_log`, Kafka's ``asyncDelete``) leaves the
  maps and its name at once: its handles are dropped without a write and its directory
  is renamed ``<topic>-<partition>.<32 hex>-delete`` (the topic cut so the name fits in
  255 bytes), on the event loop, in microseconds. The renamed directory is removed
  ``log.segment.delete.delay.ms`` later by :meth:`LogManager.delete_logs_due`, on a
  worker thread. A ``-delete`` directory never opens as a log: one found at startup is
  scheduled for removal like the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping

import logstore
from broker_py.common.topic import TopicInfo
from broker_py.log import log_dir_mover
from broker_py.log.file_lock import lock_log_dirs
from broker_py.log.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from broker_py.log.partition_metadata_file import (
    partition_metadata_text,
    partition_metadata_topic_id,
)
from broker_py.log.unified_log import UnifiedLog
from broker_py.utils.metadata_file import METADATA_DIR
from logstore.protocol.errors import KafkaError, KafkaStorageError

log = logging.getLogger(__name__)

CLOSE_THREADS = 8
OPEN_CHUNK = 32  # logs opened per worker-thread call by open_new_logs
# Past this many logs recovered at once (open_logs_now), one summary line stands for
# those recoveries that cut nothing instead of a WARNING each.
RECOVERED_LINES = 100
DELETE_BATCH = 16  # renamed log directories removed per delete_logs_due call

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
DELETE_SUFFIX = "-delete"
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")

# Topic configs the storage engine takes at open; the rest are the broker's own.
_LOG_KEYS = {
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "retention.ms",
    "retention.bytes",
    "flush.messages",
    "flush.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "file.delete.delay.ms",
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "preallocate",
}


# (topic, partition, log dir, whether its directory exists, the log's configs)
_Place = tuple[TopicInfo, int, str, bool, dict[str, str]]


def log_config(effective: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in effective.items() if k in _LOG_KEYS}


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid, no dashes>-delete``, the topic cut short so the name
    is at most 255 characters (Kafka's ``logDeleteDirName``)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
    return topic[: max(0, 255 - len(suffix))] + suffix


def _remove_dir(path: str) -> None:
    """Removes ``path`` and all below it; anything already gone is fine."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        if os.path.lexists(path):  # something inside went meanwhile: the rest goes now
            shutil.rmtree(path)


def _remove_dirs(paths: list[str]) -> list[OSError | None]:
    """On a worker thread: removes each directory; the error of each that failed."""
    errors: list[OSError | None] = []
    for path in paths:
        try:
            _remove_dir(path)
            errors.append(None)
        except OSError as e:
            errors.append(e)
    return errors


def _dropped(plog: logstore.Log) -> str:
    """What recovery cut from the log, as the storage engine reports it (empty if nothing)."""
    report = getattr(plog, "recovery_report", None)
    return f"; {report}" if report else ""


def _open(
    path: str,
    effective_config: dict[str, str],
    failures: LogDirFailureChannel | None = None,
    defer_sync: bool = False,
) -> logstore.Log:
    try:
        return logstore.Log.open(path, defer_sync=defer_sync, **log_config(effective_config))
    except logstore.LogIOError as e:
        if failures is not None and is_log_dir_failure(e):
            failures.maybe_add_offline_log_dir(
                os.path.dirname(path), f"opening {os.path.basename(path)} failed: {e}"
            )
        raise KafkaStorageError(str(e)) from e


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        failure_channel: LogDirFailureChannel | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.failure_channel = failure_channel or LogDirFailureChannel()
        # milliseconds on a clock that never goes back (when deletions are due)
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        # Before anything reads or changes a dir: LogDirInUseError when another broker has it.
        self._locks = lock_log_dirs(self.log_dirs)
        try:
            log_dir_mover.recover(self.log_dirs)
            self._check_no_duplicates()
        except BaseException:
            self._unlock()
            raise
        self.logs: dict[tuple[str, int], logstore.Log] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._count_in: dict[str, int] = {d: 0 for d in self.log_dirs}  # partitions per dir
        # partitions whose log was dropped with its failed dir (they stay there until a restart)
        self._in_offline_dirs: set[tuple[str, int]] = set()
        # (renamed ``-delete`` directory, when it was scheduled), oldest first; those left
        # by an earlier run count from now
        now = self.clock_ms()
        self._deletions: list[tuple[str, int]] = [
            (os.path.join(d, name), now)
            for d in self.log_dirs
            for name in sorted(os.listdir(d))
            if _DELETE_DIR.match(name) and os.path.isdir(os.path.join(d, name))
        ]
        for path, _ in self._deletions:
            log.info("scheduled %s, left by an earlier run, for deletion", path)

    def existing_partitions(self) -> Iterator[tuple[str, int, str]]:
        """(topic, partition, log dir) of every partition directory on disk."""
        for d in self.log_dirs:
            for name in sorted(os.listdir(d)):
                m = _PARTITION_DIR.match(name)
                if m and name != METADATA_DIR and os.path.isdir(os.path.join(d, name)):
                    yield m["topic"], int(m["partition"]), d

    def _check_no_duplicates(self) -> None:
        """KafkaStorageError naming a partition found in two log dirs (Kafka refuses to
        start on it: opening either copy could hide the other's records)."""
        seen: dict[tuple[str, int], str] = {}
        for topic, partition, log_dir in self.existing_partitions():
            first = seen.setdefault((topic, partition), log_dir)
            if first != log_dir:
                raise KafkaStorageError(
                    f"duplicate log directories for {topic}-{partition} are found in both "
                    f"{first} and {log_dir}: it is likely a failed log dir was recreated "
                    "elsewhere; remove the stale copy and start again"
                )

    def set_aside_stray_logs(self, topics: Mapping[str, TopicInfo]) -> list[str]:
        """Renames each partition directory the topic metadata does not account for to
        ``<topic>-<partition>.<id>-stray``, as Kafka does with stray logs, and returns the
        new paths. A directory is stray when its topic is not in ``topics``, its
        partition is past the topic's count, or its ``partition.metadata`` names another
        topic id (a topic deleted, then created again under the same name). Such a log is
        left from a deletion a crash cut short; opening it would give a new topic of that
        name the old topic's records. Stray logs are kept, not deleted: a lost metadata
        file must not cost the data."""
        moved = []
        for topic, partition, log_dir in list(self.existing_partitions()):
            info = topics.get(topic)
            path = os.path.join(log_dir, f"{topic}-{partition}")
            reason = None
            if info is None:
                reason = "its topic does not exist"
            elif partition >= info.partitions:
                reason = f"the topic has {info.partitions} partitions"
            else:
                try:
                    with open(os.path.join(path, "partition.metadata"), encoding="utf-8") as f:
                        topic_id = partition_metadata_topic_id(f.read())
                except (FileNotFoundError, UnicodeDecodeError):
                    topic_id = None
                if topic_id is not None and topic_id != info.topic_id:
                    reason = f"it belongs to topic id {topic_id}, not {info.topic_id}"
            if reason is None:
                continue
            target = f"{path}.{uuid.uuid4().hex}-stray"
            os.rename(path, target)
            log_dir_mover.fsync_dir(log_dir)
            log.warning("set aside the stray log %s as %s: %s", path, target, reason)
            moved.append(target)
        return moved

    @property
    def live_log_dirs(self) -> list[str]:
        """The log dirs not offline, in ``log.dirs`` order."""
        return [d for d in self.log_dirs if not self.failure_channel.has_offline_log_dir(d)]

    def is_log_dir_online(self, log_dir: str) -> bool:
        return not self.failure_channel.has_offline_log_dir(log_dir)

    def _choose_dir(self, planned: Mapping[str, int] | None = None) -> str:
        """The live dir with the fewest partitions, counting ``planned`` ones not yet open
        (KafkaStorageError when every dir is offline)."""
        planned = planned or {}
        live = self.live_log_dirs
        if not live:
            raise KafkaStorageError(f"every log dir of {self.log_dirs} is offline")
        return min(
            live,
            key=lambda d: (self._count_in.get(d, 0) + planned.get(d, 0), self.log_dirs.index(d)),
        )

    def get(self, topic: str, partition: int) -> logstore.Log | None:
        return self.logs.get((topic, partition))

    def place(
        self, topic: str, partition: int, planned: Mapping[str, int] | None = None
    ) -> tuple[str, bool]:
        """(the dir a partition's log is or goes in, whether it exists there already);
        KafkaStorageError when its dir is offline (its log is there, unreadable until a
        restart) or no live dir is left for a new one."""
        name = f"{topic}-{partition}"
        if (topic, partition) in self._in_offline_dirs:
            raise KafkaStorageError(f"the log of {name} is in an offline log dir")
        for d in self.log_dirs:
            if os.path.isdir(os.path.join(d, name)):
                if not self.is_log_dir_online(d):
                    raise KafkaStorageError(f"the log of {name} is in the offline log dir {d}")
                return d, True
        return self._choose_dir(planned), False

    def open_files(
        self,
        topic: TopicInfo,
        partition: int,
        log_dir: str,
        existed: bool,
        effective_config: dict[str, str],
        defer_sync: bool = False,
        recoveries: list[tuple[str, float, int]] | None = None,
    ) -> logstore.Log:
        """Opens (recovering if needed) or creates the log in ``log_dir``, with its
        ``partition.metadata``, without registering it: safe off the event loop. A new
        log that cannot be made whole leaves nothing behind (KafkaStorageError).
        ``defer_sync``: the caller syncs the log dir before the log takes a write
        (``logstore.Log.open``). ``recoveries``: a recovery that cut nothing is added
        there as (partition, ms, log end offset) instead of logged."""
        path = os.path.join(log_dir, f"{topic.name}-{partition}")
        started = time.monotonic()
        try:
            plog = _open(path, effective_config, self.failure_channel, defer_sync)
        except KafkaStorageError:
            if not existed:
                shutil.rmtree(path, ignore_errors=True)
            raise
        for fault in plog.checkpoint_faults:
            log.warning("%s-%d: %s", topic.name, partition, fault)
        if plog.recovered and recoveries is not None and not _dropped(plog):
            recoveries.append(
                (
                    f"{topic.name}-{partition}",
                    (time.monotonic() - started) * 1000,
                    plog.log_end_offset,
                )
            )
        elif plog.recovered:
            log.warning(
                "recovered %s-%d in %.0f ms: log end offset %d%s",
                topic.name,
                partition,
                (time.monotonic() - started) * 1000,
                plog.log_end_offset,
                _dropped(plog),
            )
        meta = os.path.join(path, "partition.metadata")
        if not os.path.exists(meta):
            try:
                with open(meta, "w", encoding="utf-8") as f:
                    f.write(partition_metadata_text(topic.topic_id))
            except OSError as e:
                if is_log_dir_failure(e):
                    self.failure_channel.maybe_add_offline_log_dir(log_dir, f"writing {meta}: {e}")
                plog.close_handlers()
                if not existed:
                    shutil.rmtree(path, ignore_errors=True)
                raise KafkaStorageError(f"writing {meta}: {e.strerror or e}") from None
        return plog

    def register(self, topic: str, partition: int, plog: logstore.Log, log_dir: str) -> None:
        key = (topic, partition)
        old = self._dir_of.get(key)
        if old is not None:
            self._count_in[old] -= 1
        self.logs[key] = plog
        self._dir_of[key] = log_dir
        self._count_in[log_dir] = self._count_in.get(log_dir, 0) + 1

    def open_log(
        self, topic: TopicInfo, partition: int, effective_config: dict[str, str]
    ) -> logstore.Log:
        """Opens (recovering if needed) or creates the log of one partition."""
        key = (topic.name, partition)
        if key in self.logs:
            return self.logs[key]
        log_dir, existed = self.place(topic.name, partition)
        plog = self.open_files(topic, partition, log_dir, existed, effective_config)
        self.register(topic.name, partition, plog, log_dir)
        return plog

    def get_or_create_log(
        self, topic: TopicInfo, partition: int, effective_config: dict[str, str]
    ) -> UnifiedLog:
        """The partition's log (Kafka's ``getOrCreateLog``): opened (recovering if needed)
        or created and registered, with its producer state, on the caller's thread."""
        return UnifiedLog(
            topic.name,
            partition,
            self.open_log(topic, partition, effective_config),
            self.failure_channel,
        )

    async def open_new_logs(
        self,
        wanted: list[tuple[str, int]],
        log_config: Callable[[str, int], tuple[TopicInfo, dict[str, str]]],
    ) -> dict[tuple[str, int], UnifiedLog]:
        """The logs of ``wanted`` partitions (none of them open), opened (recovered if
        need be, with their producer state) on a worker thread, OPEN_CHUNK at a time, and
        registered between chunks: the event loop keeps serving while a broker takes
        thousands of partitions. ``log_config`` gives a partition's topic and the configs
        its log opens with. A log that fails to open is left out (opening it again
        answers its error). Each chunk is made durable with one syncfs per log dir
        (:meth:`_open_chunk_synced`), not an fsync per log."""
        opened: dict[tuple[str, int], UnifiedLog] = {}
        planned: dict[str, int] = {}
        for i in range(0, len(wanted), OPEN_CHUNK):
            places = []
            for topic, index in wanted[i : i + OPEN_CHUNK]:
                info, config = log_config(topic, index)
                log_dir, existed = self.place(topic, index, planned)
                planned[log_dir] = planned.get(log_dir, 0) + 1
                places.append((info, index, log_dir, existed, config))
            for (info, index, log_dir, _, _), unified in zip(
                places, await asyncio.to_thread(self._open_chunk_synced, places)
            ):
                if unified is not None:
                    self.register(info.name, index, unified.local_log, log_dir)
                    opened[(info.name, index)] = unified
        return opened

    def open_logs_now(
        self,
        wanted: list[tuple[str, int]],
        log_config: Callable[[str, int], tuple[TopicInfo, dict[str, str]]],
        threads: int,
    ) -> dict[tuple[str, int], UnifiedLog]:
        """The logs of ``wanted`` partitions (none of them open), opened (recovered if
        need be, with their producer state) on ``threads`` worker threads at once (Kafka's
        ``num.recovery.threads.per.data.dir`` times the log dirs) and registered, before
        the caller goes on: a broker alone opens its logs so at startup. The storage
        engine opens and recovers a log without the interpreter lock, so logs open side
        by side. A log that fails to open is left out (opening it again answers its
        error)."""
        planned: dict[str, int] = {}
        places = []
        for topic, index in wanted:
            info, config = log_config(topic, index)
            log_dir, existed = self.place(topic, index, planned)
            planned[log_dir] = planned.get(log_dir, 0) + 1
            places.append((info, index, log_dir, existed, config))
        chunks = [places[i : i + OPEN_CHUNK] for i in range(0, len(places), OPEN_CHUNK)]
        recoveries: list[tuple[str, float, int]] = []

        def open_chunk(chunk: list[_Place]) -> list[UnifiedLog | None]:
            return self._open_chunk(chunk, defer_sync=True, recoveries=recoveries)

        started = time.monotonic()
        if threads > 1 and len(chunks) > 1:
            with concurrent.futures.ThreadPoolExecutor(
                min(threads, len(chunks)), thread_name_prefix="log-recovery"
            ) as pool:
                results = list(pool.map(open_chunk, chunks))
        else:
            results = [open_chunk(chunk) for chunk in chunks]
        self._report_recoveries(recoveries, time.monotonic() - started)
        # One syncfs per log dir makes every open's directory changes durable (the
        # clean-shutdown markers' removal, rewritten checkpoints) before any log is
        # registered, so before any takes a write.
        synced = {d: self._sync_dir(d) for d in {place[2] for place in places}}
        opened: dict[tuple[str, int], UnifiedLog] = {}
        for chunk, unifieds in zip(chunks, results):
            for (info, index, log_dir, _, _), unified in zip(chunk, unifieds):
                if unified is None:
                    continue
                if not synced[log_dir]:
                    unified.local_log.close_handlers()
                    continue
                self.register(info.name, index, unified.local_log, log_dir)
                opened[(info.name, index)] = unified
        return opened

    def _open_chunk_synced(self, places: list[_Place]) -> list[UnifiedLog | None]:
        """On a worker thread: :meth:`_open_chunk` with ``defer_sync``, then one syncfs per
        log dir of the chunk; the logs of a dir whose sync failed are let go (None)."""
        out = self._open_chunk(places, defer_sync=True)
        synced = {d: self._sync_dir(d) for d in {place[2] for place in places}}
        for i, (place, unified) in enumerate(zip(places, out)):
            if unified is not None and not synced[place[2]]:
                unified.local_log.close_handlers()
                out[i] = None
        return out

    def _sync_dir(self, log_dir: str) -> bool:
        """syncfs of the log dir; False when it failed (the dir is then offline)."""
        try:
            logstore.sync_filesystem(log_dir)
            return True
        except logstore.LogIOError as e:
            self.failure_channel.maybe_add_offline_log_dir(log_dir, f"syncing {log_dir}: {e}")
            return False

    @staticmethod
    def _report_recoveries(recoveries: list[tuple[str, float, int]], took_s: float) -> None:
        """A WARNING per recovered log, or past RECOVERED_LINES of them one for all (the
        recoveries that cut records were logged each on their own already)."""
        if len(recoveries) <= RECOVERED_LINES:
            for name, ms, end in recoveries:
                log.warning("recovered %s in %.0f ms: log end offset %d", name, ms, end)
            return
        log.warning(
            "recovered %d logs (%s, ...) while opening logs for %.1f s: each kept whole "
            "to its log end offset, nothing cut",
            len(recoveries),
            ", ".join(name for name, _, _ in recoveries[:5]),
            took_s,
        )

    def _open_chunk(
        self,
        places: list[_Place],
        defer_sync: bool = False,
        recoveries: list[tuple[str, float, int]] | None = None,
    ) -> list[UnifiedLog | None]:
        """On a worker thread: each log opened with its producer state, None where it fails."""
        out: list[UnifiedLog | None] = []
        for info, index, log_dir, existed, config in places:
            try:
                plog = self.open_files(
                    info, index, log_dir, existed, config, defer_sync, recoveries
                )
                out.append(UnifiedLog(info.name, index, plog, self.failure_channel))
            except KafkaError:
                out.append(None)
        return out

    def reopen_log(
        self, topic: str, partition: int, log_dir: str, effective_config: dict[str, str]
    ) -> logstore.Log:
        """Opens a partition's (closed) log again, from ``log_dir``, in place of the old."""
        plog = _open(
            os.path.join(log_dir, f"{topic}-{partition}"), effective_config, self.failure_channel
        )
        self.register(topic, partition, plog, log_dir)
        return plog

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding an open partition's log."""
        return self._dir_of.get((topic, partition))

    def delete_log(self, topic: str, partition: int) -> str | None:
        """Deletes the partition's log as Kafka's ``asyncDelete`` does, without blocking
        the event loop: it leaves the maps, its handles are dropped without a write (so a
        read or append in flight on another thread fails with LogClosedError, answered
        NOT_LEADER_OR_FOLLOWER), and its directory is renamed to
        :func:`log_delete_dir_name`, freeing the partition's name for a new log at once.
        The directory goes later, in :meth:`delete_logs_due`. Returns the new path (None
        when no directory was found in a live log dir). KafkaStorageError when the
        rename fails (a failure of the disk takes its log dir offline)."""
        key = (topic, partition)
        plog = self.logs.pop(key, None)
        log_dir = self._dir_of.pop(key, None)
        if log_dir is not None:
            self._count_in[log_dir] -= 1
        if plog is not None:
            plog.close_handlers()
        name = f"{topic}-{partition}"
        if log_dir is None:  # a log never opened since startup (a deletion the broker missed)
            log_dir = next(
                (d for d in self.live_log_dirs if os.path.isdir(os.path.join(d, name))), None
            )
        if log_dir is None or not self.is_log_dir_online(log_dir):
            return None
        path = os.path.join(log_dir, name)
        target = os.path.join(log_dir, log_delete_dir_name(topic, partition))
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return None
        except OSError as e:
            if is_log_dir_failure(e):
                self.failure_channel.maybe_add_offline_log_dir(log_dir, f"renaming {path}: {e}")
            raise KafkaStorageError(f"renaming {path}: {e.strerror or e}") from None
        self._deletions.append((target, self.clock_ms()))
        log.info("log of %s renamed %s and scheduled for deletion", name, target)
        return target

    def pending_deletions(self) -> list[str]:
        """The renamed directories of deleted logs not removed yet, oldest first."""
        return [path for path, _ in self._deletions]

    def next_deletion_in_ms(self, delay_ms: int) -> int | None:
        """Milliseconds until the oldest pending deletion is due (None: none pending)."""
        if not self._deletions:
            return None
        return max(0, self._deletions[0][1] + delay_ms - self.clock_ms())

    async def delete_logs_due(self, delay_ms: int) -> int:
        """Removes, on a worker thread, up to DELETE_BATCH renamed directories scheduled
        at least ``delay_ms`` ago (``log.segment.delete.delay.ms``); returns how many went.
        One that fails is logged and tried again ``delay_ms`` later; one in a log dir
        gone offline is forgotten (the next start schedules it again)."""
        now = self.clock_ms()
        due = [e for e in self._deletions if e[1] + delay_ms <= now][:DELETE_BATCH]
        if not due:
            return 0
        errors = await asyncio.to_thread(_remove_dirs, [path for path, _ in due])
        removed = 0
        for entry, error in zip(due, errors):
            self._deletions.remove(entry)
            path = entry[0]
            if error is None:
                removed += 1
                log.info("deleted %s", path)
            elif is_log_dir_failure(error) and not self.is_log_dir_online(os.path.dirname(path)):
                log.warning("left %s in an offline log dir: %s", path, error)
            else:
                log.error("deleting %s failed (tried again later): %s", path, error)
                self._deletions.append((path, self.clock_ms()))
        return removed

    def handle_log_dir_failure(self, log_dir: str) -> list[tuple[str, int]]:
        """Drops the logs of ``log_dir`` (offline: see the failure channel) without writing
        to them (Kafka's ``closeHandlers``: no flush, no checkpoint, no clean-shutdown
        marker, so the next start recovers them); returns their partitions."""
        log_dir = os.path.abspath(log_dir)
        self.failure_channel.maybe_add_offline_log_dir(log_dir, "taken offline")
        dropped = sorted(key for key, d in self._dir_of.items() if d == log_dir)
        self._in_offline_dirs.update(dropped)
        for key in dropped:
            plog = self.logs.pop(key, None)
            del self._dir_of[key]
            if plog is not None:
                try:
                    plog.close_handlers()
                except logstore.LogStoreError:
                    log.exception("dropping the log of %s-%d", *key)
        self._count_in[log_dir] = 0
        log.warning(
            "log dir %s is offline: dropped the logs of %d partitions; live log dirs: %s",
            log_dir,
            len(dropped),
            self.live_log_dirs,
        )
        return dropped

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.logs if t == topic)

    def flush_all(self) -> None:
        for plog in self.logs.values():
            plog.flush()

    def shutdown(self) -> None:
        """Closes every log with two syncfs per log dir in all, where a log's ``close``
        fsyncs its files several times: ``close_deferred`` (the active segment's indexes
        trimmed, files closed, nothing fsynced), one syncfs per log dir, then each log's
        offset checkpoints and clean-shutdown marker (``mark_clean_shutdown``) and one
        syncfs again. A marker is written only after the log's data is durable; the logs
        of a dir whose first sync fails get none and recover at the next start. Each step
        runs CLOSE_THREADS logs at a time (the engine works without the interpreter
        lock)."""
        items = list(self.logs.items())
        self._each_log(items, "closing", lambda plog: plog.close_deferred())
        dirs = {key: self._dir_of.get(key) or os.path.dirname(plog.path) for key, plog in items}
        synced = {d for d in set(dirs.values()) if self._sync_at_shutdown(d)}
        marked = [(key, plog) for key, plog in items if dirs[key] in synced]
        self._each_log(marked, "marking clean", lambda plog: plog.mark_clean_shutdown())
        for log_dir in {dirs[key] for key, _ in marked}:
            self._sync_at_shutdown(log_dir)
        self.logs.clear()
        self._unlock()

    @staticmethod
    def _each_log(
        items: list[tuple[tuple[str, int], logstore.Log]],
        action: str,
        step: Callable[[logstore.Log], None],
    ) -> None:
        def run(item: tuple[tuple[str, int], logstore.Log]) -> None:
            key, plog = item
            try:
                step(plog)
            except logstore.LogStoreError:
                log.exception("%s %s-%d", action, *key)

        if len(items) > 1:
            with concurrent.futures.ThreadPoolExecutor(
                min(CLOSE_THREADS, len(items)), thread_name_prefix="log-close"
            ) as pool:
                list(pool.map(run, items))
        else:
            for item in items:
                run(item)

    @staticmethod
    def _sync_at_shutdown(log_dir: str) -> bool:
        try:
            logstore.sync_filesystem(log_dir)
            return True
        except logstore.LogStoreError:
            log.exception("syncing %s at shutdown: its logs recover at the next start", log_dir)
            return False

    def _unlock(self) -> None:
        for lock in self._locks:
            lock.unlock()
        self._locks = []
