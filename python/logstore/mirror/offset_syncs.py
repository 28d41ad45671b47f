"""MirrorMaker 2's offset syncs: the record format of ``mm2-offset-syncs.<target
alias>.internal``, the rule that decides when a sync is emitted, and the store that
translates a source offset into a target offset.

Record format (Schema structs, see :mod:`.structs`; no version header): key ``topic``
STRING (the *source* topic), ``partition`` INT32; value ``upstreamOffset`` INT64 (the
record's offset on the source), ``offset`` INT64 (its offset on the target).

Emission rule (:class:`PartitionState`, per source partition, as MM2's
``OffsetSyncWriter.PartitionState``): a copied record's (upstream, downstream) pair is
synced at once when any of: no sync yet in this process's lifetime; the downstream offset
is ``offset.lag.max`` or more past the last sync's downstream offset + 1; the upstream
offset is not the previous one + 1 (a gap: compaction, aborted transactions, a seek);
the downstream offset went backwards (the target was truncated). Every other pair is the
partition's "delayed" sync, emitted at the next periodic offset commit.

Translation (:class:`OffsetSyncStore`, as MM2's ``OffsetSyncStore.translateDownstream``):
the newest sync whose upstream offset is <= the group's offset ``g``: its downstream
offset when equal, that + 1 when ``g`` is past it (never further: records between two
syncs may have been dropped); -1 when every sync kept is newer than ``g``; nothing when
there is no sync for the partition.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from logstore.mirror import structs

MAX_SYNCS = 64  # syncs kept per partition by the store
MAX_FIRED_PER_RUN = 1000  # syncs one run of records may emit at once


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return structs.string(self.topic) + structs.int32(self.partition)

    def value(self) -> bytes:
        return structs.int64(self.upstream_offset) + structs.int64(self.downstream_offset)

    @staticmethod
    def decode(key: bytes | None, value: bytes | None) -> OffsetSync:
        k = structs.Reader(key)
        topic, partition = k.string(), k.int32()
        v = structs.Reader(value)
        return OffsetSync(topic, partition, v.int64(), v.int64())


class PartitionState:
    """The emission rule for one source partition (see the module docstring)."""

    __slots__ = ("max_offset_lag", "previous_upstream", "previous_downstream", "last_sync")

    def __init__(self, max_offset_lag: int) -> None:
        self.max_offset_lag = max_offset_lag
        self.previous_upstream = -1
        self.previous_downstream = -1
        self.last_sync = -1  # downstream offset of the last sync emitted

    def update(self, upstream: int, downstream: int) -> bool:
        """Records one copied pair; True when it must be synced at once."""
        fire = (
            self.last_sync == -1
            or downstream - (self.last_sync + 1) >= self.max_offset_lag
            or upstream - self.previous_upstream != 1
            or downstream < self.previous_downstream
        )
        if fire:
            self.last_sync = downstream
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        return fire

    def update_run(self, upstream: int, downstream: int, count: int) -> list[tuple[int, int]]:
        """Records ``count`` >= 1 pairs ``(upstream + i, downstream + i)`` at once, the
        same as :meth:`update` on each in order: the pairs that fired, oldest first (the
        newest :data:`MAX_FIRED_PER_RUN` of them)."""
        fired: list[tuple[int, int]] = []
        if self.update(upstream, downstream):
            fired.append((upstream, downstream))
        end = downstream + count - 1
        if count > 1:
            # After the first pair only the staleness condition can hold: it fires at
            # each downstream offset last_sync + 1 + max_offset_lag (at least 1 apart).
            step = max(1, self.max_offset_lag + 1)
            first = max(downstream + 1, self.last_sync + step)
            if first <= end:
                last = first + (end - first) // step * step
                start = max(first, last - (MAX_FIRED_PER_RUN - 1) * step)
                fired += [(upstream + (d - downstream), d) for d in range(start, last + 1, step)]
                del fired[:-MAX_FIRED_PER_RUN]
                self.last_sync = last
            self.previous_upstream = upstream + count - 1
            self.previous_downstream = end
        return fired


class OffsetSyncStore:
    """The syncs read from an offset-syncs topic, per source partition, and translation.

    Per partition the syncs are kept sorted by upstream offset, at most
    :data:`MAX_SYNCS`: when a new sync is added beyond that, the kept sync whose removal
    leaves the smallest upstream gap between its neighbours goes (the newest and oldest
    stay), so old offsets stay translatable with coarser precision. A sync whose upstream
    or downstream offset is not above the newest kept one (a topic recreated or
    truncated) replaces them all."""

    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition)
        pair = (sync.upstream_offset, sync.downstream_offset)
        kept = self._syncs.get(tp)
        if kept is None:
            self._syncs[tp] = [pair]
            return
        newest = kept[-1]
        if pair == newest:
            return
        if pair[0] <= newest[0] or pair[1] < newest[1]:
            kept[:] = [pair]
            return
        kept.append(pair)
        if len(kept) > MAX_SYNCS:
            gaps = [kept[i + 1][0] - kept[i - 1][0] for i in range(1, len(kept) - 1)]
            del kept[1 + gaps.index(min(gaps))]

    def syncs(self, topic: str, partition: int) -> list[tuple[int, int]]:
        return list(self._syncs.get((topic, partition), ()))

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """The target offset for the source offset ``upstream`` (module docstring)."""
        kept = self._syncs.get((topic, partition))
        if not kept:
            return None
        i = bisect.bisect_right(kept, (upstream, float("inf"))) - 1
        if i < 0:
            return -1
        up, down = kept[i]
        return down if up == upstream else down + 1
