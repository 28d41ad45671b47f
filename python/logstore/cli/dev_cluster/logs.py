"""``dev-cluster logs``: the log files of a dev cluster, printed and optionally followed.

Sources: ZooKeeper's ``zookeeper/zookeeper.log`` and each broker's ``b<i>/broker.log``
(its stderr, where the broker logs). One source prints its lines as they are; several
print each line behind ``<node> | `` (``zookeeper | ``, ``broker 2 | ``), the names
padded to one width. Following polls the files every 0.2 s from where printing ended,
prints whole lines only (a partial last line waits for its newline) and starts a file
over when it shrank (truncated); it ends with Ctrl-C (exit 130).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path


class _Source:
    def __init__(self, name: str, path: Path, prefix: str) -> None:
        self.name = name
        self.path = path
        self.prefix = prefix
        self.offset = 0
        self.partial = b""

    def lines(self, last: int | None) -> list[str]:
        """The file's whole lines from the start (or its ``last`` lines), marking where
        they end for :meth:`new_lines`."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        self.offset = len(data)
        whole, _, self.partial = data.rpartition(b"\n")
        if not whole and not data.endswith(b"\n"):
            return []
        lines = whole.decode(errors="replace").split("\n")
        return list(deque(lines, maxlen=last)) if last is not None else lines

    def new_lines(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = self.partial + f.read(size - self.offset)
        self.offset = size
        whole, sep, self.partial = data.rpartition(b"\n")
        if not sep:
            return []
        return whole.decode(errors="replace").split("\n")


def show(
    sources: list[tuple[str, Path]],
    last: int | None,
    follow: bool,
    write: Callable[[str], None],
    poll: float = 0.2,
) -> None:
    """Prints ``sources`` (``(node, path)`` pairs) through ``write`` (one line at a
    time, no newline), then, with ``follow``, their new lines until interrupted."""
    width = max(len(name) for name, _ in sources)
    many = len(sources) > 1
    files = [_Source(name, path, f"{name:<{width}} | " if many else "") for name, path in sources]
    for src in files:
        for line in src.lines(last):
            write(src.prefix + line)
    while follow:
        time.sleep(poll)
        for src in files:
            for line in src.new_lines():
                write(src.prefix + line)
