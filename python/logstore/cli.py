"""The ``logstore`` command line.

Subcommands (argparse; each one is a ``_cmd_*`` function registered in
``_build_parser``, so more can be added without touching the others):

``dump-log FILE...``
    The equivalent of Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) for
    ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files.

``export --format parquet --out DIR [--topics T,...] [--from X] [--to Y] LOG_DIRS``
    Run a local Spark job (``logstore.spark``) that writes topics to Parquet,
    partitioned by topic and partition, showing progress on stderr.

``demo [DIR]``
    Write a small demo partition and dump its first segment.

``clean PARTITION_DIR [--dry-run]``
    Compact a stopped partition log (one forced pass of the log cleaner), with a
    progress bar on stderr; print the bytes before and after and the keys and
    tombstones found. ``--dry-run`` only reads the files and reports what a pass
    would do.

Exit status: 0 when everything was read and is consistent; 1 when a file was
read but holds a corrupt batch (CRC mismatch, undecodable records, invalid
header), a torn tail, or an index entry that does not match the log; 2 for
usage errors and files that cannot be read at all.
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

EXIT_OK = 0
EXIT_INCONSISTENT = 1
EXIT_USAGE = 2

# Size of the fixed RecordBatch v2 header (bytes 0..61) and its smallest
# legal batchLength (header without the 12 bytes of baseOffset+batchLength).
BATCH_HEADER_SIZE = 61
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - 12
# How much of a .log a dump reads at a time (a larger batch is read whole).
DEFAULT_CHUNK_SIZE = 4 << 20

OFFSET_INDEX_ENTRY = struct.Struct(">II")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qI")  # timestamp, relative offset
# version, producerId, firstOffset, lastOffset, lastStableOffset
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")

SEGMENT_NAME = re.compile(
    r"^(?P<base>\d{20})\.(?P<kind>log|index|timeindex|txnindex)"
    r"(?:\.(?:deleted|cleaned|swap))?$"
)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class CliError(Exception):
    """A problem that ends the command with a one-line message and exit status 2."""


# --------------------------------------------------------------------------
# small helpers


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _segment_name(path: str) -> tuple[int, str]:
    """(base offset, kind) from a segment file's 20-digit name, or CliError."""
    match = SEGMENT_NAME.match(os.path.basename(path))
    if match is None:
        raise CliError(
            f"{path}: not a segment file (expected a 20-digit base offset name "
            "ending in .log, .index, .timeindex or .txnindex)"
        )
    return int(match.group("base")), match.group("kind")


def _sibling(path: str, kind: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, name[:20] + "." + kind)


def _native() -> Any:
    try:
        from logstore import _native
    except ImportError as exc:  # pragma: no cover - only without a build
        raise CliError(f"the native storage module is not built ({exc})") from None
    return _native


# --------------------------------------------------------------------------
# .log scanning


@dataclass
class BatchSummary:
    """What index verification needs to know about one batch of a .log."""

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclass
class LogScan:
    """The result of reading one .log file."""

    size: int = 0
    batches: list[BatchSummary] = field(default_factory=list)
    problems: int = 0  # corrupt batches, torn tail, invalid headers
    valid_bytes: int = 0  # end of the last whole, framed batch


