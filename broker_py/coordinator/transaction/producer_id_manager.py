"""Allocates producer ids for InitProducerId, never handing out the same id twice.

Ids are reserved in blocks: the file ``__logstore_metadata/producer-id-block`` holds
the first id of the next unreserved block. It is advanced (written, fsynced, renamed,
its directory fsynced: ``metadata_file.write_text``) before any id of a new block is
handed out, so a restart never reuses an id.
"""

from __future__ import annotations

import logging
import os

from broker_py.server import metadata_file
from logstore.protocol.errors import CoordinatorLoadInProgressError, KafkaStorageError
from broker_py.server.metadata_file import MetadataFileError
from broker_py.controller.topic_metadata import METADATA_DIR

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, log_dir: str) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, "producer-id-block")
        self._next = 0
        self._block_end = 0
        try:
            with open(self._path, encoding="utf-8") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as e:
            raise MetadataFileError(self._path, f"cannot be read: {e}") from None
        if not text.isdigit():
            raise MetadataFileError(self._path, f"holds {text[:40]!r}, not the next producer id block")
        self._next = self._block_end = int(text)

    def _reserve(self) -> None:
        """Persists the end of a new block (CoordinatorLoadInProgressError when the disk
        refuses it: no id is handed out that a restart could hand out again)."""
        end = self._next + BLOCK_SIZE
        try:
            metadata_file.write_text(self._path, f"{end}\n")
        except KafkaStorageError as e:
            # As Kafka answers while it has no block of ids: a code clients retry.
            error = CoordinatorLoadInProgressError(f"no producer id block: {e}")
            log.error("%s", error)
            raise error from None
        self._block_end = end

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
