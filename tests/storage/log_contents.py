"""What a log holds, read through the implementation: (offset, key, value) of every
record from the log start to the log end, in offset order."""

from __future__ import annotations

import logstore as ls


def records(log: ls.Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        assert data, f"nothing readable at {offset} below the log end {log.log_end_offset}"
        for b in ls.decode_batches(data):
            out += [(r.offset, r.key, r.value) for r in b.records]
            offset = b.last_offset + 1
    return out
