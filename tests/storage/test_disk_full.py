"""A log on a full disk: a real 8 MiB tmpfs, filled by the log and by filler files.

The active segment's index files are preallocated sparse (``segment.index.bytes``, 10 MiB
by default). On a full tmpfs a store into one of their holes cannot get a page, and the
kernel kills the process with SIGBUS, unless the storage engine gives each index page
storage before its first write (MADV_POPULATE_WRITE) and skips an entry whose page cannot
get any. The scenario therefore runs in a child process: a death by SIGBUS is reported as
this test's failure, and the parent unmounts the tmpfs whatever happened.

Page accounting: tmpfs allocates whole pages. Every batch is exactly ``BATCH`` bytes and
``BATCH`` divides the page, segments hold a whole number of pages, and filler files are one
page each; so with the disk full, deleting one filler frees exactly the page that the
next ``PAGE // BATCH`` appends fill, and nothing is left for an index page.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import logstore

PAGE = os.sysconf("SC_PAGE_SIZE")
BATCH = 1024  # bytes per batch (one record)
PER_PAGE = PAGE // BATCH  # batches per data page
SEGMENT_BATCHES = 1024  # segment.bytes = 1 MiB
T0 = 1_700_000_000_000
MARKER = ".kafka_cleanshutdown"
CONFIG = {
    "segment_bytes": SEGMENT_BATCHES * BATCH,
    "index_interval_bytes": 1,  # an entry for every batch but a segment's first
}


def _value_size() -> int:
    """The value length that makes a one-record batch exactly ``BATCH`` bytes."""
    for size in range(BATCH - 100, BATCH):
        if len(logstore.encode_batch([(b"%08d" % 0, bytes(size), [], T0)])) == BATCH:
            return size
    raise AssertionError(f"no value length gives a {BATCH}-byte batch")


VALUE_SIZE = _value_size()


def batch(offset: int) -> bytes:
    """The batch of ``offset`` as the log stores it (its base offset already set)."""
    value = random.Random(offset).randbytes(VALUE_SIZE)
    b = logstore.encode_batch([(b"%08d" % offset, value, [], T0 + offset)], base_offset=offset)
    assert len(b) == BATCH
    return b


def state(log: logstore.Log) -> tuple:
    """What a failed append must not change: the log end offset, and per segment its
    base offset, size, index entries and the length of its file on disk."""
    return log.log_end_offset, [
        (
            s.base_offset,
            s.size,
            s.index_entries,
            s.time_index_entries,
            os.path.getsize(s.log_path),
        )
        for s in log.segments()
    ]


def append_refused(log: logstore.Log) -> None:
    before = state(log)
    with pytest.raises(logstore.LogIOError) as refused:
        log.append(batch(log.log_end_offset))
    assert refused.value.errno == errno.ENOSPC, refused.value
    assert state(log) == before


def fill(directory: Path, first: int) -> list[Path]:
    """One-page files until the disk is full; returns them."""
    made = []
    data = b"\xa5" * PAGE
    for n in range(first, first + 1_000_000):
        path = directory / f"{n:07d}"
        fd = os.open(path, os.O_CREAT | os.O_WRONLY)
        try:
            os.write(fd, data)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            path.unlink()
            return made
        finally:
            os.close(fd)
        made.append(path)
    raise AssertionError("the disk never filled")


def check_contents(log: logstore.Log, end: int) -> None:
    assert (log.log_start_offset, log.log_end_offset) == (0, end)
    for offset in range(end):
        assert log.read(offset, 1) == batch(offset), f"offset {offset} reads back changed"


def scenario(mount: Path) -> None:
    """Runs in the child process (see the module comment)."""
    assert PAGE % BATCH == 0 and PAGE // 12 < PAGE // 8 < SEGMENT_BATCHES
    path = mount / "t-0"
    fillers_dir = mount / "fillers"
    fillers_dir.mkdir()
    log = logstore.Log.open(str(path), **CONFIG)

    # Two full segments and a third with its time index a few entries before its first
    # entry that straddles two pages (PAGE // 12 entries fit the first page; the segment's
    # first batch has no entry).
    active_batches = (PAGE // 12 - 40) // PER_PAGE * PER_PAGE
    end = 2 * SEGMENT_BATCHES + active_batches
    for offset in range(end):
        assert log.append(batch(offset)) == (offset, offset)
    assert log.num_segments == 3
    log.flush()  # the rolled segments' background flushes write no checkpoint after this
    fillers = fill(fillers_dir, 0)
    assert os.statvfs(mount).f_bavail == 0

    # The disk is full and the active segment's last page is full too.
    append_refused(log)
    check_contents(log, end)

    # Each filler deleted frees the one page the next PER_PAGE batches fill. On the way
    # the time index needs its second page, which the disk cannot give: the entry is
    # skipped, and the offset index skips with it (SIGBUS without the engine's check).
    for _ in range(20):
        fillers.pop().unlink()
        for _ in range(PER_PAGE):
            assert log.append(batch(end)) == (end, end)
            end += 1
    active = log.segments()[-1]
    assert active.size == (end - 2 * SEGMENT_BATCHES) * BATCH
    assert active.index_entries == active.time_index_entries == PAGE // 12, active
    append_refused(log)

    # Space again: appends go on, and so do the index entries.
    for _ in range(50):
        fillers.pop().unlink()
    for _ in range(40):
        assert log.append(batch(end)) == (end, end)
        end += 1
    active = log.segments()[-1]
    assert active.index_entries == active.time_index_entries == PAGE // 12 + 40, active
    check_contents(log, end)

    # A log dir gone offline: the handles go, nothing is written, the next open recovers.
    files = {p.name: p.read_bytes() for p in path.iterdir()}
    log.close_handlers()
    assert log.closed
    assert {p.name: p.read_bytes() for p in path.iterdir()} == files
    assert MARKER not in files
    for call in (lambda: log.append(batch(end)), lambda: log.read(0, 1), log.segments):
        with pytest.raises(logstore.LogClosedError):
            call()
    del log

    log = logstore.Log.open(str(path), **CONFIG)
    assert log.recovered
    assert log.recovery_report is None  # nothing was cut
    check_contents(log, end)
    active = log.segments()[-1]
    assert active.index_entries == active.time_index_entries == end - 2 * SEGMENT_BATCHES - 1
    log.close()
    assert (path / MARKER).exists()


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MiB tmpfs mounted at a fresh directory, unmounted at teardown."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(
            f"mounting an 8 MiB tmpfs at {mount} failed (this test needs root): "
            f"{done.stderr.strip() or done.returncode}"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_refuses_appends_without_killing_the_process_and_loses_nothing(small_disk):
    child = subprocess.run(
        [sys.executable, __file__, str(small_disk)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = f"stdout:\n{child.stdout}\nstderr:\n{child.stderr}"
    assert child.returncode != -signal.SIGBUS, f"the process died of SIGBUS\n{output}"
    assert child.returncode == 0, output


def test_every_log_io_error_carries_its_errno(tmp_path):
    (tmp_path / "not-a-dir").write_bytes(b"")
    with pytest.raises(logstore.LogIOError) as refused:
        logstore.Log.open(str(tmp_path / "not-a-dir" / "t-0"))
    assert refused.value.errno == errno.ENOTDIR, refused.value
    assert isinstance(refused.value, logstore.LogStoreError)
    assert logstore.LogIOError("raised by hand").errno is None


if __name__ == "__main__":
    scenario(Path(sys.argv[1]))
