"""The mirror's measurements under MirrorMaker 2's metric names (pure; the clock is
injected), exposed by :mod:`.metrics`.

Per remote topic partition (MM2's ``MirrorSourceConnector`` metrics, labels ``target``,
``topic``, ``partition``): ``record-count`` (records copied since start), ``record-rate``
(per second over the window), ``byte-count``, ``byte-rate``, ``record-age-ms`` (age of
the last copied record when it was read: now - its timestamp) with ``-min``, ``-max``,
``-avg`` over the window (per polled batch: the first and last record's ages),
``replication-latency-ms`` (now - record timestamp when the
target acknowledged it) with ``-min``, ``-max``, ``-avg``.

Per group and remote topic partition (``MirrorCheckpointConnector``, labels ``source``,
``target``, ``group``, ``topic``, ``partition``): ``checkpoint-latency-ms`` (now - the
time the checkpointed offset was read from the source) with ``-min``, ``-max``, ``-avg``.

The window is :data:`WINDOW_S` seconds, kept as one-second buckets.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 30


@dataclass
class _Bucket:
    second: int
    count: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")


class Stat:
    """Last value, and min/max/avg/sum over the window, of a series of samples."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._buckets: deque[_Bucket] = deque()
        self.last: float = 0.0
        self.cumulative: float = 0.0

    def _expire(self, now: int) -> None:
        while self._buckets and self._buckets[0].second <= now - WINDOW_S:
            self._buckets.popleft()

    def record(
        self, value: float, count: int = 1, low: float | None = None, high: float | None = None
    ) -> None:
        """``count`` samples summing to ``value * count`` (``value`` their average);
        ``low`` and ``high``: the smallest and largest of them when not all equal."""
        now = int(self._clock())
        self._expire(now)
        if not self._buckets or self._buckets[-1].second != now:
            self._buckets.append(_Bucket(now))
        b = self._buckets[-1]
        b.count += count
        b.total += value * count
        b.low = min(b.low, value if low is None else low)
        b.high = max(b.high, value if high is None else high)
        self.last = value
        self.cumulative += value * count

    def window(self) -> tuple[int, float, float, float]:
        """(count, sum, min, max) over the window; min and max 0 when empty."""
        self._expire(int(self._clock()))
        n = sum(b.count for b in self._buckets)
        if n == 0:
            return 0, 0.0, 0.0, 0.0
        total = sum(b.total for b in self._buckets)
        return (
            n,
            total,
            min(b.low for b in self._buckets),
            max(b.high for b in self._buckets),
        )

    def rate(self) -> float:
        """Sum per second over the window (or since the first sample, if younger)."""
        _, total, _, _ = self.window()
        if not self._buckets:
            return 0.0
        span = min(WINDOW_S, max(1.0, self._clock() - self._buckets[0].second))
        return total / span


class _Partition:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.records = Stat(clock)
        self.bytes = Stat(clock)
        self.age = Stat(clock)
        self.latency = Stat(clock)


Sample = tuple[str, str, dict[str, str], float]  # (MBean type, metric, labels, value)


class Sensors:
    def __init__(self, source: str, target: str, clock: Callable[[], float]) -> None:
        self.source = source
        self.target = target
        self._clock = clock
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._checkpoints: dict[tuple[str, str, int], Stat] = {}
        # the copier's thread records, the metrics server's thread reads
        self._lock = threading.Lock()

    def _part(self, topic: str, partition: int) -> _Partition:
        p = self._partitions.get((topic, partition))
        if p is None:
            p = self._partitions[(topic, partition)] = _Partition(self._clock)
        return p

    def copied(
        self, topic: str, partition: int, records: int, size: int, oldest_ts: int, newest_ts: int
    ) -> None:
        """``records`` records of ``size`` bytes (their values, as MM2 counts) read from the source,
        their timestamps from ``oldest_ts`` to ``newest_ts`` (ms)."""
        if records <= 0:
            return
        now_ms = self._clock() * 1000.0
        with self._lock:
            self._copied(topic, partition, records, size, now_ms - newest_ts, now_ms - oldest_ts)

    def _copied(
        self, topic: str, partition: int, records: int, size: int, newest: float, oldest: float
    ) -> None:
        p = self._part(topic, partition)
        p.records.record(1.0, records)
        p.bytes.record(float(size))
        newest_age = max(0.0, newest)
        oldest_age = max(0.0, oldest)
        # per batch: the mean of its first and last record's ages stands for its average
        p.age.record((newest_age + oldest_age) / 2, records, low=newest_age, high=oldest_age)
        p.age.last = newest_age

    def acknowledged(self, topic: str, partition: int, timestamp_ms: int) -> None:
        now_ms = self._clock() * 1000.0
        with self._lock:
            self._part(topic, partition).latency.record(max(0.0, now_ms - timestamp_ms))

    def checkpointed(self, group: str, topic: str, partition: int, read_at: float) -> None:
        with self._lock:
            stat = self._checkpoints.get((group, topic, partition))
            if stat is None:
                stat = self._checkpoints[(group, topic, partition)] = Stat(self._clock)
            stat.record(max(0.0, (self._clock() - read_at) * 1000.0))

    def samples(self) -> list[Sample]:
        with self._lock:
            return self._samples()

    def _samples(self) -> list[Sample]:
        out: list[Sample] = []
        for (topic, partition), p in sorted(self._partitions.items()):
            labels = {"target": self.target, "topic": topic, "partition": str(partition)}
            src = "MirrorSourceConnector"
            out.append((src, "record-count", labels, p.records.cumulative))
            out.append((src, "record-rate", labels, p.records.rate()))
            out.append((src, "byte-count", labels, p.bytes.cumulative))
            out.append((src, "byte-rate", labels, p.bytes.rate()))
            out += _latency(src, "record-age-ms", labels, p.age)
            out += _latency(src, "replication-latency-ms", labels, p.latency)
        for (group, topic, partition), stat in sorted(self._checkpoints.items()):
            labels = {
                "source": self.source,
                "target": self.target,
                "group": group,
                "topic": topic,
                "partition": str(partition),
            }
            out += _latency("MirrorCheckpointConnector", "checkpoint-latency-ms", labels, stat)
        return out


def _latency(kind: str, name: str, labels: dict[str, str], stat: Stat) -> list[Sample]:
    n, total, low, high = stat.window()
    return [
        (kind, name, labels, stat.last),
        (kind, name + "-min", labels, low),
        (kind, name + "-max", labels, high),
        (kind, name + "-avg", labels, total / n if n else 0.0),
    ]
