"""The ``logstore`` CLI, run as a subprocess on logs written with ``logstore.Log``."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import logstore

# Recent timestamps: with old ones every append would roll a segment (segment.ms, as Kafka).
T0 = (int(time.time() * 1000) // 1000) * 1000
RECORDS_PER_BATCH = 3

BATCH_LINE = re.compile(
    r"^baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: (?P<count>\d+) "
    r"baseSequence: (?P<bseq>-?\d+) lastSequence: (?P<lseq>-?\d+) producerId: (?P<pid>-?\d+) "
    r"producerEpoch: (?P<pepoch>-?\d+) partitionLeaderEpoch: (?P<ple>-?\d+) "
    r"isTransactional: (?P<txn>true|false) isControl: (?P<ctrl>true|false) "
    r"position: (?P<pos>\d+) (?P<tstype>CreateTime|LogAppendTime): (?P<ts>-?\d+) "
    r"size: (?P<size>\d+) magic: 2 compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+) "
    r"isvalid: (?P<valid>true|false)$"
)
RECORD_LINE = re.compile(
    r"^\| offset: (?P<offset>\d+) (?:CreateTime|LogAppendTime): (?P<ts>-?\d+) "
    r"keySize: (?P<ks>-?\d+) valueSize: (?P<vs>-?\d+) sequence: (?P<seq>-?\d+) "
    r"headerKeys: \[(?P<hk>[^\]]*)\] (?P<rest>.*)$"
)


def run(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def batch_lines(stdout: str) -> list[dict[str, str]]:
    out = []
    for line in stdout.splitlines():
        m = BATCH_LINE.match(line)
        if m:
            out.append(m.groupdict())
    return out


@dataclass
class Partition:
    path: Path
    codecs: list[str]  # codec of each batch, in order

    @property
    def log(self) -> Path:
        return self.path / f"{0:020d}.log"

    @property
    def index(self) -> Path:
        return self.path / f"{0:020d}.index"

    @property
    def timeindex(self) -> Path:
        return self.path / f"{0:020d}.timeindex"


def batch_records(i: int, codec: str) -> list:
    return [
        (
            f"key-{i}-{n}".encode(),
            f"value-{codec}-{i}-{n}".encode(),
            [("h1", b"x"), ("h2", None)],
            T0 + i * 10 + n,
        )
        for n in range(RECORDS_PER_BATCH)
    ]


@pytest.fixture
def partition(tmp_path: Path) -> Partition:
    """Two rounds of every codec (3 records a batch), then one odd batch; closed."""
    path = tmp_path / "events-0"
    codecs = list(logstore.COMPRESSION_TYPES) * 2
    with logstore.Log.open(str(path), index_interval_bytes=64) as log:
        for i, codec in enumerate(codecs):
            log.append(logstore.encode_batch(batch_records(i, codec), codec))
        # Null key, binary value, tombstone: 3 records in one uncompressed batch.
        log.append(
            logstore.encode_batch(
                [
                    (None, b"bin\xff\xfe", [], T0 + 500),
                    (b"k", None, [], T0 + 501),
                    (b"e", b"", [], T0 + 502),
                ]
            )
        )
    return Partition(path, codecs + ["none"])


def test_dump_lists_every_batch(partition: Partition) -> None:
    result = run("dump-log", partition.log)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {partition.log}"
    assert lines[1] == "Starting offset: 0"
    batches = batch_lines(result.stdout)
    assert len(batches) == len(partition.codecs)
    assert len(lines) == 2 + len(batches)
    position = 0
    for i, (batch, codec) in enumerate(zip(batches, partition.codecs, strict=True)):
        assert int(batch["base"]) == i * RECORDS_PER_BATCH
        assert int(batch["last"]) == i * RECORDS_PER_BATCH + RECORDS_PER_BATCH - 1
        assert int(batch["count"]) == RECORDS_PER_BATCH
        assert batch["codec"] == codec
        assert batch["valid"] == "true"
        assert batch["tstype"] == "CreateTime"
        assert batch["pid"] == "-1" and batch["bseq"] == "-1"
        assert batch["txn"] == "false" and batch["ctrl"] == "false"
        assert int(batch["pos"]) == position
        position += int(batch["size"])
    assert int(batches[0]["ts"]) == T0 + RECORDS_PER_BATCH - 1  # max timestamp
    assert position == partition.log.stat().st_size


def test_print_records(partition: Partition) -> None:
    result = run("dump-log", "--print-records", partition.log)
    assert result.returncode == 0, result.stderr
    records = [
        RECORD_LINE.match(line) for line in result.stdout.splitlines() if line.startswith("|")
    ]
    assert all(records)
    assert len(records) == len(partition.codecs) * RECORDS_PER_BATCH
    assert [int(m["offset"]) for m in records] == list(range(len(records)))
    for i, codec in enumerate(partition.codecs[:-1]):
        for n in range(RECORDS_PER_BATCH):
            m = records[i * RECORDS_PER_BATCH + n]
            key, value = f"key-{i}-{n}", f"value-{codec}-{i}-{n}"
            assert m["rest"] == f"key: {key} payload: {value}"
            assert int(m["ks"]) == len(key) and int(m["vs"]) == len(value)
            assert m["hk"] == "h1,h2"
            assert int(m["ts"]) == T0 + i * 10 + n
    odd = records[-RECORDS_PER_BATCH:]
    assert odd[0]["ks"] == "-1" and odd[0]["rest"] == r"key: null payload: bin\xff\xfe"
    assert odd[1]["vs"] == "-1" and odd[1]["rest"] == "key: k payload: null"
    assert odd[2]["vs"] == "0" and odd[2]["rest"] == "key: e payload: "
    # Batch lines are interleaved: each batch line is followed by its records.
    lines = result.stdout.splitlines()
    assert BATCH_LINE.match(lines[2]) and RECORD_LINE.match(lines[3])
    assert BATCH_LINE.match(lines[2 + 1 + RECORDS_PER_BATCH])


def test_deep_iteration_passes_on_a_good_log(partition: Partition) -> None:
    result = run("dump-log", "--deep-iteration", partition.log)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "problem" not in result.stdout
    assert not any(line.startswith("| offset") for line in result.stdout.splitlines())


def test_small_chunks_give_the_same_dump(partition: Partition) -> None:
    whole = run("dump-log", "--print-records", partition.log)
    # Every batch is larger than a 61-byte chunk, so each one is read on its own.
    for chunk in ("61", "200", "1000"):
        chunked = run("dump-log", "--print-records", "--chunk-size", chunk, partition.log)
        assert chunked.returncode == 0, chunked.stderr
        assert chunked.stdout == whole.stdout


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.parametrize("flags", [[], ["--print-records"], ["--deep-iteration"]])
def test_flipped_byte_shows_isvalid_false(partition: Partition, flags: list[str]) -> None:
    good = batch_lines(run("dump-log", partition.log).stdout)
    # Corrupt the last byte of an uncompressed batch (in its last record) and
    # of a gzip batch (inside the compressed blob).
    targets = [0, 1]
    assert partition.codecs[0] == "none" and partition.codecs[1] == "gzip"
    for i in targets:
        flip_byte(partition.log, int(good[i]["pos"]) + int(good[i]["size"]) - 3)
    result = run("dump-log", *flags, partition.log)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    batches = batch_lines(result.stdout)
    assert len(batches) == len(good)
    for i, batch in enumerate(batches):
        assert batch["valid"] == ("false" if i in targets else "true"), i
        assert batch["base"] == good[i]["base"] and batch["pos"] == good[i]["pos"]
    if "--print-records" in flags:
        # The records of the intact batches are still printed.
        assert "payload: value-zstd-4-2" in result.stdout


def test_truncated_tail(partition: Partition) -> None:
    good = batch_lines(run("dump-log", partition.log).stdout)
    last = good[-1]
    size = partition.log.stat().st_size
    for cut in (10, int(last["size"]) - 5):  # a torn batch; a torn header
        os.truncate(partition.log, size - cut)
        result = run("dump-log", "--print-records", partition.log)
        assert result.returncode == 1, result.stderr
        batches = batch_lines(result.stdout)
        assert len(batches) == len(good) - 1
        assert all(b["valid"] == "true" for b in batches)
        tail = int(last["size"]) - cut
        expected = (
            f"Found {tail} trailing bytes that are not a whole batch at position {last['pos']}"
        )
        assert result.stdout.splitlines()[-1] == expected


def test_invalid_header_stops_the_dump(partition: Partition) -> None:
    good = batch_lines(run("dump-log", partition.log).stdout)
    pos = int(good[3]["pos"])
    with open(partition.log, "r+b") as f:
        f.seek(pos + 16)
        f.write(b"\x01")  # magic 1
    result = run("dump-log", partition.log)
    assert result.returncode == 1
    assert len(batch_lines(result.stdout)) == 3
    assert f"Found an invalid batch header at position {pos}" in result.stdout


def read_offset_index(path: Path, base: int = 0) -> list[tuple[int, int]]:
    data = path.read_bytes()
    entries = [
        struct.unpack_from(">II", data, off) for off in range(0, len(data) - len(data) % 8, 8)
    ]
    while len(entries) > 1 and entries[-1] == (0, 0):
        entries.pop()
    return [(base + rel, pos) for rel, pos in entries]


def test_dump_index_and_timeindex(partition: Partition) -> None:
    expected = read_offset_index(partition.index)
    assert len(expected) >= 5  # index.interval.bytes=64 indexes (nearly) every batch
    result = run("dump-log", partition.index)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Dumping {partition.index}", "Starting offset: 0"]
    entries = [
        tuple(map(int, m.groups()))
        for m in (re.match(r"^offset: (\d+) position: (\d+)$", line) for line in lines[2:])
        if m
    ]
    assert entries == expected

    result = run("dump-log", partition.timeindex)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    time_entries = [
        tuple(map(int, m.groups()))
        for m in (re.match(r"^timestamp: (-?\d+) offset: (\d+)$", line) for line in lines[2:])
        if m
    ]
    assert time_entries, result.stdout
    timestamps = [t for t, _ in time_entries]
    assert timestamps == sorted(timestamps)
    assert all(T0 <= t <= T0 + 502 for t in timestamps)


def test_verify_index_passes_on_a_good_log(partition: Partition) -> None:
    result = run("dump-log", "--verify-index", partition.log)
    assert result.returncode == 0, result.stdout
    assert (
        f"Verified {len(read_offset_index(partition.index))} entries of {partition.index}: ok"
        in result.stdout
    )
    assert "mismatch" not in result.stdout
    # The same check starting from the index file.
    result = run("dump-log", "--verify-index", partition.index)
    assert result.returncode == 0, result.stdout
    result = run("dump-log", "--verify-index", partition.timeindex)
    assert result.returncode == 0, result.stdout


def test_verify_index_fails_on_a_corrupted_index(partition: Partition) -> None:
    entries = read_offset_index(partition.index)
    assert len(entries) >= 3
    # Point the second entry into the middle of a batch.
    with open(partition.index, "r+b") as f:
        f.seek(8 + 4)
        f.write(struct.pack(">I", entries[1][1] + 1))
    result = run("dump-log", "--verify-index", partition.log)
    assert result.returncode == 1, result.stdout
    mismatch = [line for line in result.stdout.splitlines() if line.startswith("Index mismatch")]
    assert len(mismatch) == 1
    assert f"offset: {entries[1][0]} position: {entries[1][1] + 1}: no batch starts" in mismatch[0]
    # Batches themselves are fine.
    assert all(b["valid"] == "true" for b in batch_lines(result.stdout))

    # An entry whose offset is not in the batch at its position.
    with open(partition.index, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">II", entries[1][0] - entries[0][0] + 1000, entries[1][1]))
    result = run("dump-log", "--verify-index", partition.index)
    assert result.returncode == 1
    assert "the batch at this position holds offsets" in result.stdout


def test_preallocated_index_of_an_open_log(tmp_path: Path) -> None:
    """An active segment's index is preallocated with zeros while the log is open."""
    log = logstore.Log.open(str(tmp_path / "live-0"), index_interval_bytes=64)
    empty = logstore.Log.open(str(tmp_path / "empty-0"))
    try:
        for i in range(5):
            log.append(logstore.encode_batch(batch_records(i, "none")))
        index = tmp_path / "live-0" / f"{0:020d}.index"
        real = read_offset_index(index)
        preallocated = index.stat().st_size > 8 * len(real)
        result = run("dump-log", "--verify-index", index)
        assert result.returncode == 0, result.stdout
        offsets = re.findall(r"^offset: (\d+) position: (\d+)$", result.stdout, re.M)
        assert [(int(o), int(p)) for o, p in offsets] == real
        assert preallocated == ("zeroed preallocated entries not shown" in result.stdout)
        result = run("dump-log", "--verify-index", tmp_path / "live-0" / f"{0:020d}.log")
        assert result.returncode == 0, result.stdout

        # An empty log's indexes have no files yet (created at their first entry).
        for name in (f"{0:020d}.index", f"{0:020d}.timeindex"):
            assert not (tmp_path / "empty-0" / name).exists()
        result = run("dump-log", "--verify-index", tmp_path / "empty-0" / f"{0:020d}.log")
        assert result.returncode == 0, result.stdout
        assert result.stdout.count("(nothing to verify)") == 2, result.stdout
        assert not re.search(r"^(offset|timestamp): ", result.stdout, re.M)
    finally:
        log.close()
        empty.close()


