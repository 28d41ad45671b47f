"""Type stubs for ``logstore._native``, the PyO3 bindings of the Rust storage core.

Kept honest by ``tests/storage/test_stubs.py``, which checks that every public
name and method here exists on the native module and vice versa.
"""

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import pyarrow

# What the bindings that borrow their input without a copy take (the buffer protocol,
# C-contiguous): appends, decoders, CRC, produce records.
BytesLike = bytes | bytearray | memoryview
Header = tuple[str | bytes, bytes | None]
# (key, value, headers, timestamp_ms); headers and timestamp may be omitted.
RecordInput = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header]]
    | tuple[bytes | None, bytes | None, Sequence[Header], int]
)

class LogStoreError(Exception):
    """Base of every error raised by the storage engine."""

class CorruptRecordError(LogStoreError):
    """A record batch failed validation: length, magic, CRC-32C, offsets or record layout."""

class InvalidRecordError(LogStoreError):
    """Records the topic's config refuses: a record without a key on a compacted topic.

    The whole append is refused; ``record_errors`` lists each offending record as
    (its index in its batch, a message)."""

    record_errors: tuple[tuple[int, str], ...]

class InvalidTimestampError(InvalidRecordError):
    """Record timestamps outside the ``message.timestamp.before.max.ms`` /
    ``message.timestamp.after.max.ms`` window of a CreateTime topic."""

class OffsetOutOfRangeError(LogStoreError):
    """The offset is below the log start offset or above the log end offset."""

class RecordTooLargeError(LogStoreError):
    """A batch is larger than ``max.message.bytes`` (or than a segment can hold)."""

class InvalidConfigError(LogStoreError):
    """A config key is unknown or its value is invalid, worded as Kafka words it;
    ``config_exception`` is true where Kafka raises a ConfigException (a bad value)."""

    config_exception: bool

class InvalidOffsetError(LogStoreError):
    """A batch appended with its own offsets does not follow the log end offset."""

class CorruptIndexError(LogStoreError):
    """An index file is inconsistent with its segment (normally rebuilt, not raised)."""

class LogClosedError(LogStoreError):
    """The log was closed."""

class LogIOError(LogStoreError):
    """The operating system refused a file operation; the message names the file.

    ``errno`` is the OS error number (``errno.ENOSPC``, ``errno.EIO``, ``errno.EROFS``,
    ...), or None when the error has none."""

    errno: int | None

class UnsupportedForMessageFormatError(LogStoreError):
    """Records message format v0/v1 cannot hold (zstd), met in a down-conversion."""

COMPRESSION_TYPES: Final[tuple[str, ...]]  # ("none", "gzip", "snappy", "lz4", "zstd")

class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

class RecordBatch:
    base_offset: int
    last_offset: int
    last_offset_delta: int
    batch_length: int
    size: int  # batch_length + 12: bytes on disk and on the wire
    partition_leader_epoch: int
    magic: int
    crc: int
    crc_valid: bool
    attributes: int
    compression: str  # one of COMPRESSION_TYPES
    timestamp_type: str  # "CreateTime" or "LogAppendTime"
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    records_count: int
    position: int  # byte position of the batch within the decoded buffer
    records: list[Record]  # empty when decoded with records=False
    control_type: int | None  # 0 abort, 1 commit, for control batches

def encode_batch(
    records: Iterable[RecordInput],
    compression: str = "none",
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    timestamp_ms: int | None = None,
) -> bytes:
    """Build one RecordBatch v2. Records without a timestamp get ``timestamp_ms`` or now."""

def encode_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
    timestamp_ms: int | None = None,
) -> bytes:
    """Build a transaction marker batch (control_type 0 abort, 1 commit)."""

def decode_batches(
    data: BytesLike, *, records: bool = True, verify_crc: bool = True, allow_partial: bool = True
) -> list[RecordBatch]:
    """Decode every whole batch in ``data``.

    With ``records=False`` only the batch headers are read (no decompression);
    ``records`` is then empty, except that control batches still get ``control_type``.

    A trailing partial batch (as a fetch may return) is ignored when ``allow_partial``.
    With ``verify_crc`` a CRC mismatch raises CorruptRecordError; without it the
    batch comes back with ``crc_valid`` False.
    """

