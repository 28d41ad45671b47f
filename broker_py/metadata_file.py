"""The JSON files under ``<first log dir>/__logstore_metadata/`` in which a single
broker keeps what Kafka keeps in its controller (topics, dynamic configs).

A file is replaced whole: written to ``<name>.tmp``, fsynced, renamed over the old
one, and the directory fsynced, so a crash leaves the old or the new file, never part.
"""

from __future__ import annotations

import json
import os
from typing import Any

from broker_py.errors import KafkaStorageError

METADATA_DIR = "__logstore_metadata"


def read(path: str) -> Any | None:
    """The file's document, or None when there is no file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def write(path: str, doc: Any) -> None:
    """Replaces the file with ``doc``; KafkaStorageError (the old file intact) when the
    disk refuses the new one."""
    directory = os.path.dirname(path)
    tmp = path + ".tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        try:
            os.unlink(tmp)  # what part of it was written, to give the space back
        except OSError:
            pass
        raise KafkaStorageError(f"writing {path}: {e.strerror or e}") from None
