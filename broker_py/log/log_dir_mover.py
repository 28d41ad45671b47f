"""Moving a partition to another of the broker's log dirs (AlterReplicaLogDirs), as
Kafka's future logs do it: the partition stays online while a copy is made, then the
copy takes the original's place.

A move of ``<topic>-<p>`` from dir A to dir B:

1. The log rolls, so everything written so far is in sealed segments, and the log
   cleaner and retention leave the partition alone until the move ends.
2. Off the event loop, every file of ``A/<topic>-<p>`` is copied to
   ``B/<topic>-<p>.<id>-future`` (files awaiting deletion, ``*.deleted``, and cleaner
   leftovers, ``*.cleaned``, are not). Then, while more than ``CATCH_UP_BYTES`` were
   written to the active segment meanwhile (at most ``MAX_CATCH_UP_ROUNDS`` times),
   the log rolls again and the files that changed are copied, still off the loop: the
   step below, which holds the partition, copies no more than a short tail.
3. On the event loop, so no request sees the partition in between: the log is
   closed; files that changed or appeared since step 2 are copied again (the
   segments written meanwhile, every index and checkpoint), files that went are
   removed; each file and the future dir are fsynced. ``A/<topic>-<p>`` is renamed
   ``A/<topic>-<p>.<id>-delete``, the future dir is renamed ``B/<topic>-<p>``, both
   parents are fsynced, and the log reopens there. The ``-delete`` dir is removed
   off the event loop.

A request for another dir while a move is under way stops that move (its copy ends at
the next file and its future dir is removed) and starts the new one once it has ended,
from wherever the partition then is; a request for the partition's own dir only stops
it.

A crash leaves, at worst, a ``-future`` dir beside the live partition (the move is
dropped: :func:`recover` removes it) or a ``-delete`` dir with a complete ``-future``
dir of the same id and no live one (crashed between the two renames: :func:`recover`
finishes the move). The future dir's entry is fsynced before the first rename, so a
``-delete`` dir without its ``-future`` dir is never a move's only copy: like the
``-delete`` dirs of deleted logs, the log manager removes it. Neither name matches a
partition dir, so nothing opens them as logs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FUTURE = "-future"
DELETE = "-delete"
_MOVE_DIR = re.compile(r"^(?P<name>.+-\d+)\.(?P<id>[0-9a-f]{32})(?P<kind>-future|-delete)$")
# Files a copy leaves out: segments awaiting deletion, cleaner leftovers, and a
# checkpoint being written (``<name>.tmp``, renamed over ``<name>`` when complete).
_SKIPPED = (".deleted", ".cleaned", ".tmp")
# A move's last step copies, with the log closed, what was written since the last
# roll; catch-up rounds bring that down to this many bytes first.
CATCH_UP_BYTES = 4 << 20
MAX_CATCH_UP_ROUNDS = 8


def _files(path: str) -> dict[str, tuple[int, int]]:
    """Name -> (size, mtime in ns) of the files a copy carries."""
    out = {}
    for entry in os.scandir(path):
        if entry.is_file() and not entry.name.endswith(_SKIPPED):
            try:
                st = entry.stat()
            except FileNotFoundError:  # gone since the listing (a live log changes)
                continue
            out[entry.name] = (st.st_size, st.st_mtime_ns)
    return out


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_files(src: str, dst: str, stopped: threading.Event | None = None) -> None:
    """Copies every file of ``src`` (times kept, for :func:`sync_files`) into ``dst``,
    until ``stopped`` is set. ``src`` is a live log: a file gone by the time it is
    copied is left out, as :func:`sync_files` makes the copy exact once the log is
    closed."""
    os.makedirs(dst, exist_ok=True)
    for name in _files(src):
        if stopped is not None and stopped.is_set():
            return
        try:
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
        except FileNotFoundError:
            continue


def copy_changed(src: str, dst: str, stopped: threading.Event | None = None) -> None:
    """Copies the files of a live log ``src`` whose size or time differ from their copy
    in ``dst`` (a catch-up round; :func:`sync_files` makes the copy exact), until
    ``stopped`` is set."""
    have = _files(dst)
    for name, stat in _files(src).items():
        if stopped is not None and stopped.is_set():
            return
        if have.get(name) != stat:
            try:
                shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
            except FileNotFoundError:
                continue


def sync_files(src: str, dst: str) -> None:
    """Makes ``dst`` hold exactly the files of ``src``, then fsyncs every file and ``dst``
    itself. A segment file that is not the newest is copied again only if its size or
    time differs (once sealed, only the cleaner and retention change those, and they
    wait for the move); the newest segment file and every other file (indexes, written
    through a mapping that need not touch the file's time, and checkpoints) always are."""
    want, have = _files(src), _files(dst)
    for name in have.keys() - want.keys():
        os.unlink(os.path.join(dst, name))
    segments = sorted(n for n in want if n.endswith(".log"))
    for name, stat in want.items():
        sealed = name.endswith(".log") and name != segments[-1]
        if not sealed or have.get(name) != stat:
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
    for name in want:
        fd = os.open(os.path.join(dst, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(dst)


def recover(log_dirs: list[str]) -> None:
    """Settles moves a crash interrupted (see the module docstring); run before any
    partition opens. A ``-future`` dir whose move renamed the old copy (a ``-delete``
    dir with the same id) and left no live copy becomes the partition; any other
    ``-future`` dir is removed. ``-delete`` dirs are left for the log manager, which
    removes them after ``log.segment.delete.delay.ms``."""
    found: dict[tuple[str, str], dict[str, str]] = {}  # (name, move id) -> kind -> path
    live: set[str] = set()
    for d in log_dirs:
        for name in os.listdir(d):
            m = _MOVE_DIR.match(name)
            if m:
                found.setdefault((m["name"], m["id"]), {})[m["kind"]] = os.path.join(d, name)
            elif os.path.isdir(os.path.join(d, name)):
                live.add(name)
    for (name, _), moves in found.items():
        future = moves.get(FUTURE)
        if future is None:
            continue
        if name not in live and DELETE in moves:
            target = os.path.join(os.path.dirname(future), name)
            log.warning("finishing the move of %s to %s", name, os.path.dirname(future))
            os.rename(future, target)
            fsync_dir(os.path.dirname(target))
            live.add(name)
        else:
            log.warning("removing %s left by an interrupted move", future)
            shutil.rmtree(future, ignore_errors=True)


class Move:
    """One partition's move under way: where to, and how far the log had got when the
    copy began (the future log holds everything below ``copied_to`` once copied).
    ``stopped`` ends it early: the copy stops at the next file and the future log goes."""

    def __init__(self, name: str, src_dir: str, dest_dir: str, copied_to: int) -> None:
        self.name = name
        self.move_id = uuid.uuid4().hex
        self.dest_dir = dest_dir
        self.future_path = os.path.join(dest_dir, f"{name}.{self.move_id}{FUTURE}")
        self.target = os.path.join(dest_dir, name)
        self.begin(src_dir, copied_to)
        self.stopped = threading.Event()
        self.task: asyncio.Task[None] | None = None
        self.catch_up_rounds = 0

    def begin(self, src_dir: str, copied_to: int) -> None:
        """Where the partition is as the copy begins."""
        self.src_dir = src_dir
        self.src = os.path.join(src_dir, self.name)
        self.delete_path = os.path.join(src_dir, f"{self.name}.{self.move_id}{DELETE}")
        self.copied_to = copied_to

    def copied_bytes(self) -> int:
        """Bytes in the future log so far."""
        try:
            return sum(size for size, _ in _files(self.future_path).values())
        except FileNotFoundError:  # the copy has not begun, or the move just ended
            return 0


class LogDirMover:
    """Runs the moves of the broker's partitions between log dirs, one task each.
    ``get_log(topic, index)`` is the partition's log (None once it is gone) and
    ``reopen(topic, index, log_dir)`` opens a partition's log again from ``log_dir``
    and makes it the partition's."""

    def __init__(
        self,
        log_manager,
        get_log: Callable[[str, int], Any],
        reopen: Callable[[str, int, str], None],
    ) -> None:
        self.log_manager = log_manager
        self._get_log = get_log
        self._reopen = reopen
        self.moves: dict[tuple[str, int], Move] = {}

    def moving(self, topic: str, index: int) -> bool:
        return (topic, index) in self.moves

    def start(self, topic: str, index: int, dest_dir: str) -> None:
        """Moves the partition to ``dest_dir``. A move already under way elsewhere is
        stopped first, as Kafka replaces a future log: the partition then goes to
        ``dest_dir`` from wherever it is, and to its own dir means staying there."""
        key = (topic, index)
        previous = self.moves.get(key)
        if previous is not None:
            previous.stopped.set()
        current = self.log_manager.dir_of(topic, index)
        if previous is not None and current == dest_dir:
            return
        partition = self._get_log(topic, index)
        if previous is None:
            partition.local_log.roll()
        move = Move(f"{topic}-{index}", current, dest_dir, partition.local_log.log_end_offset)
        self.moves[key] = move
        move.task = asyncio.get_running_loop().create_task(
            self._run(key, move, previous), name=f"move-{topic}-{index}"
        )

    async def _run(self, key: tuple[str, int], move: Move, previous: Move | None) -> None:
        topic, index = key
        try:
            if previous is not None and previous.task is not None:
                await asyncio.wait([previous.task])
                partition = self._partition(key, move, check_dir=False)
                current = self.log_manager.dir_of(topic, index)
                if partition is None or current is None or current == move.dest_dir:
                    return
                partition.local_log.roll()
                move.begin(current, partition.local_log.log_end_offset)
            await asyncio.to_thread(copy_files, move.src, move.future_path, move.stopped)
            for _ in range(MAX_CATCH_UP_ROUNDS):
                partition = self._partition(key, move)
                if partition is None:
                    return
                if partition.local_log.segments()[-1].size <= CATCH_UP_BYTES:
                    break
                partition.local_log.roll()
                move.catch_up_rounds += 1
                await asyncio.to_thread(copy_changed, move.src, move.future_path, move.stopped)
            partition = self._partition(key, move)
            if partition is None:
                return
            # From here to the reopen nothing awaits: no request sees the log closed.
            partition.local_log.close()
            try:
                sync_files(move.src, move.future_path)
                # The future dir's name is durable before the old copy is renamed: a
                # lone -delete dir is then never a move's only copy (see recover).
                fsync_dir(move.dest_dir)
                os.rename(move.src, move.delete_path)
                os.rename(move.future_path, move.target)
                fsync_dir(move.src_dir)
                fsync_dir(move.dest_dir)
            except BaseException:
                if not os.path.exists(move.src) and not os.path.exists(move.target):
                    os.rename(move.delete_path, move.src)
                self._reopen(
                    topic, index, move.src_dir if os.path.exists(move.src) else move.dest_dir
                )
                raise
            self._reopen(topic, index, move.dest_dir)
            log.info("moved %s-%d from %s to %s", topic, index, move.src_dir, move.dest_dir)
            await asyncio.to_thread(shutil.rmtree, move.delete_path, True)
        except Exception:
            log.exception("moving %s-%d to %s failed", topic, index, move.dest_dir)
        finally:
            if self.moves.get(key) is move:
                del self.moves[key]
            if os.path.exists(move.future_path):
                shutil.rmtree(move.future_path, ignore_errors=True)

    def _partition(self, key: tuple[str, int], move: Move, check_dir: bool = True):
        """The log being moved, or None if the move was stopped or its topic was
        deleted meanwhile."""
        partition = self._get_log(*key)
        if partition is None or move.stopped.is_set():
            return None
        if check_dir and self.log_manager.dir_of(*key) != move.src_dir:
            return None
        return partition

    def stop_moves_touching(self, log_dir: str) -> list[tuple[str, int]]:
        """Stops every move from or to ``log_dir`` (gone offline); returns their partitions."""
        stopped = [k for k, m in self.moves.items() if log_dir in (m.src_dir, m.dest_dir)]
        for key in stopped:
            self.moves[key].stopped.set()
        return stopped

    async def stop(self) -> None:
        tasks = [m.task for m in self.moves.values() if m.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