def up_convert_records(records: BytesLike, now_ms: int) -> bytes:
    """The one RecordBatch v2 holding the messages of a magic 0/1 message set (base
    offset 0; the log assigns offsets), keeping keys, values, timestamps (magic 0:
    ``now_ms``) and the codec. Raises CorruptRecordError for a malformed set, a bad CRC
    or a codec message format v0/v1 lacks."""

def down_convert_slice(
    slice: FileSlice, to_magic: int, first_offset: int, max_bytes: int
) -> tuple[bytes, int, int]:
    """The whole v2 batches of ``slice`` as a message set of ``to_magic`` (0 or 1) from
    ``first_offset``, at most ``max_bytes`` long unless its first message alone is
    longer: ``(records, next_offset, records_converted)``; next_offset is the offset
    after the last batch examined. Control batches and headers are dropped. Raises
    UnsupportedForMessageFormatError for a zstd batch."""

def validate_log_config(**config: object) -> dict[str, str]:
    """Checks topic configs as ``Log.open`` would (a keyword may spell ``.`` as ``_``);
    returns the effective config.

    Raises InvalidConfigError naming the key.
    """

def validate_topic_configs(configs: dict[str, str], defaults: dict[str, str]) -> None:
    """Checks a topic's config overrides (Kafka's names only) over the broker's topic
    defaults as Kafka's LogConfig.validate does: unknown names, every value by its type
    and validator, then the cross-key rules. Raises InvalidConfigError with Kafka's
    message."""

def topic_config_keys() -> list[tuple[str, str, str]]:
    """Kafka's topic configs in definition order: (name, type such as ``LONG`` or
    ``LIST``, default as DescribeConfigs shows it)."""

class Throttler:
    """A byte-rate limit (log.cleaner.io.max.bytes.per.second) shared by the cleaning
    passes given it; infinite or non-positive rates never wait."""

    def __init__(self, bytes_per_second: float) -> None: ...
    @property
    def bytes_per_second(self) -> float: ...

def set_max_open_files(n: int) -> None:
    """Caps the segment files the storage engine keeps open (0: half the soft file
    limit); the least recently used are closed past it and opened again on use."""

def open_files() -> tuple[int, int]:
    """(segment files the storage engine holds open now, its cap)."""

def close_idle_files(idle_ms: int) -> int:
    """Closes the segment files unused for ``idle_ms``; returns how many."""

def sync_filesystem(path: str) -> None:
    """``syncfs(2)`` of the filesystem holding ``path``: makes durable what logs opened
    with ``defer_sync=True`` left to the caller, in one call for all of them."""

def clean_dry_run(
    path: str | os.PathLike[str],
    *,
    now_ms: int | None = None,
    dedupe_buffer_size: int = 134217728,
    progress: Callable[[int, int], object] | None = None,
    **config: object,
) -> dict[str, int]:
    """The counters of a forced ``Log.clean`` of the stopped log at ``path``, computed
    from its files only: nothing is written, renamed or deleted."""

def crc32c(data: BytesLike, value: int = 0) -> int:
    """CRC-32C (Castagnoli), continuing from ``value``."""

def parse_follower_fetch_request(
    frame: bytes,
) -> (
    tuple[
        int,
        int,
        str | None,
        int,
        int,
        int,
        int,
        tuple[tuple[str | int, tuple[tuple[int, int, int, int, int, int], ...]], ...],
    ]
    | None
):
    """A follower's sessionless Fetch request frame (v12-v17, after its size prefix):
    ``(api_version, correlation_id, client_id, replica_id, max_wait_ms, min_bytes,
    max_bytes, ((topic, ((partition, current_leader_epoch, fetch_offset,
    last_fetched_epoch, log_start_offset, partition_max_bytes), ...)), ...))``, topic a
    name (v12) or a topic id as an int (v13+); None for any other frame."""

def parse_produce_request(
    frame: bytes,
) -> (
    tuple[
        int,
        int,
        str | None,
        str | None,
        int,
        int,
        tuple[tuple[str, tuple[tuple[int, int, int, bool], ...]], ...],
    ]
    | None
):
    """A Produce request frame (after its size prefix) in the common shape, read in place:
    ``(api_version, correlation_id, client_id, transactional_id, acks, timeout_ms,
    ((topic, ((partition, records_start, records_end, has_producer_id), ...)), ...))``;
    records_start and records_end are -1 for null records. ``None`` for a frame with
    tagged fields, trailing bytes, bad UTF-8 or anything malformed."""

