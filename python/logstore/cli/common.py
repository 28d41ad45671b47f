"""What the ``logstore`` subcommands share: exit statuses, :class:`CliError`, output
helpers, segment file names and the native storage module.

Exit statuses: 0 the command did everything it was asked; 1 it ran but something failed
(a broker answered an error for some topic, group or record; an offline file holds a
corrupt batch or an index mismatch); 2 usage errors, unreadable files and brokers that
cannot be reached; 130 interrupted."""

from __future__ import annotations

import os
import re
from typing import Any

EXIT_OK = 0
EXIT_INCONSISTENT = 1
# The broker refused part of the request (the error codes are printed).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

SEGMENT_NAME = re.compile(
    r"^(?P<base>\d{20})\.(?P<kind>log|index|timeindex|txnindex)"
    r"(?:\.(?:deleted|cleaned|swap))?$"
)


class CliError(Exception):
    """A problem that ends the command with a one-line message and ``exit_code``
    (2 unless told otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _segment_name(path: str) -> tuple[int, str]:
    """(base offset, kind) from a segment file's 20-digit name, or CliError."""
    match = SEGMENT_NAME.match(os.path.basename(path))
    if match is None:
        raise CliError(
            f"{path}: not a segment file (expected a 20-digit base offset name "
            "ending in .log, .index, .timeindex or .txnindex)"
        )
    return int(match.group("base")), match.group("kind")


def _sibling(path: str, kind: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, name[:20] + "." + kind)


def _native() -> Any:
    try:
        from logstore import _native
    except ImportError as exc:  # pragma: no cover - only without a build
        raise CliError(f"the native storage module is not built ({exc})") from None
    return _native
