"""Allocates producer ids for InitProducerId, never handing out the same id twice.

Ids are reserved in blocks of 1000.

- A broker alone (:class:`ProducerIdManager`): the file
  ``__logstore_metadata/producer-id-block`` holds the first id of the next unreserved
  block. It is advanced (written, fsynced, renamed, its directory fsynced:
  ``metadata_file.write_text``) before any id of a new block is handed out, so a
  restart never reuses an id.
- A cluster (:class:`ZkProducerIdManager`): blocks are claimed from ZooKeeper's
  ``/latest_producer_id_block`` (conditional writes), so no two brokers ever hand out
  the same id. Claims run off the event loop; the next block is claimed once 90% of the
  current one is used, and while none is at hand InitProducerId answers
  COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR, MetadataFileError
from logstore.protocol.errors import CoordinatorLoadInProgressError, KafkaStorageError

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
            raise MetadataFileError(
                self._path, f"holds {text[:40]!r}, not the next producer id block"
            )
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


class ZkProducerIdManager:
    """Producer ids from blocks claimed by ``claim_block()`` (blocking; run in a thread),
    each a (first id, size) pair."""

    PREFETCH_AT = 0.9

    def __init__(self, claim_block: Callable[[], tuple[int, int]]) -> None:
        self._claim_block = claim_block
        self._next = 0
        self._end = 0  # exclusive
        self._block_size = BLOCK_SIZE
        self._prefetched: tuple[int, int] | None = None
        self._claiming: asyncio.Task | None = None

    async def start(self) -> None:
        """Claims the first block (a broker starting needs one before it answers)."""
        try:
            self._use(await asyncio.to_thread(self._claim_block))
        except Exception as e:  # noqa: BLE001 - ZooKeeper down: claimed on first use
            log.warning("no producer id block yet: %s", e)

    def _use(self, block: tuple[int, int]) -> None:
        first, size = block
        self._next, self._end, self._block_size = first, first + size, size

    def _claim_next(self) -> None:
        if self._claiming is None or self._claiming.done():
            self._claiming = asyncio.get_running_loop().create_task(self._claim())

    async def _claim(self) -> None:
        try:
            self._prefetched = await asyncio.to_thread(self._claim_block)
        except Exception as e:  # noqa: BLE001 - retried on the next InitProducerId
            log.error("claiming a producer id block: %s", e)

    def next_id(self) -> int:
        if self._next >= self._end:
            if self._prefetched is None:
                self._claim_next()
                raise CoordinatorLoadInProgressError(
                    "claiming a block of producer ids from ZooKeeper"
                )
            self._use(self._prefetched)
            self._prefetched = None
        pid = self._next
        self._next += 1
        if self._prefetched is None and self._end - self._next <= self._block_size * (
            1 - self.PREFETCH_AT
        ):
            self._claim_next()
        return pid
