"""The .index, .timeindex and .txnindex files for ``logstore dump-log``: reading and
printing their entries, and checking them against the batches of the .log."""

from __future__ import annotations

import bisect
import os
import struct
from typing import IO

from logstore.cli.common import _sibling
from logstore.cli.log_scan import LogScan

OFFSET_INDEX_ENTRY = struct.Struct(">II")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qI")  # timestamp, relative offset
# version, producerId, firstOffset, lastOffset, lastStableOffset
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")


def _read_entries(path: str, entry: struct.Struct) -> tuple[list[tuple], int, int]:
    """(entries, zeroed trailing entries ignored, trailing partial bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    whole = len(data) - len(data) % entry.size
    total = whole // entry.size
    # Preallocated (mmap) index files end in zeroed entries: drop the zeros after
    # the last real entry, but keep the first entry (it may really be (0, 0))
    # unless the whole preallocated file is zeros (an empty active segment).
    used = len(data[:whole].rstrip(b"\0"))
    keep = min(total, max(1 if used or total == 1 else 0, -(-used // entry.size)))
    entries = [entry.unpack_from(data, i * entry.size) for i in range(keep)]
    return entries, total - keep, len(data) - whole


def _zero_note(zeroed: int, partial: int, path: str, out: IO[str]) -> int:
    problems = 0
    if zeroed:
        out.write(f"({zeroed} zeroed preallocated entries not shown)\n")
    if partial:
        out.write(f"Found {partial} trailing bytes that are not a whole index entry in {path}\n")
        problems += 1
    return problems


def _dump_offset_index(path: str, base: int, out: IO[str]) -> tuple[list[tuple[int, int]], int]:
    raw, zeroed, partial = _read_entries(path, OFFSET_INDEX_ENTRY)
    entries = [(base + rel, position) for rel, position in raw]
    for offset, position in entries:
        out.write(f"offset: {offset} position: {position}\n")
    return entries, _zero_note(zeroed, partial, path, out)


def _dump_time_index(path: str, base: int, out: IO[str]) -> tuple[list[tuple[int, int]], int]:
    raw, zeroed, partial = _read_entries(path, TIME_INDEX_ENTRY)
    entries = [(timestamp, base + rel) for timestamp, rel in raw]
    for timestamp, offset in entries:
        out.write(f"timestamp: {timestamp} offset: {offset}\n")
    return entries, _zero_note(zeroed, partial, path, out)


def _dump_txn_index(path: str, out: IO[str]) -> int:
    with open(path, "rb") as f:
        data = f.read()
    whole = len(data) - len(data) % TXN_INDEX_ENTRY.size
    for off in range(0, whole, TXN_INDEX_ENTRY.size):
        version, pid, first, last, lso = TXN_INDEX_ENTRY.unpack_from(data, off)
        out.write(
            f"version: {version} producerId: {pid} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {lso}\n"
        )
    return _zero_note(0, len(data) - whole, path, out)


def _verify_offset_index(
    entries: list[tuple[int, int]], scan: LogScan, out: IO[str], path: str
) -> int:
    by_position = {b.position: b for b in scan.batches}
    mismatches = 0
    previous: tuple[int, int] | None = None
    for offset, position in entries:
        reason = None
        batch = by_position.get(position)
        if not scan.batches and (offset, position) == (entries[0][0], 0) and len(entries) == 1:
            continue  # a zeroed, preallocated index of an empty segment
        if previous is not None and offset <= previous[0]:
            reason = f"offset does not increase (previous entry offset: {previous[0]})"
        elif previous is not None and position <= previous[1]:
            reason = f"position does not increase (previous entry position: {previous[1]})"
        elif batch is None:
            reason = "no batch starts at this position"
        elif not batch.base_offset <= offset <= batch.last_offset:
            reason = (
                f"the batch at this position holds offsets {batch.base_offset}..{batch.last_offset}"
            )
        previous = (offset, position)
        if reason:
            mismatches += 1
            out.write(
                f"Index mismatch in {path}: offset: {offset} position: {position}: {reason}\n"
            )
    return mismatches


def _verify_time_index(
    entries: list[tuple[int, int]], scan: LogScan, out: IO[str], path: str
) -> int:
    batches = scan.batches
    last_offsets = [b.last_offset for b in batches]
    running_max = []
    current = -1
    for b in batches:
        current = max(current, b.max_timestamp)
        running_max.append(current)
    mismatches = 0
    previous: tuple[int, int] | None = None
    for timestamp, offset in entries:
        if not batches and timestamp == 0 and len(entries) == 1:
            continue  # a zeroed, preallocated index of an empty segment
        reason = None
        i = bisect.bisect_left(last_offsets, offset)
        if previous is not None and timestamp < previous[0]:
            reason = f"timestamp decreases (previous entry timestamp: {previous[0]})"
        elif previous is not None and offset < previous[1]:
            reason = f"offset decreases (previous entry offset: {previous[1]})"
        elif i == len(batches) or batches[i].base_offset > offset:
            reason = "no batch holds this offset"
        elif timestamp > running_max[i]:
            reason = f"largest timestamp in the log up to this offset is {running_max[i]}"
        previous = (timestamp, offset)
        if reason:
            mismatches += 1
            out.write(
                f"Time index mismatch in {path}: timestamp: {timestamp} offset: {offset}: "
                f"{reason}\n"
            )
    return mismatches


def _verify_indexes(log_path: str, base: int, scan: LogScan, out: IO[str]) -> int:
    mismatches = 0
    for kind, dump, verify in (
        ("index", _read_offset_entries, _verify_offset_index),
        ("timeindex", _read_time_entries, _verify_time_index),
    ):
        index_path = _sibling(log_path, kind)
        if not os.path.exists(index_path):
            out.write(f"No {kind} file {index_path} (nothing to verify)\n")
            continue
        entries, problems = dump(index_path, base)
        found = verify(entries, scan, out, index_path) + problems
        mismatches += found
        verdict = "ok" if not found else f"{found} mismatches"
        out.write(f"Verified {len(entries)} entries of {index_path}: {verdict}\n")
    return mismatches


def _read_offset_entries(path: str, base: int) -> tuple[list[tuple[int, int]], int]:
    raw, _, partial = _read_entries(path, OFFSET_INDEX_ENTRY)
    return [(base + rel, pos) for rel, pos in raw], int(bool(partial))


def _read_time_entries(path: str, base: int) -> tuple[list[tuple[int, int]], int]:
    raw, _, partial = _read_entries(path, TIME_INDEX_ENTRY)
    return [(ts, base + rel) for ts, rel in raw], int(bool(partial))