def has_producer_id(records: BytesLike) -> bool:
    """Whether any batch in a produce request's records carries a producer id (walks
    only the batch lengths)."""

def encode_produce_response(
    correlation_id: int,
    api_version: int,
    topics: list[
        tuple[
            str,
            list[
                tuple[int, int, int, int, int, str | None, list[tuple[int, str | None]]]
                | tuple[
                    int,
                    int,
                    int,
                    int,
                    int,
                    str | None,
                    list[tuple[int, str | None]],
                    tuple[int, int] | None,
                ]
            ],
        ]
    ],
    throttle_time_ms: int = 0,
    node_endpoints: list[tuple[int, str, int, str | None]] | None = None,
) -> bytes:
    """A whole Produce response frame, size prefix included, from
    ``[(topic, [(partition, error_code, base_offset, log_append_time_ms, log_start_offset,
    error_message, [(batch_index, message), ...][, current_leader]), ...]), ...]``: each
    partition a 7-tuple, or an 8-tuple ending in ``(leader_id, leader_epoch)`` or None.
    ``node_endpoints``: ``[(node_id, host, port, rack or None), ...]`` or None. The
    current leader and the node endpoints are tagged fields, written v10+ only and only
    when other than (-1, -1) and non-empty."""

def encode_fetch_response(
    correlation_id: int,
    api_version: int,
    error_code: int,
    session_id: int,
    topics: list[
        tuple[
            str,
            int,
            list[
                tuple[
                    int,
                    int,
                    int,
                    int,
                    int,
                    list[tuple[int, int]] | None,
                    int,
                    int,
                    tuple[int, int] | None,
                    tuple[int, int] | None,
                ]
            ],
        ]
    ],
    throttle_time_ms: int = 0,
    node_endpoints: list[tuple[int, str, int, str | None]] | None = None,
) -> tuple[bytes, list[int]]:
    """A Fetch response frame (v0-v17) without its records' bytes, from ``[(topic,
    topic_id as int, [(partition, error_code, high_watermark, last_stable_offset,
    log_start_offset, aborted [(producer_id, first_offset)] or None, records_len,
    preferred_read_replica, diverging_epoch (epoch, end_offset) or None, current_leader
    (leader_id, leader_epoch) or None), ...]), ...]`` and ``node_endpoints``
    ``[(node_id, host, port, rack or None), ...]`` or None: (head, the offsets in head
    where each non-empty records field's bytes go). The frame's size prefix counts the
    records. preferred_read_replica is written v11+; diverging_epoch and current_leader
    (v12+) and node_endpoints (v16+) are tagged fields, written only when other than all
    -1 and non-empty."""

def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
    """sendfile(2) with the GIL released. Returns bytes sent (may be < count).

    Raises BlockingIOError when a non-blocking ``out_fd`` cannot take a byte now.
    """

