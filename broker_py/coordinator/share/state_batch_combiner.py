"""Merging the state batches of a share-partition (Kafka's ``PersisterStateBatchCombiner``).

Input: the batches held so far, the batches of a write, and the start offset (-1: keep
every batch). Output: batches sorted by offset, none overlapping, none below the start
offset (a batch across it is cut at it), and no two adjacent with the same delivery
state and count (they are one batch).

Where batches overlap, each offset takes the batch of highest priority: the higher
delivery count, then the higher delivery state (0 AVAILABLE < 1 ACQUIRED < 2
ACKNOWLEDGED < 4 ARCHIVED). A delivery only ever moves forward in that order, so the
newer knowledge of an offset wins whichever write brought it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from broker_py.coordinator.share.share_coordinator_records import StateBatch


def _priority(b: StateBatch) -> tuple[int, int]:
    return (b.delivery_count, b.delivery_state)


def combine(
    so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    batches = [b for b in (*so_far, *new) if b.last_offset >= b.first_offset]
    if start_offset != -1:
        batches = [
            b if b.first_offset >= start_offset else StateBatch(start_offset, *_tail(b))
            for b in batches
            if b.last_offset >= start_offset
        ]
    if not batches:
        return ()
    # Sweep the boundaries: between two consecutive ones the covering batch of highest
    # priority holds the offsets.
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    by_first = sorted(batches, key=lambda b: b.first_offset)
    live: list[tuple[int, int, int, int]] = []  # (-count, -state, -last, index in by_first)
    out: list[StateBatch] = []
    i = 0
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        while i < len(by_first) and by_first[i].first_offset <= lo:
            b = by_first[i]
            heapq.heappush(live, (-b.delivery_count, -b.delivery_state, -b.last_offset, i))
            i += 1
        while live and -live[0][2] < lo:
            heapq.heappop(live)
        if not live:
            continue
        top = by_first[live[0][3]]
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == lo and _priority(last) == _priority(top):
            out[-1] = StateBatch(last.first_offset, hi - 1, top.delivery_state, top.delivery_count)
        else:
            out.append(StateBatch(lo, hi - 1, top.delivery_state, top.delivery_count))
    return tuple(out)


def _tail(b: StateBatch) -> tuple[int, int, int]:
    return (b.last_offset, b.delivery_state, b.delivery_count)
