"""What the console's sampler saw, kept for its charts. Pure: the caller passes the
clock reading with every sample.

Each sample is a time (seconds, any monotonic clock) and named values. A *counter*
(records written to a topic, offsets a group committed) only means something as a rate:
:meth:`History.rates` is its change per second between consecutive samples, a drop (a
topic recreated, a group's offsets reset back) counting as 0. A *gauge* (a group's lag)
is charted as sampled (:meth:`History.values`). Rates of a family of counters (every
``topic:*``) sum per pair of samples, so a member joining or leaving the family makes
no step. At most ``capacity`` samples are kept;
the oldest go first. A name missing from a sample has no point at that time.
"""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float
    values: dict[str, float]


class History:
    def __init__(self, capacity: int = 120) -> None:
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._samples: collections.deque[Sample] = collections.deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._samples)

    def record(self, at: float, values: dict[str, float]) -> None:
        """Adds a sample; one at or before the newest is ignored (the clock is monotonic)."""
        if self._samples and at <= self._samples[-1].at:
            return
        self._samples.append(Sample(at, dict(values)))

    def values(self, name: str) -> list[tuple[float, float]]:
        """(time, value) of every sample holding ``name``, oldest first."""
        return [(s.at, s.values[name]) for s in self._samples if name in s.values]

    def latest(self, name: str) -> float | None:
        for s in reversed(self._samples):
            if name in s.values:
                return s.values[name]
        return None

    def rates(self, name: str, prefix: bool = False) -> list[tuple[float, float]]:
        """(time, change per second since the previous sample) for each pair of
        consecutive samples that both hold ``name``; never below 0. With ``prefix``,
        the sum of those rates over every name starting with ``name`` (a name in only
        one of the two samples adds nothing to that pair)."""
        out = []
        previous: Sample | None = None
        for s in self._samples:
            if previous is not None:
                keys = (
                    [k for k in s.values if k.startswith(name)]
                    if prefix
                    else [name]
                    if name in s.values
                    else []
                )
                common = [k for k in keys if k in previous.values]
                if common:
                    rate = sum(max(0.0, s.values[k] - previous.values[k]) for k in common)
                    out.append((s.at, rate / (s.at - previous.at)))
            previous = s
        return out

    def rate(self, name: str, prefix: bool = False) -> float | None:
        """The newest rate of ``name`` (None until two samples hold it)."""
        rates = self.rates(name, prefix)
        return rates[-1][1] if rates else None