class FrameBuffer:
    """A request frame of ``size`` bytes read in place: ``memoryview(fb)`` lends the
    unfilled tail, writable (``socket.recv_into``); ``take`` returns the whole frame as
    the ``bytes`` object the bytes were written into, no copy made."""

    def __init__(self, size: int) -> None: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def filled(self) -> int:
        """How many bytes have been written."""
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Copies the start of ``data`` in after the bytes written; returns how many."""
    def advance(self, n: int) -> None:
        """``n`` more bytes were written into a lent buffer; ValueError past the end."""
    def take(self) -> bytes:
        """The whole frame; ValueError before it is whole, BufferError while a lent
        buffer is still exported, ValueError once taken."""

class FileSlice:
    """A byte range of whole batches in one segment file, kept open until dropped.

    The file stays readable even if the segment is deleted or rolled meanwhile.
    """

    path: str
    position: int  # start within the segment file
    length: int
    base_offset: int  # base offset of the first batch in the slice
    last_offset: int  # last offset of the last whole batch in the slice
    def sendfile(self, out_fd: int, offset: int = 0, count: int | None = None) -> int:
        """Send ``[position+offset, position+offset+count)`` to ``out_fd``; GIL released.

        Returns bytes sent (may be short). Raises BlockingIOError on EAGAIN with nothing sent.
        """
    def read(self) -> bytes: ...

class AppendInfo:
    base_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the log stamps LogAppendTime
    num_batches: int
    num_records: int
    size: int
    log_start_offset: int

class SegmentInfo:
    base_offset: int
    size: int
    log_path: str
    index_entries: int
    time_index_entries: int
    largest_timestamp: int
    next_offset: int

class Log:
    """One partition's log in ``path`` (``<log.dir>/<topic>-<partition>``).

    Config keys are Kafka's topic config names; underscores stand for dots, so
    ``segment_bytes=1024`` and ``**{"segment.bytes": 1024}`` are the same:
    segment.bytes, segment.ms, segment.index.bytes, index.interval.bytes,
    retention.ms, retention.bytes, flush.messages, flush.ms,
    max.message.bytes, message.timestamp.type (CreateTime | LogAppendTime),
    file.delete.delay.ms (removed segments stay as ``.deleted`` files that long;
    ``close`` unlinks any still pending).
    Also: recovery_point, log_start_offset (from the broker's checkpoints).
    """

    @staticmethod
    def open(path: str, *, defer_sync: bool = False, **config: object) -> Log:
        """``defer_sync``: the directory's changes (the clean-shutdown marker's removal,
        rewritten offset checkpoints) are left for the caller's ``sync_filesystem``,
        which must come before the log takes any write."""
    @property
    def path(self) -> str: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def num_segments(self) -> int: ...
    @property
    def recovered(self) -> bool:
        """True when opening this log had to run crash recovery."""
    @property
    def checkpoint_faults(self) -> list[str]:
        """The offset checkpoints opening this log could not parse and set aside, each
        with what was done instead (as Kafka does: recover every segment, or start the
        log at its first segment)."""
    @property
    def recovery_report(self) -> str | None:
        """What crash recovery cut at open, as one line (None when nothing was cut)."""
    @property
    def recovery_dropped(self) -> dict[str, int | None]:
        """What crash recovery cut at open: ``bytes``, ``batches``, ``records``,
        ``first_offset`` / ``last_offset`` (as the cut batches' headers claim them; None
        when no header was readable) and ``segments_deleted``."""
    @property
    def closed(self) -> bool: ...
    def append(
        self, data: BytesLike, *, leader_epoch: int | None = None, now_ms: int | None = None
    ) -> tuple[int, int]:
        """Validate and append one or more whole batches, assigning offsets.

        Returns (base offset of the first batch, last offset of the last batch).
        Nothing is written if any batch fails validation.
        """
    def append_info(
        self, data: BytesLike, *, leader_epoch: int | None = None, now_ms: int | None = None
    ) -> AppendInfo:
        """As ``append``, with the full result."""
    def append_as_follower(self, data: BytesLike) -> AppendInfo:
        """Append batches that carry their offsets (replication); they must follow the log end."""
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """Whole batches from the batch holding ``offset``, at most ``max_bytes``.

        ``max_offset`` (exclusive, e.g. the high watermark) bounds the read.
        With ``min_one_batch`` the first batch is returned even when larger than
        ``max_bytes``, as Kafka's fetch does. Raises OffsetOutOfRangeError
        outside [log_start_offset, log_end_offset].
        """
    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """As ``read`` but as a FileSlice for sendfile; None at the log end."""
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= timestamp_ms."""
    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset >= offset (replication)."""
    def truncate_fully_and_start_at(self, offset: int) -> None: ...
    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset to ``before_offset``; returns the new log start offset."""
    def enforce_retention(self, *, now_ms: int | None = None, max_offset: int | None = None) -> int:
        """Delete whole expired non-active segments by retention.ms / retention.bytes.

        Segments at or above ``max_offset`` (the high watermark) are kept. Returns
        the number of segments deleted.
        """
    def roll(self, *, now_ms: int | None = None) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
    def flush(self) -> None:
        """fsync everything up to the log end offset and advance the recovery point."""
    def clean(
        self,
        *,
        now_ms: int | None = None,
        dedupe_buffer_size: int = 134217728,
        force: bool = False,
        throttler: Throttler | None = None,
        progress: Callable[[int, int], object] | None = None,
        on_step: Callable[[str, int], object] | None = None,
    ) -> dict[str, int]:
        """One compaction pass over the non-active segments below the first open
        transaction: latest value per key; tombstones and transaction markers dropped
        after delete.retention.ms; aborted transactions removed; small segments merged
        into groups of up to segment.bytes and swapped in crash-safely
        (.cleaned, .swap, final name). Runs when the dirty ratio reaches
        min.cleanable.dirty.ratio, when the first dirty batch is older than
        max.compaction.lag.ms, or always with ``force``.

        ``progress(bytes_done, bytes_total)`` follows the pass; ``on_step(step,
        base_offset)`` gets each swap step ("cleaned", "swap", "old_deleted",
        "swapped"), the last three while the log's write lock is held (it must not
        call into this log). Returns its counters."""
    def segments(self) -> list[SegmentInfo]: ...
    def config(self) -> dict[str, str]:
        """The effective config, Kafka key names."""
    def set_config(self, **config: object) -> None:
        """Replaces the config (same keys as ``open``); index sizes apply to new segments."""
    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers; (-1, -1) when unknown."""
    @property
    def latest_epoch(self) -> int | None: ...
    def epoch_entries(self) -> list[tuple[int, int]]: ...
    def close(self) -> None:
        """Flush, trim indexes, write the clean-shutdown marker, then unlink the
        ``.deleted`` files of removed segments still waiting for file.delete.delay.ms."""
    def close_deferred(self) -> None:
        """``close`` without fsyncs, offset checkpoints or clean-shutdown marker, for
        closing many logs: then ``sync_filesystem`` of the log dir,
        ``mark_clean_shutdown``, and ``sync_filesystem`` again."""
    def mark_clean_shutdown(self) -> None:
        """After ``close_deferred`` and a sync of the log dir: the offset checkpoints and
        the clean-shutdown marker, not fsynced. Nothing for a log not closed that way."""
    def close_handlers(self) -> None:
        """Close without writing anything, for a log dir gone offline (Kafka's
        ``closeHandlers``): the files are let go of with no flush, index trim,
        checkpoint or clean-shutdown marker, so the next ``open`` recovers the log.
        Later calls raise LogClosedError, as after ``close``."""
    def __enter__(self) -> Log: ...
    def __exit__(self, *exc: object) -> None: ...

class PartitionReader:
    """A read-only scan of one partition directory (``<log.dir>/<topic>-<partition>``)
    into ``pyarrow.RecordBatch``es with the schema of Spark's Kafka source.

    Safe next to a running broker: files are read with ``pread`` (never written,
    locked or mapped), only whole batches with a valid CRC-32C are decoded, the scan
    stops at ``end_offset``, control batches and aborted transactions yield no rows,
    and a segment deleted meanwhile raises OffsetOutOfRangeError (or, without
    ``fail_on_data_loss``, is skipped). Timestamps filter inclusively, in ms.
    """

    def __init__(
        self,
        path: str,
        topic: str,
        partition: int,
        *,
        start_offset: int,
        end_offset: int,
        min_timestamp: int | None = None,
        max_timestamp: int | None = None,
        include_headers: bool = False,
        fail_on_data_loss: bool = True,
    ) -> None: ...
    def read(self, max_rows: int) -> pyarrow.RecordBatch | None:
        """The next batch of at least ``max_rows`` rows (fewer at the end), None when done."""
    @property
    def next_offset(self) -> int: ...
    @property
    def done(self) -> bool: ...
    @property
    def segments_opened(self) -> int: ...
    @property
    def bytes_read(self) -> int: ...
    @property
    def batches_decoded(self) -> int: ...

def partition_offsets(path: str) -> tuple[int, int]:
    """(log start offset, log end offset) of a partition directory, read-only; the end
    is the offset after the last whole batch on disk."""

def offset_for_timestamp(path: str, timestamp: int) -> int | None:
    """The first offset whose record timestamp (ms) is >= ``timestamp``, or None."""

def decode_arrow(
    data: BytesLike,
    topic: str,
    partition: int,
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    min_timestamp: int | None = None,
    max_timestamp: int | None = None,
    include_headers: bool = False,
) -> tuple[pyarrow.RecordBatch, int]:
    """Decode the whole batches in ``data`` (as Fetch returns them) into one
    ``pyarrow.RecordBatch``; also returns the offset after the last whole batch."""
