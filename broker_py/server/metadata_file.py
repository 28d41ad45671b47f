"""The JSON files under ``<first log dir>/__logstore_metadata/`` in which a single
broker keeps what Kafka keeps in its controller (topics, dynamic configs).

A file is replaced whole: written to ``<name>.tmp``, fsynced, renamed over the old
one, and the directory fsynced, so a crash leaves the old or the new file, never part.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from logstore.protocol.errors import KafkaException, KafkaStorageError

T = TypeVar("T")

METADATA_DIR = "__logstore_metadata"


class MetadataFileError(KafkaException):
    """A metadata file that cannot be read as what it should hold; names the file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def load(path: str, parse: Callable[[dict[str, Any]], T]) -> T | None:
    """``parse`` applied to the file's JSON object, or None when there is no file. A file
    that is not JSON, not an object, or not what ``parse`` expects (a missing key, a
    value of the wrong type or form) raises MetadataFileError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataFileError(path, f"cannot be read: {e}") from None
    except json.JSONDecodeError as e:
        raise MetadataFileError(path, f"is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MetadataFileError(path, f"holds a JSON {type(doc).__name__}, not an object")
    try:
        return parse(doc)
    except KeyError as e:
        raise MetadataFileError(path, f"lacks the key or names an unknown value {e}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise MetadataFileError(path, f"has a malformed entry: {e}") from None


def write(path: str, doc: Any) -> None:
    """Replaces the file with ``doc`` as JSON (see :func:`write_text`)."""
    write_text(path, json.dumps(doc, indent=1, sort_keys=True))


def write_text(path: str, text: str) -> None:
    """Replaces the file with ``text``: a temporary file, fsynced, renamed over it, and
    the directory fsynced. KafkaStorageError (the old file intact) when the disk refuses
    the new one."""
    directory = os.path.dirname(path)
    tmp = path + ".tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
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
