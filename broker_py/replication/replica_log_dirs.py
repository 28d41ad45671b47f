"""The broker's log dirs and the replicas in each (Kafka's ``ReplicaManager.describeLogDirs``
and ``ReplicaManager.alterReplicaLogDirs``).

A replica's offset lag is 0 (Kafka's: its high watermark minus its log end offset, never
below 0). A partition moving to another dir is also listed there as a future replica
(``is_future``), its lag the messages written since its copy began.

Moving a replica answers as Kafka does: LOG_DIR_NOT_FOUND for a path that is not one of
``log.dirs``, REPLICA_NOT_AVAILABLE for a partition this broker does not hold, nothing to
do for a partition already in that dir, and otherwise the move starts
(:mod:`broker_py.log.log_dir_mover`) and the answer is NONE at once. A partition already
moving elsewhere is redirected, as Kafka replaces a future replica: that move stops, its
future log goes, and the partition moves to the new dir from wherever it is (to its own
dir: it stays).

A log dir that failed (KIP-112) is described with KAFKA_STORAGE_ERROR and no replicas.
:func:`stop_serving_log_dir` is Kafka's ``ReplicaManager.handleLogDirFailure``: the dir's
partitions stop being fetched and served (they answer KAFKA_STORAGE_ERROR until a
restart), waiting produces and fetches on them complete, moves from or to the dir stop,
and its logs are dropped unwritten.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.log.log_dir_mover import LogDirMover
    from broker_py.log.log_manager import LogManager
    from broker_py.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """One replica in a log dir (Kafka's ``DescribeLogDirsPartition``): its bytes on disk,
    its offset lag (see the module docstring), and whether it is a move's future replica."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir (Kafka's ``DescribeLogDirsResult``): NONE, or KAFKA_STORAGE_ERROR when
    its file system cannot be read (its sizes then -1); its replicas by topic and partition,
    a partition's current replica before its future one."""

    log_dir: str
    error: ErrorCode
    total_bytes: int
    usable_bytes: int
    replicas: list[ReplicaLogDirInfo]


def describe_log_dirs(
    manager: ReplicaManager,
    log_manager: LogManager,
    mover: LogDirMover | None,
    partitions: Iterable[tuple[str, int]] | None,
) -> list[LogDirInfo]:
    """Each log dir with the replicas of ``partitions`` (None: every partition held) it
    holds; partitions not held here are left out."""
    held = set(manager.keys())
    wanted = held if partitions is None else set(partitions) & held
    results: list[LogDirInfo] = []
    for log_dir in log_manager.log_dirs:
        if not log_manager.is_log_dir_online(log_dir):
            results.append(LogDirInfo(log_dir, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, []))
            continue
        replicas: list[ReplicaLogDirInfo] = []
        for topic, index in sorted(wanted):
            partition = manager.get_partition(topic, index)
            if partition is None:
                continue
            if log_manager.dir_of(topic, index) == log_dir:
                replicas.append(ReplicaLogDirInfo(topic, index, partition.size_bytes, 0, False))
            move = None if mover is None else mover.moves.get((topic, index))
            if move is not None and move.dest_dir == log_dir and not move.stopped.is_set():
                replicas.append(
                    ReplicaLogDirInfo(
                        topic,
                        index,
                        move.copied_bytes(),
                        partition.log_end_offset - move.copied_to,
                        True,
                    )
                )
        try:
            fs = os.statvfs(log_dir)
            total, usable, error = (
                fs.f_blocks * fs.f_frsize,
                fs.f_bavail * fs.f_frsize,
                ErrorCode.NONE,
            )
        except OSError as e:
            log.warning("log dir %s: %s", log_dir, e)
            total, usable, error = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(LogDirInfo(log_dir, error, total, usable, replicas))
    return results


def alter_replica_log_dir(
    manager: ReplicaManager,
    log_manager: LogManager,
    mover: LogDirMover,
    topic: str,
    index: int,
    path: str,
) -> ErrorCode:
    """Moves the partition's replica to the log dir ``path`` (see the module docstring)."""
    dest = os.path.abspath(path)
    if dest not in log_manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    current = log_manager.dir_of(topic, index)
    if current is None or (topic, index) not in manager:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    move = mover.moves.get((topic, index))
    if move is not None and not move.stopped.is_set():
        if move.dest_dir == dest:
            return ErrorCode.NONE
        log.info("%s-%d was moving to %s; now to %s", topic, index, move.dest_dir, dest)
    if current != dest or move is not None:
        mover.start(topic, index, dest)
    return ErrorCode.NONE


def stop_serving_log_dir(
    manager: ReplicaManager, log_manager: LogManager, mover: LogDirMover | None, log_dir: str
) -> list[tuple[str, int]]:
    """Stops serving the replicas in the failed ``log_dir`` (see the module docstring);
    returns the partitions that went offline."""
    log_dir = os.path.abspath(log_dir)
    offline = sorted(
        key
        for key, partition in list(manager.partitions.items())
        if log_manager.dir_of(*key) == log_dir or partition.log.log_dir == log_dir
    )
    fetcher = manager.replica_fetcher_manager
    if fetcher is not None:
        fetcher.remove_fetcher_for_partitions(offline)
    if mover is not None:
        mover.stop_moves_touching(log_dir)
    for key in offline:
        manager.mark_partition_offline(key)
    log_manager.handle_log_dir_failure(log_dir)
    log.warning(
        "broker %d stopped serving %d partitions in the failed log dir %s: %s",
        manager.broker_id,
        len(offline),
        log_dir,
        ", ".join(f"{t}-{i}" for t, i in offline) or "none",
    )
    return offline
