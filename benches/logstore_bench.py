"""Helpers shared by the benches: units, paired baselines, the session's result table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MB = 1 << 20
KB = 1 << 10


def median_seconds(benchmark: Any) -> float | None:
    """Median seconds per iteration of the last run, None when benchmarks are disabled."""
    stats = getattr(benchmark, "stats", None)
    if not stats:
        return None
    return stats.stats.median


class PairedBaseline:
    """Times one baseline round right before each timed round of the benchmark.

    ``pedantic(setup=...)`` runs the setup before every round, outside the
    timed part; calling :meth:`run` there gives baseline and measured rounds
    in ABAB order, so both see the same machine (other processes, page cache,
    CPU frequency). The ratio is the median of the per-round ratios.
    """

    def __init__(self, warmup_rounds: int) -> None:
        self.skip = warmup_rounds
        self.seconds: list[float] = []

    def add(self, seconds: float) -> None:
        """Record one baseline round (those of the warmup rounds are dropped)."""
        if self.skip:
            self.skip -= 1
        else:
            self.seconds.append(seconds)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run and time one baseline round."""
        start = time.perf_counter()
        result = fn(*args)
        self.add(time.perf_counter() - start)
        return result

    def setup(self, fn: Callable[..., Any], *args: Any) -> Callable[[], None]:
        """A ``pedantic`` setup that runs one baseline round (and returns no arguments)."""

        def setup() -> None:
            self.run(fn, *args)

        return setup

    def median(self) -> float:
        return statistics.median(self.seconds)

    def ratio(self, benchmark: Any) -> float | None:
        """Median over rounds of baseline time / measured time (> 1: faster than baseline)."""
        stats = getattr(benchmark, "stats", None)
        if not stats or not self.seconds:
            return None
        measured = stats.stats.data
        return statistics.median(b / m for b, m in zip(self.seconds, measured, strict=True))


@dataclass
class Row:
    case: str
    impl: str
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class Section:
    title: str
    columns: list[tuple[str, str]]  # (key, header)
    rows: list[Row] = field(default_factory=list)


class BenchReport:
    """Results of one session, grouped by section; printed at the end."""

    def __init__(self) -> None:
        self.sections: dict[str, Section] = {}

    def section(self, name: str, title: str, columns: list[tuple[str, str]]) -> None:
        self.sections.setdefault(name, Section(title, columns))

    def add(self, name: str, case: str, impl: str, **values: float) -> Row:
        row = Row(case, impl, dict(values))
        self.sections[name].rows.append(row)
        return row

    def get(self, name: str, case: str, impl: str) -> Row | None:
        section = self.sections.get(name)
        if section is None:
            return None
        for row in reversed(section.rows):
            if row.case == case and row.impl == impl:
                return row
        return None

    def lines(self) -> list[str]:
        out: list[str] = []
        for section in self.sections.values():
            if not section.rows:
                continue
            headers = ["case", "impl"] + [header for _, header in section.columns]
            table = [headers]
            for row in section.rows:
                cells = [row.case, row.impl]
                for key, _ in section.columns:
                    value = row.values.get(key)
                    cells.append("" if value is None else _fmt(value))
                table.append(cells)
            widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
            out.append(section.title)
            for i, cells in enumerate(table):
                out.append(
                    "  "
                    + "  ".join(
                        c.ljust(w) if j < 2 else c.rjust(w)
                        for j, (c, w) in enumerate(zip(cells, widths, strict=True))
                    )
                )
                if i == 0:
                    out.append("  " + "  ".join("-" * w for w in widths))
            out.append("")
        return out


def _fmt(value: float) -> str:
    if isinstance(value, str):
        return value
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


REPORT = BenchReport()
