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
SECRET_MODE = 0o600  # files holding secrets: SCRAM credentials, dynamic broker configs


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


def restrict(path: str, mode: int = SECRET_MODE) -> None:
    """Gives an existing file (one written before its secrets were kept private)
    permission bits ``mode``; nothing when there is no file."""
    try:
        if os.stat(path).st_mode & 0o777 != mode:
            os.chmod(path, mode)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise KafkaStorageError(
            f"restricting the permissions of {path}: {e.strerror or e}"
        ) from None


def sync_dir(directory: str) -> None:
    """fsyncs ``directory``, so a rename in it survives a crash (OSError if it fails)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path: str, doc: Any, compact: bool = False, mode: int = 0o644) -> None:
    """Replaces the file with ``doc`` as JSON (see :func:`write_text`): indented, or on
    one line with ``compact`` (several times faster to encode, for large files)."""
    text = (
        json.dumps(doc, separators=(",", ":"), sort_keys=True)
        if compact
        else json.dumps(doc, indent=1, sort_keys=True)
    )
    write_text(path, text, mode)


def write_text(path: str, text: str, mode: int = 0o644) -> None:
    """Replaces the file with ``text``: a temporary file, fsynced, renamed over it, and
    the directory fsynced. KafkaStorageError (the old file intact) when the disk refuses
    the new one. The file has permission bits ``mode`` (``SECRET_MODE`` for a file
    holding secrets: it is never readable by others, not even for a moment)."""
    directory = os.path.dirname(path)
    tmp = path + ".tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        try:
            os.unlink(tmp)  # a leftover may have other permission bits
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        os.fchmod(fd, mode)  # whatever the umask
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        sync_dir(directory)
    except OSError as e:
        try:
            os.unlink(tmp)  # what part of it was written, to give the space back
        except OSError:
            pass
        raise KafkaStorageError(f"writing {path}: {e.strerror or e}") from None
