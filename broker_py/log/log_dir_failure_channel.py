"""Where a log dir's I/O failures are reported (Kafka's ``LogDirFailureChannel``, KIP-112).

Any part of the broker whose disk operation fails with an I/O error (a log's append,
roll, flush, truncation or read; a checkpoint write; opening a log) reports the log dir
here. The first report of a dir marks it offline and hands it, once, to the listener the
broker set (its log dir failure handler, which stops serving the dir's partitions and
tells the controller); later reports of the same dir only count.

Invariants:
- A dir goes offline at most once per broker run and never comes back online: a dir
  returns only through a restart, which recovers its logs.
- :meth:`LogDirFailureChannel.maybe_add_offline_log_dir` may be called from any thread
  and never blocks on the listener beyond handing the dir over.
- Only I/O errors that are the disk's take a dir offline (:func:`is_log_dir_failure`):
  a process out of file descriptors (EMFILE, ENFILE) or memory, or past its file size
  limit (EFBIG: RLIMIT_FSIZE), is not a failed disk; those appends answer
  KAFKA_STORAGE_ERROR and the dir stays online.
"""

from __future__ import annotations

import errno as errno_codes
import logging
import os
import threading
from collections.abc import Callable

import logstore

__all__ = ["LogDirFailureChannel", "is_log_dir_failure", "log_dir_of"]

log = logging.getLogger(__name__)

# Errors of the process, not of the disk: they take no dir offline.
_PROCESS_ERRNOS = frozenset(
    {errno_codes.EMFILE, errno_codes.ENFILE, errno_codes.ENOMEM, errno_codes.EFBIG}
)


def is_log_dir_failure(e: BaseException) -> bool:
    """Whether ``e`` (raised by the storage engine or the OS) is an I/O failure of the
    disk under a log dir: the storage engine's LogIOError or an OSError, unless its errno
    is the process's (EMFILE, ENFILE, ENOMEM, EFBIG)."""
    if not isinstance(e, logstore.LogIOError | OSError):
        return False
    return getattr(e, "errno", None) not in _PROCESS_ERRNOS


def log_dir_of(partition_path: str) -> str:
    """The log dir holding a partition directory ``<log dir>/<topic>-<partition>``."""
    return os.path.dirname(os.path.abspath(partition_path))


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # log dir -> the first error reported
        self._reports: dict[str, int] = {}
        self._listener: Callable[[str], None] | None = None
        self._unheard: list[str] = []  # offline before a listener was set

    def set_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(log_dir)`` is called once per dir that goes offline (dirs that went
        offline before this call are handed over now); it runs on the reporting thread
        and must only hand the dir on."""
        with self._lock:
            self._listener = listener
            unheard, self._unheard = self._unheard, []
        for log_dir in unheard:
            listener(log_dir)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str) -> bool:
        """Reports an I/O failure in ``log_dir`` (``message`` says what failed); True when
        this report took the dir offline."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            self._reports[log_dir] = self._reports.get(log_dir, 0) + 1
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = message
            listener = self._listener
            if listener is None:
                self._unheard.append(log_dir)
        log.error("log dir %s is offline: %s", log_dir, message)
        if listener is not None:
            listener(log_dir)
        return True

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return os.path.abspath(log_dir) in self._offline

    def offline_log_dirs(self) -> dict[str, str]:
        """Each offline dir with the error that took it offline."""
        with self._lock:
            return dict(self._offline)
