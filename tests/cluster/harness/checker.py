"""A pure checker of a queue history, in the spirit of Jepsen's queue workload
(jepsen-io/redpanda, ``workload/queue.clj``). No I/O: it takes a history and returns a
:class:`CheckResult`.

History: a sequence of operations in the order they happened (each process's own
operations in its program order):

- :class:`Send`: a producer ``process`` sent ``value`` to ``partition``; ``outcome`` is
  ``"ok"`` (acknowledged, ``offset`` is the acknowledged offset or None if the client
  gave none), ``"fail"`` (definitely not written: the broker rejected it before any
  append) or ``"info"`` (unknown: a timeout, a lost connection, never completed). A
  producer's sends appear in the order it invoked them.
- :class:`Poll`: a consumer ``process`` read ``records``, ``(offset, value)`` pairs in
  the order the client returned them, from ``partition``. A poll that returned several
  partitions is recorded as one Poll per partition.
- :class:`Reset`: a consumer's position moved on purpose (assign, seek, rebalance,
  restart): its next read of those partitions is not compared with its previous one.
- :class:`ReplicaRead`: the records found in one replica's log (e.g. read from its
  segment files by :mod:`.replicas`); they take part in the offset/value agreement
  checks, not in what consumers read.

Values are unique strings (``"<client>-<n>"``); partitions any hashable key.

The *version log* of a partition maps each offset to the set of values any source put
there: acknowledged sends with offsets, polls, replica reads. Anomalies:

- ``inconsistent_offsets``: (partition, offset) pairs with two or more values.
- ``duplicates``: values found at two or more (partition, offset) positions.
- ``lost``: acknowledged sends whose value no poll returned although some poll of the
  partition read at or past the acknowledged offset (Jepsen's lost write: a later
  write was read, so this one should have been).
- ``unseen``: acknowledged sends never read and not counted as lost (offset unknown, or
  beyond everything read). Only an anomaly when ``final_reads_complete``: consumers
  read every partition to its end offset after the last send completed.
- ``nonmonotonic_polls``: a consumer reading an offset at or below the one it read
  before in the partition, with no Reset between.
- ``poll_skips``: a consumer going from offset o1 to o2 > o1 + 1 in a partition while
  the version log holds a value strictly between them (offsets with no known value are
  transaction markers, compacted or aborted records and are fine; ``skippable`` names
  more offsets to ignore).
- ``nonmonotonic_sends``: a producer's acknowledged offsets in one partition not
  increasing in the order it sent (allowed only without idempotence and with several
  requests in flight; the workload uses idempotence or one request in flight).
- ``unacked_landed``: sends that failed or whose outcome is unknown, yet whose value
  was read (expected now and then for unknown outcomes); ``failed_landed`` the
  definite failures among them, an anomaly (Jepsen's aborted read).
- ``unexpected``: values read that no send in the history wrote.

``CheckResult.ok``: every anomaly count is zero (``unseen`` only counts with
``final_reads_complete``; ``unacked_landed`` is informative, ``failed_landed`` counts).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"
OUTCOMES = (OK, FAIL, INFO)


@dataclass
class Send:
    """One send. Mutable so that a workload can record the invocation at once
    (outcome ``"info"``) and fill in the completion later. Times: monotonic seconds."""

    process: str
    value: str
    partition: Hashable
    outcome: str = INFO
    offset: int | None = None
    invoked: float = 0.0
    completed: float | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")


@dataclass(frozen=True)
class Poll:
    process: str
    partition: Hashable
    records: tuple[tuple[int, str], ...]
    time: float = 0.0


@dataclass(frozen=True)
class Reset:
    """``partitions`` None: every partition of the consumer."""

    process: str
    partitions: tuple[Hashable, ...] | None = None
    time: float = 0.0


@dataclass(frozen=True)
class ReplicaRead:
    replica: str
    partition: Hashable
    records: tuple[tuple[int, str], ...]


Op = Send | Poll | Reset | ReplicaRead

# The anomaly counts that make a result not ok (``unseen`` conditionally).
ANOMALIES = (
    "lost",
    "unseen",
    "duplicates",
    "inconsistent_offsets",
    "nonmonotonic_polls",
    "poll_skips",
    "nonmonotonic_sends",
    "failed_landed",
    "unexpected",
)


@dataclass
class CheckResult:
    sends: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    records_read: int = 0
    values_read: int = 0
    lost: int = 0
    unseen: int = 0
    duplicates: int = 0
    inconsistent_offsets: int = 0
    nonmonotonic_polls: int = 0
    poll_skips: int = 0
    nonmonotonic_sends: int = 0
    unacked_landed: int = 0
    failed_landed: int = 0
    unexpected: int = 0
    final_reads_complete: bool = False
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def anomalies(self, ignore: Iterable[str] = ()) -> dict[str, int]:
        """Nonzero anomaly counts, minus ``ignore``."""
        skip = set(ignore)
        if not self.final_reads_complete:
            skip.add("unseen")
        return {
            name: getattr(self, name)
            for name in ANOMALIES
            if name not in skip and getattr(self, name)
        }

    @property
    def ok(self) -> bool:
        return not self.anomalies()

    def ok_ignoring(self, *names: str) -> bool:
        """ok but for the named anomalies (e.g. ``"duplicates"`` without idempotence)."""
        unknown = set(names) - set(ANOMALIES)
        if unknown:
            raise ValueError(f"unknown anomalies {sorted(unknown)}")
        return not self.anomalies(names)

    def summary(self) -> str:
        counts = ", ".join(
            f"{name}={getattr(self, name)}" for name in ANOMALIES + ("unacked_landed",)
        )
        head = (
            f"{'OK' if self.ok else 'ANOMALIES'}: {self.sends} sends "
            f"({self.acked} ok, {self.failed} fail, "
            f"{self.unknown} info), {self.records_read} records read ({self.values_read} values), "
            f"final reads {'complete' if self.final_reads_complete else 'incomplete'}; {counts}"
        )
        lines = [head] + [f"  {k}: {v}" for k, v in sorted(self.examples.items()) if v]
        return "\n".join(lines)


class _Examples:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.found: dict[str, list[Any]] = defaultdict(list)

    def add(self, kind: str, example: Any) -> None:
        if len(self.found[kind]) < self.limit:
            self.found[kind].append(example)


def check(
    history: Iterable[Op],
    *,
    final_reads_complete: bool = False,
    skippable: Iterable[tuple[Hashable, int]] = (),
    max_examples: int = 10,
) -> CheckResult:
    """Checks ``history`` (see the module docstring); ``max_examples`` per anomaly."""
    ops = list(history)
    res = CheckResult(final_reads_complete=final_reads_complete)
    ex = _Examples(max_examples)
    skip = set(skippable)

    sends = [op for op in ops if isinstance(op, Send)]
    res.sends = len(sends)
    res.acked = sum(s.outcome == OK for s in sends)
    res.failed = sum(s.outcome == FAIL for s in sends)
    res.unknown = sum(s.outcome == INFO for s in sends)

    # The version log: partition -> offset -> values; and value -> positions.
    log: dict[Hashable, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in sends:
        if s.outcome == OK and s.offset is not None:
            log[s.partition][s.offset].add(s.value)
    read: set[str] = set()
    max_read: dict[Hashable, int] = {}
    for op in ops:
        if isinstance(op, Poll | ReplicaRead):
            for offset, value in op.records:
                log[op.partition][offset].add(value)
            if isinstance(op, Poll):
                res.records_read += len(op.records)
                for offset, value in op.records:
                    read.add(value)
                    if offset > max_read.get(op.partition, -1):
                        max_read[op.partition] = offset
    res.values_read = len(read)

    positions: dict[str, set[tuple[Hashable, int]]] = defaultdict(set)
    for p in sorted(log, key=repr):
        for offset in sorted(log[p]):
            values = log[p][offset]
            if len(values) > 1:
                res.inconsistent_offsets += 1
                ex.add("inconsistent_offsets", (p, offset, sorted(values)))
            for v in values:
                positions[v].add((p, offset))
    for v, where in positions.items():
        if len(where) > 1:
            res.duplicates += 1
            ex.add("duplicates", (v, sorted(where, key=repr)))

    # Acknowledged writes that were never read.
    for s in sends:
        if s.outcome != OK or s.value in read:
            continue
        if s.offset is not None and s.offset <= max_read.get(s.partition, -1):
            res.lost += 1
            ex.add("lost", (s.value, s.partition, s.offset))
        else:
            res.unseen += 1
            ex.add("unseen", (s.value, s.partition, s.offset))

    written = {s.value for s in sends}
    for v in sorted(read - written):
        res.unexpected += 1
        ex.add("unexpected", v)
    for s in sends:
        if s.outcome != OK and s.value in read:
            res.unacked_landed += 1
            ex.add("unacked_landed", (s.value, s.outcome, s.error))
            if s.outcome == FAIL:
                res.failed_landed += 1
                ex.add("failed_landed", (s.value, s.error))

    # Each consumer's successive reads of a partition.
    known = {p: sorted(offsets) for p, offsets in log.items()}
    last: dict[str, dict[Hashable, int]] = defaultdict(dict)
    for op in ops:
        if isinstance(op, Reset):
            if op.partitions is None:
                last[op.process].clear()
            else:
                for p in op.partitions:
                    last[op.process].pop(p, None)
        elif isinstance(op, Poll):
            seen = last[op.process]
            for offset, _value in op.records:
                prev = seen.get(op.partition)
                if prev is not None:
                    if offset <= prev:
                        res.nonmonotonic_polls += 1
                        ex.add("nonmonotonic_polls", (op.process, op.partition, prev, offset))
                    elif offset > prev + 1:
                        skipped = _between(
                            known.get(op.partition, []), prev, offset, op.partition, skip
                        )
                        if skipped:
                            res.poll_skips += 1
                            ex.add(
                                "poll_skips", (op.process, op.partition, prev, offset, skipped[:10])
                            )
                seen[op.partition] = offset

    # Each producer's acknowledged offsets per partition, in send order.
    sent: dict[tuple[str, Hashable], int] = {}
    for s in sends:
        if s.outcome != OK or s.offset is None:
            continue
        key = (s.process, s.partition)
        prev = sent.get(key)
        if prev is not None and s.offset <= prev:
            res.nonmonotonic_sends += 1
            ex.add("nonmonotonic_sends", (s.process, s.partition, prev, s.offset, s.value))
        sent[key] = s.offset

    res.examples = dict(ex.found)
    return res


def _between(
    offsets: Sequence[int], lo: int, hi: int, partition: Hashable, skip: set[tuple[Hashable, int]]
) -> list[int]:
    """Known offsets strictly between ``lo`` and ``hi`` that are not skippable."""
    i = bisect.bisect_right(offsets, lo)
    j = bisect.bisect_left(offsets, hi)
    return [o for o in offsets[i:j] if (partition, o) not in skip]


def longest_ack_gap(sends: Iterable[Send], process: str | None = None) -> float:
    """The longest time in seconds between two consecutive acknowledgements (by
    completion time) of one producer: ``process``'s, or the largest over all
    producers. 0.0 with fewer than two acknowledgements."""
    by_process: dict[str, list[float]] = defaultdict(list)
    for s in sends:
        if (
            s.outcome == OK
            and s.completed is not None
            and (process is None or s.process == process)
        ):
            by_process[s.process].append(s.completed)
    gap = 0.0
    for times in by_process.values():
        times.sort()
        for a, b in zip(times, times[1:], strict=False):
            gap = max(gap, b - a)
    return gap