class _HeaderOnlyBatch:
    """The header fields of a batch that ``decode_batches`` could not decode at all."""

    def __init__(self, data: bytes, position: int) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = struct.unpack_from(">qiibIhiqqqhii", data, 0)
        self.size = self.batch_length + 12
        self.position = position
        self.last_offset = self.base_offset + self.last_offset_delta
        codec = self.attributes & 0x7
        self.compression = CODECS[codec] if codec < len(CODECS) else f"unknown({codec})"
        self.timestamp_type = "LogAppendTime" if self.attributes & 0x8 else "CreateTime"
        self.is_transactional = bool(self.attributes & 0x10)
        self.is_control = bool(self.attributes & 0x20)
        self.has_delete_horizon = bool(self.attributes & 0x40)
        if self.base_sequence == -1:
            self.last_sequence = -1
        else:
            self.last_sequence = (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF
        self.crc_valid = False
        self.records: list[Any] = []


class LogDumper:
    """Reads a .log in chunks and prints one line per batch (DumpLogSegments)."""

    def __init__(
        self,
        out: IO[str],
        *,
        print_records: bool,
        deep_iteration: bool,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        quiet: bool = False,
    ) -> None:
        self.out = out
        self.print_records = print_records
        self.deep_iteration = deep_iteration or print_records
        self.chunk_size = max(chunk_size, BATCH_HEADER_SIZE)
        self.quiet = quiet
        self.native = _native()

    def _print(self, line: str) -> None:
        if not self.quiet:
            self.out.write(line + "\n")

    def scan(self, path: str) -> LogScan:
        scan = LogScan()
        with open(path, "rb") as f:
            fd = f.fileno()
            scan.size = os.fstat(fd).st_size
            pos = 0
            while pos < scan.size:
                data = os.pread(fd, self.chunk_size, pos)
                if not data:  # the file shrank under us
                    break
                end, stop = self._frame(data, pos, scan)
                if end == 0:
                    if stop:
                        break
                    # The first batch is larger than the chunk: read it whole.
                    (batch_length,) = struct.unpack_from(">i", data, 8)
                    need = batch_length + 12
                    if pos + need > scan.size:
                        self._torn_tail(scan, pos)
                        break
                    data = os.pread(fd, need, pos)
                    if len(data) < need:
                        self._torn_tail(scan, pos, len(data))
                        break
                    end = need
                self._decode(data if end == len(data) else data[:end], pos, scan)
                pos += end
                scan.valid_bytes = pos
                if stop:
                    break
        return scan

    def _frame(self, data: bytes, pos: int, scan: LogScan) -> tuple[int, bool]:
        """Length of the whole batches at the start of ``data``, and whether to stop.

        Returns (0, False) when the first batch is longer than ``data``; stops at an
        invalid header (after dumping the whole batches before it) and at a tail
        shorter than a batch header.
        """
        off = 0
        n = len(data)
        while off + 17 <= n:
            (batch_length,) = struct.unpack_from(">i", data, off + 8)
            magic = data[off + 16]
            if batch_length < MIN_BATCH_LENGTH or magic != 2:
                if off:
                    return off, False  # dump the good batches; the next call reports it
                self._invalid_header(scan, pos, batch_length, magic)
                return 0, True
            if off + batch_length + 12 > n:
                break
            off += batch_length + 12
        if off == 0 and n < 17:
            self._torn_tail(scan, pos)
            return 0, True
        return off, False

    def _torn_tail(self, scan: LogScan, pos: int, available: int | None = None) -> None:
        remaining = scan.size - pos if available is None else available
        scan.problems += 1
        self._print(
            f"Found {remaining} trailing bytes that are not a whole batch at position {pos}"
        )

    def _invalid_header(self, scan: LogScan, pos: int, batch_length: int, magic: int) -> None:
        scan.problems += 1
        remaining = scan.size - pos
        self._print(
            f"Found an invalid batch header at position {pos} (batchLength: {batch_length} "
            f"magic: {magic}); not dumping the remaining {remaining} bytes"
        )

    def _decode(self, data: bytes, pos: int, scan: LogScan) -> None:
        native = self.native
        try:
            batches = native.decode_batches(
                data, records=self.deep_iteration, verify_crc=False, allow_partial=False
            )
        except native.LogStoreError:
            batches = None
        if batches is None or sum(b.size for b in batches) != len(data):
            # Something in this chunk is undecodable: go batch by batch.
            self._decode_each(data, pos, scan)
            return
        for batch in batches:
            self._batch(batch, pos + batch.position, scan, None)

    def _decode_each(self, data: bytes, pos: int, scan: LogScan) -> None:
        native = self.native
        off = 0
        while off < len(data):
            (batch_length,) = struct.unpack_from(">i", data, off + 8)
            one = data[off : off + batch_length + 12]
            error = None
            batch = None
            for records in (True, False) if self.deep_iteration else (False,):
                try:
                    decoded = native.decode_batches(
                        one, records=records, verify_crc=False, allow_partial=False
                    )
                except native.LogStoreError as exc:
                    error = error or str(exc)
                    continue
                if decoded:
                    batch = decoded[0]
                    break
            if batch is None:
                batch = _HeaderOnlyBatch(one, off)
            self._batch(batch, pos + off, scan, error)
            off += batch_length + 12

    def _batch(self, batch: Any, position: int, scan: LogScan, error: str | None) -> None:
        scan.batches.append(
            BatchSummary(position, batch.base_offset, batch.last_offset, batch.max_timestamp)
        )
        valid = bool(batch.crc_valid) and error is None
        problems: list[str] = []
        if error is not None:
            problems.append(f"undecodable: {error}")
        if self.deep_iteration and error is None:
            problems.extend(_check_records(batch))
        if not valid or problems:
            scan.problems += 1
        if self.quiet:
            return
        delete_horizon = ""
        if batch.has_delete_horizon:
            delete_horizon = f" deleteHorizonMs: {batch.base_timestamp}"
        self._print(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
            f"count: {batch.records_count} baseSequence: {batch.base_sequence} "
            f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
            f"producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_bool(batch.is_transactional)} "
            f"isControl: {_bool(batch.is_control)}{delete_horizon} position: {position} "
            f"{batch.timestamp_type}: {batch.max_timestamp} size: {batch.size} "
            f"magic: {batch.magic} compresscodec: {batch.compression} crc: {batch.crc} "
            f"isvalid: {_bool(valid)}"
        )
        for problem in problems:
            self._print(f"| problem: {problem}")
        if self.print_records:
            for record in batch.records:
                self._print(_record_line(batch, record))


def _check_records(batch: Any) -> list[str]:
    """Deep-iteration checks of a decoded batch against its header."""
    problems = []
    records = batch.records
    if len(records) != batch.records_count:
        problems.append(f"header says {batch.records_count} records, {len(records)} decoded")
    previous = None
    for record in records:
        if not batch.base_offset <= record.offset <= batch.last_offset:
            problems.append(
                f"record offset {record.offset} outside {batch.base_offset}..{batch.last_offset}"
            )
            break
        if previous is not None and record.offset <= previous:
            problems.append(f"record offset {record.offset} does not increase")
            break
        previous = record.offset
    return problems


def _record_line(batch: Any, record: Any) -> str:
    if batch.base_sequence == -1:
        sequence = -1
    else:
        sequence = (batch.base_sequence + record.offset - batch.base_offset) & 0x7FFFFFFF
    keys = ",".join(key if isinstance(key, str) else _text(key) for key, _ in record.headers)
    line = (
        f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
        f"keySize: {_size(record.key)} valueSize: {_size(record.value)} "
        f"sequence: {sequence} headerKeys: [{keys}]"
    )
    if batch.is_control:
        return line + " " + _control_text(record)
    return f"{line} key: {_text(record.key)} payload: {_text(record.value)}"


def _control_text(record: Any) -> str:
    key, value = record.key or b"", record.value or b""
    if len(key) < 4:
        return f"controlKey: {_text(key)}"
    version, control_type = struct.unpack_from(">hh", key)
    if control_type in (0, 1):
        marker = "COMMIT" if control_type == 1 else "ABORT"
        epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else "?"
        return f"endTxnMarker: {marker} coordinatorEpoch: {epoch}"
    return f"controlType: {control_type} (version {version})"


# --------------------------------------------------------------------------
# index files


def _read_entries(path: str, entry: struct.Struct) -> tuple[list[tuple], int, int]:
    """(entries, zeroed trailing entries ignored, trailing partial bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    whole = len(data) - len(data) % entry.size
    total = whole // entry.size
    # Preallocated (mmap) index files end in zeroed entries: drop the zeros after
    # the last real entry, but keep the first entry (it may really be (0, 0))
    # unless the whole preallocated file is zeros (an empty active segment).
    used = len(data[:whole].rstrip(b"\0"))
    keep = min(total, max(1 if used or total == 1 else 0, -(-used // entry.size)))
    entries = [entry.unpack_from(data, i * entry.size) for i in range(keep)]
    return entries, total - keep, len(data) - whole


def _zero_note(zeroed: int, partial: int, path: str, out: IO[str]) -> int:
    problems = 0
    if zeroed:
        out.write(f"({zeroed} zeroed preallocated entries not shown)\n")
    if partial:
        out.write(f"Found {partial} trailing bytes that are not a whole index entry in {path}\n")
        problems += 1
    return problems


def _dump_offset_index(path: str, base: int, out: IO[str]) -> tuple[list[tuple[int, int]], int]:
    raw, zeroed, partial = _read_entries(path, OFFSET_INDEX_ENTRY)
    entries = [(base + rel, position) for rel, position in raw]
    for offset, position in entries:
        out.write(f"offset: {offset} position: {position}\n")
    return entries, _zero_note(zeroed, partial, path, out)


def _dump_time_index(path: str, base: int, out: IO[str]) -> tuple[list[tuple[int, int]], int]:
    raw, zeroed, partial = _read_entries(path, TIME_INDEX_ENTRY)
    entries = [(timestamp, base + rel) for timestamp, rel in raw]
    for timestamp, offset in entries:
        out.write(f"timestamp: {timestamp} offset: {offset}\n")
    return entries, _zero_note(zeroed, partial, path, out)


def _dump_txn_index(path: str, out: IO[str]) -> int:
    with open(path, "rb") as f:
        data = f.read()
    whole = len(data) - len(data) % TXN_INDEX_ENTRY.size
    for off in range(0, whole, TXN_INDEX_ENTRY.size):
        version, pid, first, last, lso = TXN_INDEX_ENTRY.unpack_from(data, off)
        out.write(
            f"version: {version} producerId: {pid} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {lso}\n"
        )
    return _zero_note(0, len(data) - whole, path, out)


def _verify_offset_index(
    entries: list[tuple[int, int]], scan: LogScan, out: IO[str], path: str
) -> int:
    by_position = {b.position: b for b in scan.batches}
    mismatches = 0
    previous: tuple[int, int] | None = None
    for offset, position in entries:
        reason = None
        batch = by_position.get(position)
        if not scan.batches and (offset, position) == (entries[0][0], 0) and len(entries) == 1:
            continue  # a zeroed, preallocated index of an empty segment
        if previous is not None and offset <= previous[0]:
            reason = f"offset does not increase (previous entry offset: {previous[0]})"
        elif previous is not None and position <= previous[1]:
            reason = f"position does not increase (previous entry position: {previous[1]})"
        elif batch is None:
            reason = "no batch starts at this position"
        elif not batch.base_offset <= offset <= batch.last_offset:
            reason = (
                f"the batch at this position holds offsets {batch.base_offset}..{batch.last_offset}"
            )
        previous = (offset, position)
        if reason:
            mismatches += 1
            out.write(
                f"Index mismatch in {path}: offset: {offset} position: {position}: {reason}\n"
            )
    return mismatches


def _verify_time_index(
    entries: list[tuple[int, int]], scan: LogScan, out: IO[str], path: str
) -> int:
    batches = scan.batches
    last_offsets = [b.last_offset for b in batches]
    running_max = []
    current = -1
    for b in batches:
        current = max(current, b.max_timestamp)
        running_max.append(current)
    mismatches = 0
    previous: tuple[int, int] | None = None
    for timestamp, offset in entries:
        if not batches and timestamp == 0 and len(entries) == 1:
            continue  # a zeroed, preallocated index of an empty segment
        reason = None
        i = bisect.bisect_left(last_offsets, offset)
        if previous is not None and timestamp < previous[0]:
            reason = f"timestamp decreases (previous entry timestamp: {previous[0]})"
        elif previous is not None and offset < previous[1]:
            reason = f"offset decreases (previous entry offset: {previous[1]})"
        elif i == len(batches) or batches[i].base_offset > offset:
            reason = "no batch holds this offset"
        elif timestamp > running_max[i]:
            reason = f"largest timestamp in the log up to this offset is {running_max[i]}"
        previous = (timestamp, offset)
        if reason:
            mismatches += 1
            out.write(
                f"Time index mismatch in {path}: timestamp: {timestamp} offset: {offset}: "
                f"{reason}\n"
            )
    return mismatches


def _verify_indexes(log_path: str, base: int, scan: LogScan, out: IO[str]) -> int:
    mismatches = 0
    for kind, dump, verify in (
        ("index", _read_offset_entries, _verify_offset_index),
        ("timeindex", _read_time_entries, _verify_time_index),
    ):
        index_path = _sibling(log_path, kind)
        if not os.path.exists(index_path):
            out.write(f"No {kind} file {index_path} (nothing to verify)\n")
            continue
        entries, problems = dump(index_path, base)
        found = verify(entries, scan, out, index_path) + problems
        mismatches += found
        verdict = "ok" if not found else f"{found} mismatches"
        out.write(f"Verified {len(entries)} entries of {index_path}: {verdict}\n")
    return mismatches


def _read_offset_entries(path: str, base: int) -> tuple[list[tuple[int, int]], int]:
    raw, _, partial = _read_entries(path, OFFSET_INDEX_ENTRY)
    return [(base + rel, pos) for rel, pos in raw], int(bool(partial))


def _read_time_entries(path: str, base: int) -> tuple[list[tuple[int, int]], int]:
    raw, _, partial = _read_entries(path, TIME_INDEX_ENTRY)
    return [(ts, base + rel) for ts, rel in raw], int(bool(partial))


# --------------------------------------------------------------------------
# dump-log


def dump_file(path: str, args: argparse.Namespace, out: IO[str]) -> int:
    """Dump one segment file; returns its exit status (0 or 1); raises CliError."""
    base, kind = _segment_name(path)
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory")
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    out.write(f"Dumping {path}\n")
    out.write(f"Starting offset: {base}\n")
    if kind == "log":
        dumper = LogDumper(
            out,
            print_records=args.print_records,
            deep_iteration=args.deep_iteration,
            chunk_size=args.chunk_size,
        )
        scan = dumper.scan(path)
        problems = scan.problems
        if args.verify_index:
            problems += _verify_indexes(path, base, scan, out)
        return EXIT_INCONSISTENT if problems else EXIT_OK
    if kind == "txnindex":
        return EXIT_INCONSISTENT if _dump_txn_index(path, out) else EXIT_OK
    dump = _dump_offset_index if kind == "index" else _dump_time_index
    entries, problems = dump(path, base, out)
    if args.verify_index:
        log_path = _sibling(path, "log")
        if not os.path.exists(log_path):
            raise CliError(f"{log_path}: no such file (needed by --verify-index)")
        scan = LogDumper(
            out, print_records=False, deep_iteration=False, chunk_size=args.chunk_size, quiet=True
        ).scan(log_path)
        verify = _verify_offset_index if kind == "index" else _verify_time_index
        found = verify(entries, scan, out, path)
        out.write(
            f"Verified {len(entries)} entries of {path} against {log_path}: "
            f"{'ok' if not found else f'{found} mismatches'}\n"
        )
        problems += found
    return EXIT_INCONSISTENT if problems else EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    try:
        from logstore.spark.errors import SparkSourceError
        from logstore.spark.export import parse_bound, run_export
    except ImportError as exc:
        raise CliError(f"{exc}: export needs pyspark and pyarrow (pip install 'logstore[spark]')") from None
    if not args.log_dirs and not args.bootstrap_server:
        raise CliError("give the broker's log.dirs or --bootstrap-server")
    try:
        run_export(
            args.out,
            log_dirs=",".join(args.log_dirs) or None,
            bootstrap_servers=args.bootstrap_server,
            topics=args.topics,
            start=parse_bound(args.start, "--from") if args.start else None,
            end=parse_bound(args.end, "--to") if args.end else None,
            overwrite=args.overwrite,
            master=args.master,
        )
    except SparkSourceError as exc:
        raise CliError(str(exc)) from None
    return EXIT_OK


def _cmd_dump_log(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            status = max(status, dump_file(path, args, sys.stdout))
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror or exc}") from None
    return status


# --------------------------------------------------------------------------
# demo


def write_demo(directory: str) -> list[str]:
    """Write a small demo partition into ``directory``; returns its .log files."""
    native = _native()
    if os.path.isdir(directory) and os.listdir(directory):
        if not any(name.endswith(".log") for name in os.listdir(directory)):
            raise CliError(f"{directory}: exists and does not hold a log; pick another directory")
    os.makedirs(directory, exist_ok=True)
    # Recent timestamps: a first batch older than segment.ms would roll every append.
    ts = int(time.time() * 1000)
    log = native.Log.open(directory, index_interval_bytes=256)
    try:
        for i, codec in enumerate(native.COMPRESSION_TYPES):
            records = [
                (
                    f"user-{n}".encode(),
                    f'{{"event": "click", "codec": "{codec}", "n": {n}}}'.encode(),
                    [("source", b"demo"), ("trace-id", f"{i:04x}{n:04x}".encode())],
                    ts + 10 * i + n,
                )
                for n in range(3)
            ]
            log.append(native.encode_batch(records, codec))
        log.append(
            native.encode_batch(
                [(None, b"no key, no headers", [], ts + 60), (b"user-0", None, [], ts + 61)]
            )
        )
        # An idempotent, transactional batch and its commit marker.
        log.append(
            native.encode_batch(
                [(b"order-1", b"created", [], ts + 70), (b"order-1", b"paid", [], ts + 71)],
                producer_id=1000,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
            )
        )
        log.append(
            native.encode_control_batch(1, producer_id=1000, producer_epoch=0, timestamp_ms=ts + 72)
        )
        log.roll()
        log.append(native.encode_batch([(b"user-9", b"second segment", [], ts + 80)], "zstd"))
        segments = [s.log_path for s in log.segments()]
    finally:
        log.close()
    return segments


def _cmd_demo(args: argparse.Namespace) -> int:
    segments = write_demo(args.directory)
    out = sys.stdout
    out.write(f"Wrote a demo partition to {args.directory}: {len(segments)} segments\n")
    for path in segments:
        out.write(f"  {path}\n")
    out.write("\n")
    ns = argparse.Namespace(
        print_records=True, deep_iteration=True, verify_index=True, chunk_size=DEFAULT_CHUNK_SIZE
    )
    return dump_file(segments[0], ns, out)


# --------------------------------------------------------------------------
# clean

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


class ProgressBar:
    """A one-line bar on ``out`` redrawn at most every ``interval`` seconds."""

    def __init__(self, out: IO[str], label: str, width: int = 30, interval: float = 0.1) -> None:
        self.out, self.label, self.width, self.interval = out, label, width, interval
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < self.interval and done < total:
            return
        self.last = now
        frac = min(1.0, done / total) if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.out.write(f"\r{self.label} [{bar}] {frac:6.1%} {done / 1e6:,.1f}/{total / 1e6:,.1f} MB")
        self.out.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.out.write("\n")
            self.out.flush()


def _parse_configs(pairs: Sequence[str]) -> dict[str, str]:
    configs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--config {pair!r}: expected KEY=VALUE (e.g. delete.retention.ms=0)")
        configs[key.strip().replace(".", "_")] = value.strip()
    return configs


def _cmd_clean(args: argparse.Namespace) -> int:
    native = _native()
    directory = args.partition_dir
    if not os.path.isdir(directory):
        raise CliError(f"{directory}: not a directory")
    if not any(name.endswith(".log") for name in os.listdir(directory)):
        raise CliError(f"{directory}: holds no .log segment")
    configs = _parse_configs(args.config)
    stopped = os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_MARKER))
    if not stopped and not args.dry_run and not args.force:
        raise CliError(
            f"{directory}: no {CLEAN_SHUTDOWN_MARKER} marker: a broker has it open or it crashed. "
            "Stop the broker (or check no process uses the log) and pass --force"
        )
    bar = ProgressBar(sys.stderr, "dry run" if args.dry_run else "cleaning")
    try:
        if args.dry_run:
            stats = native.clean_dry_run(
                directory, dedupe_buffer_size=args.dedupe_buffer_size, progress=bar, **configs
            )
        else:
            log = native.Log.open(directory, **configs)
            try:
                stats = log.clean(dedupe_buffer_size=args.dedupe_buffer_size, force=True, progress=bar)
            finally:
                log.close()
    finally:
        bar.finish()
    out = sys.stdout
    out.write(f"bytes before: {stats['log_bytes_before']}\n")
    out.write(f"bytes after:  {stats['log_bytes_after']}\n")
    out.write(f"keys: {stats['keys_mapped']}\n")
    out.write(f"tombstones: {stats['tombstones_found']} (dropped {stats['tombstones_dropped']})\n")
    out.write(
        f"segments: {stats['segments_cleaned']} rewritten into {stats['segments_written']}; "
        f"records: {stats['records_read']} read, {stats['records_retained']} kept\n"
    )
    if stats["aborted_records_dropped"] or stats["markers_dropped"]:
        out.write(
            f"transactions: {stats['aborted_records_dropped']} aborted records and "
            f"{stats['markers_dropped']} markers dropped\n"
        )
    if args.dry_run:
        out.write("dry run: nothing was changed\n")
    return EXIT_OK


# --------------------------------------------------------------------------
# entry point


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logstore", description="Tools for logstore's Kafka-format partition logs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    export = sub.add_parser(
        "export",
        help="write topics to Parquet with a local Spark job",
        description="Read topics from a broker's log.dirs (or over the network) with the "
        "logstore Spark data source and write Parquet partitioned by topic and partition.",
    )
    export.add_argument("log_dirs", nargs="*", metavar="LOG_DIR", help="the broker's log.dirs")
    export.add_argument("--format", choices=["parquet"], default="parquet", help="output format (parquet)")
    export.add_argument("--out", required=True, metavar="DIR", help="output directory")
    export.add_argument("--topics", metavar="T,...", help="comma-separated topics (default: all but internal)")
    export.add_argument("--from", dest="start", metavar="OFFSET|TIME", help="first offset, or ISO-8601 time (inclusive)")
    export.add_argument("--to", dest="end", metavar="OFFSET|TIME", help="end offset, or ISO-8601 time (exclusive)")
    export.add_argument("--bootstrap-server", metavar="HOST:PORT", help="read through the Kafka protocol instead")
    export.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    export.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    export.set_defaults(func=_cmd_export)

    dump = sub.add_parser(
        "dump-log",
        help="print the batches of a .log segment or the entries of an index (DumpLogSegments)",
        description="Print the batches of .log segments, or the entries of .index, "
        ".timeindex and .txnindex files. Exit status 1 when a corrupt batch, a torn tail "
        "or an index mismatch is found.",
    )
    dump.add_argument("files", nargs="+", metavar="SEGMENT", help="e.g. 00000000000000000000.log")
    dump.add_argument(
        "--print-records", action="store_true", help="print every record (implies --deep-iteration)"
    )
    dump.add_argument(
        "--verify-index",
        action="store_true",
        help="check every .index/.timeindex entry against the batches of the .log",
    )
    dump.add_argument(
        "--deep-iteration",
        action="store_true",
        help="decode every record (decompressing) and check it against its batch header",
    )
    dump.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help=argparse.SUPPRESS)
    dump.set_defaults(func=_cmd_dump_log)

    demo = sub.add_parser(
        "demo",
        help="write a small demo partition and dump its first segment",
        description="Write a demo partition (batches with keys, headers, every codec, a "
        "transaction) into DIR and dump its first segment.",
    )
    demo.add_argument(
        "directory",
        nargs="?",
        default=os.path.join("logstore-demo", "demo-0"),
        metavar="DIR",
        help="partition directory (default: ./logstore-demo/demo-0)",
    )
    demo.set_defaults(func=_cmd_demo)

    clean = sub.add_parser(
        "clean",
        help="compact a stopped partition log (one forced log-cleaner pass)",
        description="Compact the stopped partition log in PARTITION_DIR: keep the latest "
        "record per key, drop tombstones and transaction markers past delete.retention.ms "
        "and aborted transactions, merge small segments. The log must not be in use: a log "
        "without the clean-shutdown marker is refused unless --force is given.",
    )
    clean.add_argument("partition_dir", metavar="PARTITION_DIR", help="e.g. data/orders-0")
    clean.add_argument(
        "--dry-run", action="store_true", help="only read the files and report what a pass would do"
    )
    clean.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config for the pass (Kafka names, e.g. delete.retention.ms=0); repeatable",
    )
    clean.add_argument(
        "--dedupe-buffer-size",
        type=int,
        default=128 << 20,
        help="offset map memory, as log.cleaner.dedupe.buffer.size (default 128 MiB)",
    )
    clean.add_argument(
        "--force", action="store_true", help="clean a log that lacks the clean-shutdown marker"
    )
    clean.set_defaults(func=_cmd_clean)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        status = func(args)
        sys.stdout.flush()
    except CliError as exc:
        sys.stdout.flush()
        print(f"logstore {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # e.g. `logstore dump-log ... | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a storage error from the native module, an OSError...
        sys.stdout.flush()
        print(f"logstore {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
