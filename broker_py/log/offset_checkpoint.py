"""Kafka's offset checkpoint files (``OffsetCheckpointFile``), here the
``replication-offset-checkpoint`` of each log dir: every partition's high watermark.

Format (text, one entry per line)::

    0                      version
    <count>
    <topic> <partition> <offset>   x count

Written whole to ``<file>.tmp``, fsynced, and renamed over the file, so a crash leaves
the old or the new checkpoint. A file that does not parse is reported and read as
empty: the high watermarks then start from 0 and are learnt again from the leaders.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
VERSION = 0


class CheckpointFormatError(ValueError):
    pass


def parse(text: str, path: str = "checkpoint") -> dict[tuple[str, int], int]:
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointFormatError(f"{path}: expected a version and a count")
    if lines[0].strip() != str(VERSION):
        raise CheckpointFormatError(f"{path}: unknown version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointFormatError(f"{path}: bad count {lines[1]!r}") from None
    entries = lines[2:]
    if len(entries) != count:
        raise CheckpointFormatError(f"{path}: {len(entries)} entries, the count says {count}")
    out: dict[tuple[str, int], int] = {}
    for line in entries:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointFormatError(f"{path}: malformed entry {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointFormatError(f"{path}: malformed entry {line!r}") from None
    return out


def format_entries(entries: Mapping[tuple[str, int], int]) -> str:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{topic} {index} {offset}" for (topic, index), offset in sorted(entries.items())]
    return "\n".join(lines) + "\n"


def read(path: str) -> dict[tuple[str, int], int]:
    """The file's entries; empty when it is missing or unreadable (reported)."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read(), path)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, CheckpointFormatError) as e:
        log.error("ignoring %s: %s", path, e)
        return {}


def write(path: str, entries: Mapping[tuple[str, int], int]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(format_entries(entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
