"""The ``.lock`` file in each log dir: held by the broker that owns the dir, as Kafka's
LogManager holds it, so a second broker (or a Kafka broker) started on the same
``log.dirs`` stops before it reads, recovers or rewrites anything there.

The lock is taken twice over the same descriptor, both non-blocking and exclusive:
``flock(2)``, which belongs to the open file and so also excludes a second broker in the
same process, and a POSIX record lock (``fcntl(F_SETLK)``), the kind Java's
``FileChannel.tryLock`` takes, which a Kafka broker on the same dir holds. Both go when
the descriptor is closed, so a crashed broker leaves no stale lock behind; the file
itself stays (Kafka leaves it too).
"""

from __future__ import annotations

import errno
import fcntl
import os

from logstore.protocol.errors import KafkaException

LOCK_FILE = ".lock"


class LogDirInUseError(KafkaException):
    """Another process, or another broker in this one, holds a log dir's lock."""

    def __init__(self, log_dir: str) -> None:
        super().__init__(
            f"failed to acquire the lock on {os.path.join(log_dir, LOCK_FILE)}: "
            f"another broker, in this or another process, is using the log dir {log_dir}"
        )
        self.log_dir = log_dir


class FileLock:
    """An exclusive lock on ``path`` (created if missing), held until :meth:`unlock`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def try_lock(self) -> bool:
        """Takes both locks; False, holding neither, when another holder has one."""
        assert self._fd is not None, "unlocked FileLock"
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            if e.errno in (errno.EACCES, errno.EAGAIN):  # POSIX allows either for "held"
                return False
            raise
        return True

    def unlock(self) -> None:
        """Releases the lock and closes the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lock_log_dirs(log_dirs: list[str]) -> list[FileLock]:
    """Creates each missing log dir and locks it; on the first dir already held, releases
    the ones taken so far and raises :class:`LogDirInUseError`."""
    locks: list[FileLock] = []
    try:
        for d in log_dirs:
            os.makedirs(d, exist_ok=True)
            lock = FileLock(os.path.join(d, LOCK_FILE))
            locks.append(lock)
            if not lock.try_lock():
                raise LogDirInUseError(os.path.abspath(d))
    except BaseException:
        for lock in locks:
            lock.unlock()
        raise
    return locks
