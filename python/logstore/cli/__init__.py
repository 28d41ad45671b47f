"""The ``logstore`` command line.

Subcommands (argparse; each one is a module whose ``add_parser`` registers its
options and its ``_cmd_*`` function, and ``app`` adds them to the one parser, so more
can be added without touching the others):

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

Modules: ``app`` (the parser and :func:`main`), ``common`` (exit statuses,
:class:`CliError`, output helpers), one per subcommand (``dump_log``, ``export``,
``demo``, ``clean``), and the two parts of dump-log: ``log_scan`` (.log batches) and
``index_files`` (.index, .timeindex, .txnindex).
"""

from __future__ import annotations

from logstore.cli.app import main
from logstore.cli.clean import CLEAN_SHUTDOWN_MARKER, ProgressBar
from logstore.cli.common import EXIT_INCONSISTENT, EXIT_OK, EXIT_USAGE, SEGMENT_NAME, CliError
from logstore.cli.demo import write_demo
from logstore.cli.dump_log import dump_file
from logstore.cli.index_files import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY, TXN_INDEX_ENTRY
from logstore.cli.log_scan import (
    BATCH_HEADER_SIZE,
    CODECS,
    DEFAULT_CHUNK_SIZE,
    MIN_BATCH_LENGTH,
    BatchSummary,
    LogDumper,
    LogScan,
)

# The names ``logstore.cli`` had as one module; the console script needs only main.
__all__ = [
    "BATCH_HEADER_SIZE",
    "CLEAN_SHUTDOWN_MARKER",
    "CODECS",
    "DEFAULT_CHUNK_SIZE",
    "EXIT_INCONSISTENT",
    "EXIT_OK",
    "EXIT_USAGE",
    "MIN_BATCH_LENGTH",
    "OFFSET_INDEX_ENTRY",
    "SEGMENT_NAME",
    "TIME_INDEX_ENTRY",
    "TXN_INDEX_ENTRY",
    "BatchSummary",
    "CliError",
    "LogDumper",
    "LogScan",
    "ProgressBar",
    "dump_file",
    "main",
    "write_demo",
]
