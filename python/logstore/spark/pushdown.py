"""Filter pushdown: Spark's filters on partition, offset and timestamp become
``RecordBounds``.

- partition: =, IN, <, <=, >, >= prune whole partitions; exact, so Spark drops them.
- offset: =, <, <=, >, >= narrow every range before a file is opened; exact.
- timestamp: =, <, <=, >, >= with a timezone-aware datetime narrow decoding (whole
  segments are skipped through the time index, batches through maxTimestamp). They
  are also handed back to Spark, which checks them again (cheap, and safe whatever
  the session time zone).
Anything else (including Not, and naive datetimes) is left to Spark.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from logstore.spark.offset_range import RecordBounds

_COMPARISONS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def _ms(value: object) -> int | None:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return math.floor(value.timestamp() * 1000)
    return None


def _merge_lower(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


def _merge_upper(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


class PushedFilters:
    """Accumulates the filters this source can use; ``bounds`` is the result."""

    def __init__(self) -> None:
        self.partitions: frozenset[int] | None = None
        self.min_offset: int | None = None
        self.end_offset: int | None = None
        self.min_ts: int | None = None
        self.max_ts: int | None = None

    @property
    def bounds(self) -> RecordBounds:
        return RecordBounds(
            self.partitions, self.min_offset, self.end_offset, self.min_ts, self.max_ts
        )

    def _partitions(self, allowed: Iterable[int]) -> None:
        s = frozenset(allowed)
        self.partitions = s if self.partitions is None else self.partitions & s

    def push(self, filters: list[Filter]) -> Iterator[Filter]:
        """Takes what it can; yields the filters Spark must still evaluate."""
        for f in filters:
            column = getattr(f, "attribute", None)
            if column == ("partition",) and self._push_partition(f):
                continue
            if column == ("offset",) and self._push_offset(f):
                continue
            if column == ("timestamp",):
                self._push_timestamp(f)
            yield f

    def _push_partition(self, f: Filter) -> bool:
        if isinstance(f, In) and all(isinstance(v, int) for v in f.value):
            self._partitions(f.value)
            return True
        if not isinstance(f, _COMPARISONS) or not isinstance(f.value, int):
            return False
        v = f.value
        # Partition ids are small: the set of allowed ids is explicit up to 2**16.
        universe = range(0, 1 << 16)
        keep = {
            EqualTo: lambda p: p == v,
            GreaterThan: lambda p: p > v,
            GreaterThanOrEqual: lambda p: p >= v,
            LessThan: lambda p: p < v,
            LessThanOrEqual: lambda p: p <= v,
        }[type(f)]
        self._partitions(p for p in universe if keep(p))
        return True

    def _push_offset(self, f: Filter) -> bool:
        if not isinstance(f, _COMPARISONS) or not isinstance(f.value, int):
            return False
        v = f.value
        if isinstance(f, (EqualTo, GreaterThanOrEqual)):
            self.min_offset = _merge_lower(self.min_offset, v)
        if isinstance(f, GreaterThan):
            self.min_offset = _merge_lower(self.min_offset, v + 1)
        if isinstance(f, (EqualTo, LessThanOrEqual)):
            self.end_offset = _merge_upper(self.end_offset, v + 1)
        if isinstance(f, LessThan):
            self.end_offset = _merge_upper(self.end_offset, v)
        return True

    def _push_timestamp(self, f: Filter) -> None:
        if not isinstance(f, _COMPARISONS):
            return
        ms = _ms(f.value)
        if ms is None:
            return
        # Timestamps are stored in ms; a bound inside a millisecond rounds outward.
        if isinstance(f, (EqualTo, GreaterThanOrEqual, GreaterThan)):
            self.min_ts = _merge_lower(self.min_ts, ms)
        if isinstance(f, (EqualTo, LessThanOrEqual, LessThan)):
            self.max_ts = _merge_upper(self.max_ts, ms + 1)
