"""Shared pieces of the storage benchmarks.

Each bench records its throughput or latency in the session-scoped ``report``
(and in ``benchmark.extra_info``); the ratios against the plain-syscall
baselines measured in the same run are printed as one compact table at the
end of the session by ``pytest_terminal_summary``.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from logstore_bench import REPORT, BenchReport


def _raise_fd_limit() -> None:
    # A log keeps its segments' files open (as Kafka does); 1000 segments need
    # more than the usual soft limit of 1024 descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


_raise_fd_limit()


def bench_root() -> Path:
    """Where bench data goes: LOGSTORE_BENCH_DIR, else the system temp dir.

    Logs and baselines always share this directory, so both hit the same disk.
    """
    return Path(os.environ.get("LOGSTORE_BENCH_DIR") or tempfile.gettempdir())


@pytest.fixture(scope="session")
def bench_dir() -> Iterator[Path]:
    root = bench_root()
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="logstore-bench-", dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def report() -> BenchReport:
    return REPORT


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    lines = REPORT.lines()
    if not lines:
        return
    terminalreporter.section("logstore benchmark summary (median of rounds)")
    for line in lines:
        terminalreporter.write_line(line)
