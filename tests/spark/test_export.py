"""``logstore export``: a local Spark job writing Parquet partitioned by topic and partition."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.processes import REPO_ROOT

from .helpers import write_partition

pq = pytest.importorskip("pyarrow.parquet")


def test_export_writes_parquet_by_topic_and_partition(tmp_path):
    logs = str(tmp_path / "logs")
    a = write_partition(logs, "a", 0, 120, codec="zstd") + write_partition(
        logs, "a", 1, 80, codec="snappy"
    )
    write_partition(logs, "b", 0, 30)
    out = str(tmp_path / "out")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": REPO_ROOT}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "logstore",
            "export",
            "--format",
            "parquet",
            "--out",
            out,
            "--topics",
            "a",
            "--from",
            "10",
            "--to",
            "100",
            logs,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "export: 160 rows written" in proc.stderr
    assert sorted(d for d in os.listdir(out) if not d.startswith((".", "_"))) == ["topic=a"]
    assert sorted(d for d in os.listdir(os.path.join(out, "topic=a")) if not d.startswith(".")) == [
        "partition=0",
        "partition=1",
    ]
    for p in (0, 1):
        table = pq.read_table(os.path.join(out, "topic=a", f"partition={p}"))
        rows = sorted(table.to_pylist(), key=lambda r: r["offset"])
        want = [r for r in a if r.partition == p and 10 <= r.offset < 100]
        assert [r["offset"] for r in rows] == [w.offset for w in want]
        assert [r["value"] for r in rows] == [w.value for w in want]
        assert [tuple((h["key"], h["value"]) for h in r["headers"]) for r in rows] == [
            w.headers for w in want
        ]


def test_export_usage_errors():
    proc = subprocess.run(
        [sys.executable, "-m", "logstore", "export", "--out", "/nonexistent/x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "log.dirs" in proc.stderr
