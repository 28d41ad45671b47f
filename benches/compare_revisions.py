"""Runs bench selections on an earlier revision and on this tree, alternating, and
prints new/old ratios of the medians (what a change must show: ratio >= 0.95).

    python benches/compare_revisions.py BASE_REV [--iterations 3]

BASE_REV is checked out with ``git worktree`` into a temporary directory; its broker
runs from there, with the storage engine of the current install (the engine's Python
surface must be the same in both). Each iteration runs old then new, and the next one
new then old, so neither side always follows the other (the page cache and the host's
state favour whichever runs second). The benches are the end-to-end produce and
consume cases of 100 B messages, one-record Produce requests over a raw connection,
and the fetch-session bench. Figures are parsed from each run's summary table.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = [
    (
        "benches/test_end_to_end.py",
        "(test_produce and 100- and produce_batch) or (test_consume and 100- and on-500) or "
        "test_produce_request_rate",
    ),
    ("benches/test_fetch_sessions.py", None),
]
ROW_PATTERNS = [
    (
        re.compile(
            r"\s+(100 B, \d part(?:, acks=\w+)?)"
            r"\s+(produce_batch|consume 500/call, client gc on)\s+([\d,]+)"
        ),
        lambda m: {f"{m[1]} {m[2]} msg/s": float(m[3].replace(",", ""))},
    ),
    (
        re.compile(
            r"\s+1024 B, 1 record/request\s+raw produce\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)"
        ),
        lambda m: {
            f"raw produce, {float(m[1]):.0f} in flight, req/s": float(m[2].replace(",", "")),
            f"raw produce, {float(m[1]):.0f} in flight, broker CPU us/req": float(m[3])
            + float(m[4]),
        },
    ),
    (
        re.compile(
            r"\s+500 partitions\s+(sessionless|incremental)"
            r"\s+[\d.,]+\s+[\d.,]+\s+([\d.,]+)\s+([\d.,]+)"
        ),
        lambda m: {
            f"fetch {m[1]}, broker CPU us/fetch": float(m[2].replace(",", "")),
            f"fetch {m[1]}, us/fetch": float(m[3].replace(",", "")),
        },
    ),
]


def run(tree: Path, bench: str, select: str | None) -> dict[str, float]:
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        bench,
        "--benchmark-only",
        "-s",
    ]
    if select:
        args += ["-k", select]
    out = subprocess.run(args, cwd=tree, capture_output=True, text=True, timeout=1800).stdout
    found: dict[str, float] = {}
    for line in out.splitlines():
        for pattern, parse in ROW_PATTERNS:
            m = pattern.match(line)
            if m:
                found.update(parse(m))
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base")
    p.add_argument("--iterations", type=int, default=3)
    args = p.parse_args()
    figures: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory(prefix="logstore-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        try:
            for i in range(args.iterations):
                order = [("old", base), ("new", REPO)]
                for side, tree in order if i % 2 == 0 else reversed(order):
                    for bench, select in RUNS:
                        for key, value in run(tree, bench, select).items():
                            figures[side].setdefault(key, []).append(value)
                print(f"iteration {i + 1} of {args.iterations} done", file=sys.stderr)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=REPO, check=False
            )
    print("| case | runs | old: median (range) | new: median (range) | new/old |")
    print("|---|---|---|---|---|")
    for key, old in figures["old"].items():
        new = figures["new"].get(key)
        if not new:
            continue
        ratio = statistics.median(new) / statistics.median(old)
        if " us/" in key:  # lower is better: report speed
            ratio = 1 / ratio
        print(
            f"| {key} | {len(old)} | {statistics.median(old):,.0f} "
            f"({min(old):,.0f}-{max(old):,.0f}) | "
            f"{statistics.median(new):,.0f} ({min(new):,.0f}-{max(new):,.0f}) | {ratio:.2f} |"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LOGSTORE_E2E_RAW_REQUESTS", "20000")
    sys.exit(main())
