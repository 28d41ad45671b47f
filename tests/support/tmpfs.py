"""Small file systems a test mounts and fills: a real full disk for the broker's log dirs.

:func:`mounted_tmpfs` mounts a tmpfs of ``size_mb`` at a fresh directory (root only: the
CI machine runs the suite as root) and unmounts it, lazily, on the way out, so that a
broker still holding files there does not keep it mounted. :func:`fill` writes a filler
file until the file system answers ENOSPC; :func:`free` removes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

FILLER = ".filler"


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"mounting a {size_mb} MB tmpfs at {path} failed (the test needs root): "
            f"{done.stderr.strip()}"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path) -> int:
    """Writes ``path/.filler`` until the file system is full; returns the bytes written."""
    written = 0
    with open(path / FILLER, "ab", buffering=0) as f:
        for chunk in (1 << 20, 4096, 512, 1):
            data = b"\0" * chunk
            while True:
                try:
                    written += f.write(data)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return written


def free(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path / FILLER)