def test_second_segment(tmp_path: Path) -> None:
    path = tmp_path / "t-3"
    with logstore.Log.open(str(path), index_interval_bytes=64) as log:
        for i in range(4):
            log.append(logstore.encode_batch(batch_records(i, "none")))
        log.roll()
        for i in range(4, 10):
            log.append(logstore.encode_batch(batch_records(i, "lz4"), "lz4"))
        second = [s for s in log.segments() if s.base_offset == 12]
    assert second
    log_path = Path(second[0].log_path)
    assert log_path.name == f"{12:020d}.log"
    result = run("dump-log", "--verify-index", "--print-records", log_path)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert lines[1] == "Starting offset: 12"
    batches = batch_lines(result.stdout)
    assert [int(b["base"]) for b in batches] == list(range(12, 30, 3))
    assert batches[0]["pos"] == "0"
    index = run("dump-log", log_path.with_suffix(".index"))
    offsets = [int(x) for x in re.findall(r"^offset: (\d+)", index.stdout, re.M)]
    assert offsets and all(12 <= o < 30 for o in offsets)
    # Several files at once.
    both = run("dump-log", tmp_path / "t-3" / f"{0:020d}.log", log_path)
    assert both.returncode == 0
    assert len(batch_lines(both.stdout)) == 10


