"""The aborted transactions of one partition, in Kafka's ``.txnindex`` files.

A read_committed consumer drops the batches of aborted transactions itself; the
broker tells it which ones, in each fetch response, as (producer id, first offset)
pairs. Those come from this index: an entry is added when an ABORT marker is
appended, to the file of the segment the marker went to.

File ``<segment base offset, 20 digits>.txnindex``: entries of 34 bytes, big-endian::

    version            int16 = 0
    producer_id        int64
    first_offset       int64   first offset of the transaction's data
    last_offset        int64   offset of the ABORT marker
    last_stable_offset int64   the partition's LSO once the transaction ended

Invariants:
- entries are in marker order, so ``last_offset`` only grows across the index;
- an entry's ``last_offset`` is below the log end offset (an entry past it, left by
  a crash that lost the marker's tail of the log, is dropped on load);
- a file whose entries all end below the log start offset is deleted (its segment
  went to retention, DeleteRecords or the cleaner).

A trailing partial entry (a crash mid-write) is ignored and cut off on the next
write to that file.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import re
import struct

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0
_NAME = re.compile(r"^(\d{20})\.txnindex$")


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def file_name(segment_base_offset: int) -> str:
    return f"{segment_base_offset:020d}.txnindex"


class TransactionIndex:
    def __init__(
        self,
        directory: str,
        log_start_offset: int,
        log_end_offset: int,
        names: list[str] | None = None,
    ) -> None:
        """``names``: the directory's file names, when the caller has listed it."""
        self._dir = directory
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # parallel to _entries, for bisect
        self._files: dict[int, list[AbortedTxn]] = {}  # segment base -> the entries of its file
        self._load(log_start_offset, log_end_offset, names)

    def moved_to(self, directory: str) -> None:
        """The partition's files now live in ``directory`` (a move between log dirs)."""
        self._dir = directory

    def __len__(self) -> int:
        return len(self._entries)

    def _path(self, base: int) -> str:
        return os.path.join(self._dir, file_name(base))

    def _load(self, log_start_offset: int, log_end_offset: int, names: list[str] | None) -> None:
        if names is None:
            try:
                names = os.listdir(self._dir)
            except FileNotFoundError:
                names = []
        for base in sorted(int(m[1]) for n in names if (m := _NAME.match(n))):
            path = self._path(base)
            with open(path, "rb") as f:
                data = f.read()
            read = []
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                if version != _VERSION:
                    log.warning(
                        "%s: entry at byte %d has version %d; the rest of the file is ignored",
                        path,
                        pos,
                        version,
                    )
                    break
                read.append(AbortedTxn(pid, first, last, lso))
            kept = [e for e in read if e.last_offset < log_end_offset]
            self._files[base] = kept
            if len(kept) * _ENTRY.size != len(data):
                self._store(base)
        self._reindex()
        self.delete_before(log_start_offset)

    def _reindex(self) -> None:
        self._entries = sorted(
            (e for entries in self._files.values() for e in entries), key=lambda e: e.last_offset
        )
        self._last_offsets = [e.last_offset for e in self._entries]

    def _store(self, base: int) -> None:
        """Writes segment ``base``'s file whole, or deletes it when it has no entries."""
        entries = self._files.get(base)
        path = self._path(base)
        if not entries:
            self._files.pop(base, None)
            if os.path.exists(path):
                os.unlink(path)
            return
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(_ENTRY.pack(_VERSION, *dataclasses.astuple(e)) for e in entries))
        os.replace(tmp, path)

    def append(self, entry: AbortedTxn, segment_base_offset: int) -> None:
        """Adds the entry of an ABORT marker just written to segment ``segment_base_offset``."""
        entries = self._files.setdefault(segment_base_offset, [])
        with open(self._path(segment_base_offset), "ab") as f:
            if f.tell() != len(entries) * _ENTRY.size:
                f.truncate(len(entries) * _ENTRY.size)
            f.write(_ENTRY.pack(_VERSION, *dataclasses.astuple(entry)))
        entries.append(entry)
        i = bisect.bisect_right(self._last_offsets, entry.last_offset)
        self._entries.insert(i, entry)
        self._last_offsets.insert(i, entry.last_offset)

    def contains(self, producer_id: int, last_offset: int) -> bool:
        i = bisect.bisect_left(self._last_offsets, last_offset)
        while i < len(self._entries) and self._last_offsets[i] == last_offset:
            if self._entries[i].producer_id == producer_id:
                return True
            i += 1
        return False

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap ``[fetch_offset, upper_bound_offset)``:
        those a consumer reading that range must filter."""
        i = bisect.bisect_left(self._last_offsets, fetch_offset)
        out = []
        for e in self._entries[i:]:
            if e.first_offset < upper_bound_offset:
                out.append(e)
        return out

    def truncate_to(self, end_offset: int) -> None:
        """Drops entries whose marker is at or past ``end_offset`` (the log was truncated)."""
        if not self._last_offsets or self._last_offsets[-1] < end_offset:
            return
        for base in list(self._files):
            before = self._files[base]
            self._files[base] = [e for e in before if e.last_offset < end_offset]
            if len(self._files[base]) != len(before):
                self._store(base)
        self._reindex()

    def delete_before(self, log_start_offset: int) -> int:
        """Deletes the files whose every entry ends below ``log_start_offset``; how many."""
        gone = [
            base
            for base, entries in self._files.items()
            if not entries or entries[-1].last_offset < log_start_offset
        ]
        for base in gone:
            self._files[base] = []
            self._store(base)
        if gone:
            self._reindex()
        return len(gone)
