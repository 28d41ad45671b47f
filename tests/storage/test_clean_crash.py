"""The cleaner killed by a real SIGKILL at each swap step, and at random times.

A subprocess opens a compacted log and cleans it; it SIGKILLs itself from the
``on_step`` callback at a chosen step, or the test kills it with ``kill -9`` at a
random moment of a throttled pass. The log then reopens with every retained
record, each once, offsets ascending and unchanged, and nothing it never had.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import logstore as ls

from .log_contents import records

T0 = int(time.time() * 1000)
STEPS = ("cleaned", "swap", "old_deleted", "swapped")
CONFIG = {"segment_bytes": 16384, "cleanup_policy": "compact", "delete_retention_ms": 3_600_000}


def _fill(log, rounds: int, keys: int, value_size: int, seed: int) -> None:
    rng = random.Random(seed)
    for r in range(rounds):
        batch = []
        for _ in range(50):
            k = rng.randrange(keys)
            value = None if rng.random() < 0.03 else b"%d-%d-" % (k, r) + rng.randbytes(value_size)
            batch.append((b"key-%d" % k, value, [], T0))
        log.append(ls.encode_batch(batch, rng.choice(["none", "zstd", "lz4"])))


def _build(path: Path, rounds: int, value_size: int) -> list:
    """A log whose segments were cleaned once, then got more dirty data: its next pass
    merges groups of segments."""
    log = ls.Log.open(path, **CONFIG)
    _fill(log, rounds, 400, value_size, seed=1)
    log.clean(now_ms=T0, force=True)
    _fill(log, rounds, 400, value_size, seed=2)
    content = records(log)
    log.close()
    return content


def _latest(content):
    latest = {}
    for offset, key, value in content:
        latest[key] = (offset, key, value)
    return latest


def _check(path: Path, original: list, cleaned: list) -> None:
    log = ls.Log.open(path, **CONFIG)
    try:
        got = records(log)
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets)), "offsets ascend, none duplicated"
        original_set, got_set = set(original), set(got)
        assert got_set <= original_set, "nothing invented or moved"
        assert set(cleaned) <= got_set, "every retained record is there"
        for rec in _latest(original).values():
            assert rec in got_set
        names = os.listdir(path)
        assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))], names
        # The recovered log cleans on to exactly the uninterrupted result.
        log.clean(now_ms=T0, force=True)
        assert records(log) == cleaned
    finally:
        log.close()


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import logstore as ls
    path, kill_at, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    steps = []
    def on_step(step, base):
        steps.append(step)
        if len(steps) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    log = ls.Log.open(
        path, segment_bytes=16384, cleanup_policy="compact", delete_retention_ms=3600000
    )
    print("ready", flush=True)
    log.clean(now_ms=int(sys.argv[4]), force=True, on_step=on_step, throttler=ls.Throttler(rate))
    sys.exit(3)
    """
)


def _spawn(path: Path, kill_at: int, rate: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(kill_at), str(rate), str(T0)],
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    base = tmp_path_factory.mktemp("clean-crash")
    path = base / "orig" / "t-0"
    original = _build(path, rounds=40, value_size=60)
    ref = base / "ref" / "t-0"
    shutil.copytree(path, ref)
    log = ls.Log.open(ref, **CONFIG)
    stats = log.clean(now_ms=T0, force=True)
    cleaned = records(log)
    log.close()
    assert (
        stats["segments_written"] >= 2 and stats["segments_cleaned"] > stats["segments_written"]
    ), stats
    return path, original, cleaned, stats["segments_written"]


@pytest.mark.parametrize("kill_at", range(1, 9))
def test_sigkill_at_each_swap_step(small_log, tmp_path, kill_at):
    """Steps 1-4 swap the first group in, 5-8 the second."""
    orig, original, cleaned, groups = small_log
    assert groups >= 2
    path = tmp_path / "t-0"
    shutil.copytree(orig, path)
    child = _spawn(path, kill_at, float("inf"))
    assert child.wait(timeout=60) == -signal.SIGKILL
    child.stdout.close()
    step = STEPS[(kill_at - 1) % 4]
    names = os.listdir(path)
    if step == "cleaned":
        assert any(n.endswith(".log.cleaned") for n in names), names
    elif step in ("swap", "old_deleted"):
        assert any(n.endswith(".log.swap") for n in names), names
    if step == "old_deleted":
        assert any(n.endswith(".log.deleted") for n in names), names
    _check(path, original, cleaned)


def test_sigkill_at_random_times_of_a_throttled_pass(tmp_path):
    path = tmp_path / "orig" / "t-0"
    original = _build(path, rounds=150, value_size=300)  # about 5 MB
    ref = tmp_path / "ref" / "t-0"
    shutil.copytree(path, ref)
    log = ls.Log.open(ref, **CONFIG)
    log.clean(now_ms=T0, force=True)
    cleaned = records(log)
    log.close()
    rng = random.Random(7)
    killed = 0
    for i in range(4):
        run = tmp_path / f"run{i}" / "t-0"
        shutil.copytree(path, run)
        child = _spawn(run, 0, 6e6)  # about 1.5-2 s of I/O
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 1.2))
        child.send_signal(signal.SIGKILL)
        killed += child.wait(timeout=60) == -signal.SIGKILL
        child.stdout.close()
        _check(run, original, cleaned)
    assert killed >= 3  # the pass takes longer than most kill times