def test_transactional_batch_and_marker(tmp_path: Path) -> None:
    path = tmp_path / "tx-0"
    with logstore.Log.open(str(path)) as log:
        log.append(
            logstore.encode_batch(
                [(b"a", b"1", [], T0), (b"b", b"2", [], T0 + 1)],
                producer_id=42,
                producer_epoch=3,
                base_sequence=7,
                transactional=True,
            )
        )
        log.append(
            logstore.encode_control_batch(
                1, producer_id=42, producer_epoch=3, coordinator_epoch=5, timestamp_ms=T0 + 2
            )
        )
    result = run("dump-log", "--print-records", path / f"{0:020d}.log")
    assert result.returncode == 0, result.stdout + result.stderr
    data, marker = batch_lines(result.stdout)
    assert (data["pid"], data["pepoch"], data["bseq"], data["lseq"]) == ("42", "3", "7", "8")
    assert data["txn"] == "true" and data["ctrl"] == "false"
    assert marker["txn"] == "true" and marker["ctrl"] == "true"
    assert "sequence: 8 headerKeys: [] key: b payload: 2" in result.stdout
    assert "endTxnMarker: COMMIT coordinatorEpoch: 5" in result.stdout


def test_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    missing = tmp_path / f"{0:020d}.log"
    not_segment = tmp_path / "notes.txt"
    not_segment.write_text("hello")
    directory = tmp_path / f"{0:020d}.index"
    directory.mkdir()
    for path in (missing, not_segment, directory):
        result = run("dump-log", path)
        assert result.returncode == 2, (path, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert str(path) in result.stderr
    result = run()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    result = run("no-such-command")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_help_lists_subcommands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "dump-log" in result.stdout and "demo" in result.stdout


def test_demo(tmp_path: Path) -> None:
    target = tmp_path / "demo" / "demo-0"
    result = subprocess.run(
        [sys.executable, "-m", "logstore", "demo", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Dumping {target / f'{0:020d}.log'}" in result.stdout
    codecs = {b["codec"] for b in batch_lines(result.stdout)}
    assert codecs == set(logstore.COMPRESSION_TYPES)
    assert "endTxnMarker: COMMIT" in result.stdout
    assert "headerKeys: [source,trace-id]" in result.stdout
    assert "mismatch" not in result.stdout
    # Its default directory is relative to the working directory.
    result = subprocess.run(
        [sys.executable, "-m", "logstore", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "logstore-demo" / "demo-0" / f"{0:020d}.log").exists()


def test_main_in_process(partition: Partition, capsys: pytest.CaptureFixture[str]) -> None:
    from logstore.cli import main

    assert main(["dump-log", str(partition.log)]) == 0
    assert len(batch_lines(capsys.readouterr().out)) == len(partition.codecs)
    assert main(["dump-log", str(partition.path / "missing.log")]) == 2
    assert "missing.log" in capsys.readouterr().err


def test_dump_log_progress_bar(partition: Partition) -> None:
    result = run("dump-log", partition.log, "--progress")
    assert result.returncode == 0, result.stderr
    assert "100.0%" in result.stderr
    assert len(batch_lines(result.stdout)) == len(partition.codecs)
    quiet = run("dump-log", partition.log)
    assert "%" not in quiet.stderr  # not a terminal: no bar unless asked
