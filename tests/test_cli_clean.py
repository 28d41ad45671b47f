"""`logstore clean PARTITION_DIR [--dry-run]`: the offline cleaner."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

import logstore as ls
from logstore.cli import main

T0 = int(time.time() * 1000) - 3_600_000


def _dir_hash(path: Path) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        st = os.stat(path / name)
        h.update(name.encode() + b"\0" + str(st.st_mtime_ns).encode() + b"\0")
        h.update((path / name).read_bytes())
    return h.hexdigest()


def _records(log):
    out, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        for b in ls.decode_batches(log.read(offset, 1 << 30)):
            for r in b.records:
                out[r.key] = r.value
            offset = b.last_offset + 1
    return out


@pytest.fixture
def stopped_log(tmp_path):
    path = tmp_path / "orders-0"
    log = ls.Log.open(path, segment_bytes=4096, cleanup_policy="compact")
    latest = {}
    for i in range(400):
        key = b"k%d" % (i % 25)
        value = b"v%d" % i * 10
        log.append(ls.encode_batch([(key, value, [], T0 + i)], "lz4"))
        latest[key] = value
    for k in range(8):  # the last word on 8 keys: tombstones
        log.append(ls.encode_batch([(b"k%d" % k, None, [], T0 + 500)]))
        latest[b"k%d" % k] = None
    log.roll()
    log.append(ls.encode_batch([(b"active", b"segment", [], T0 + 600)]))
    latest[b"active"] = b"segment"
    log.close()
    return path, latest


def test_dry_run_changes_nothing_and_reports(stopped_log, capsys):
    path, _ = stopped_log
    before = _dir_hash(path)
    assert main(["clean", str(path), "--dry-run"]) == 0
    out = capsys.readouterr()
    assert _dir_hash(path) == before
    lines = dict(line.split(":", 1) for line in out.out.splitlines() if ":" in line)
    assert int(lines["bytes before"]) > int(lines["bytes after"]) > 0
    assert int(lines["keys"]) == 25  # the active segment is not mapped
    assert lines["tombstones"].strip().startswith("8 ")  # 8 keys end deleted: found, kept
    assert "dry run: nothing was changed" in out.out
    assert "100.0%" in out.err  # the progress bar reached its end


def test_clean_compacts_and_reports_what_the_dry_run_predicted(stopped_log, capsys):
    path, latest = stopped_log
    main(["clean", str(path), "--dry-run"])
    predicted = capsys.readouterr().out.splitlines()[:4]
    size = sum(os.path.getsize(path / n) for n in os.listdir(path) if n.endswith(".log"))
    assert main(["clean", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == predicted
    after = sum(os.path.getsize(path / n) for n in os.listdir(path) if n.endswith(".log"))
    assert after < size / 3
    assert f"bytes after:  {after}" in out
    log = ls.Log.open(path)
    try:
        assert _records(log) == latest  # tombstones stay within delete.retention.ms
    finally:
        log.close()


def test_tombstones_go_after_delete_retention_ms(stopped_log, capsys):
    # With delete.retention.ms=0, the first pass stamps the tombstones' delete horizon
    # (now), the second finds it passed.
    path, latest = stopped_log
    assert main(["clean", str(path), "--config", "delete.retention.ms=0"]) == 0
    assert "tombstones: 8 (dropped 0)" in capsys.readouterr().out
    time.sleep(0.01)
    assert main(["clean", str(path), "--config", "delete.retention.ms=0"]) == 0
    assert "tombstones: 8 (dropped 8)" in capsys.readouterr().out
    log = ls.Log.open(path)
    try:
        assert _records(log) == {k: v for k, v in latest.items() if v is not None}
    finally:
        log.close()


def test_a_log_in_use_is_refused(stopped_log, capsys):
    path, _ = stopped_log
    log = ls.Log.open(path)  # open: the clean-shutdown marker is gone
    try:
        before = _dir_hash(path)
        assert main(["clean", str(path)]) == 2
        assert "--force" in capsys.readouterr().err
        assert _dir_hash(path) == before
    finally:
        log.close()
    assert main(["clean", str(path / "missing")]) == 2


@pytest.mark.parametrize(
    "pair, message",
    [
        ("delete_retention_ms=0", "Unknown topic config name: delete_retention_ms"),
        (
            "delete.retention.ms=soon",
            "Invalid value soon for configuration delete.retention.ms: Not a number of type LONG",
        ),
    ],
)
def test_config_is_checked_as_a_broker_checks_topic_configs(stopped_log, capsys, pair, message):
    path, _ = stopped_log
    before = _dir_hash(path)
    assert main(["clean", str(path), "--config", pair]) == 2
    assert f"--config: {message}" in capsys.readouterr().err
    assert _dir_hash(path) == before
