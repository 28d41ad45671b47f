"""Reading a .log segment for ``logstore dump-log``: framing its batches, decoding them
with the native module, the deep-iteration checks and the printed lines."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from logstore.cli.common import _bool, _native, _size, _text

# Size of the fixed RecordBatch v2 header (bytes 0..61) and its smallest
# legal batchLength (header without the 12 bytes of baseOffset+batchLength).
BATCH_HEADER_SIZE = 61
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - 12
# How much of a .log a dump reads at a time (a larger batch is read whole).
DEFAULT_CHUNK_SIZE = 4 << 20

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


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
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.out = out
        self.print_records = print_records
        self.deep_iteration = deep_iteration or print_records
        self.chunk_size = max(chunk_size, BATCH_HEADER_SIZE)
        self.quiet = quiet
        # Called as progress(bytes scanned, file size) after each chunk.
        self.progress = progress
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
                if self.progress is not None:
                    self.progress(pos, scan.size)
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
