"""Progress bars of the long offline commands (``clean``, ``dump-log``), drawn with rich
on stderr so that stdout stays the command's output.

A bar is a callable ``bar(done, total)`` in bytes, the shape the native cleaner's
``progress`` callback has. On a terminal it redraws in place; elsewhere (a pipe, a log
file, pytest's capture) it prints one final line when :meth:`ProgressBar.finish` runs,
so logs do not fill with redraws.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)


class ProgressBar:
    """One bar labelled ``label`` over a byte count, on ``out`` (stderr by default)."""

    def __init__(
        self, out: IO[str] | None = None, label: str = "", *, enabled: bool = True
    ) -> None:
        self.console = Console(file=out if out is not None else sys.stderr, highlight=False)
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.label = label

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=max(total, 1))
        # An empty input counts as complete.
        self.progress.update(self.task, completed=done if total else 1, total=max(total, 1))

    def finish(self) -> None:
        if self.task is not None:
            self.progress.stop()
            self.task = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
