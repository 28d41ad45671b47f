"""The ``logstore`` command line (click, with rich tables and progress bars).

Broker commands, against any Kafka-compatible broker through the Kafka protocol
(confluent-kafka's AdminClient, Producer and Consumer; ``-b/--brokers``, SASL and TLS
options, ``--format table|json``): ``topic``, ``group``, ``cluster``, ``acl``, ``user``,
``produce``, ``consume``, ``version``; ``dev-cluster up|down`` runs ZooKeeper and brokers
on loopback. ``docs/cli.md`` maps each to its rpk and kafka-*.sh equivalent.

Offline commands, on a stopped broker's files: ``dump-log FILE...`` (Kafka's
kafka-dump-log.sh), ``clean PARTITION_DIR [--dry-run]`` (one forced log-cleaner pass),
``export --format parquet --out DIR`` (a local Spark job), ``demo [DIR]``.

Exit status (:mod:`logstore.cli.common`): 0 done; 1 the broker refused part of the
request, or a file holds a corrupt batch, a torn tail or an index mismatch; 2 usage
errors, unreadable files and unreachable brokers.

Modules: ``app`` (the command tree and :func:`main`), ``base`` (click classes), ``common``
(exit statuses, :class:`CliError`), ``output`` (tables and JSON), ``connection`` (client
options), ``admin`` (the AdminClient layer and error names), ``positions`` (offsets and
timestamps to seek to), one module per command, and the parts of dump-log: ``log_scan``
(.log batches) and ``index_files`` (.index, .timeindex, .txnindex).
"""

from __future__ import annotations

from logstore.cli.clean import CLEAN_SHUTDOWN_MARKER
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
from logstore.cli.progress import ProgressBar


def main(argv: list[str] | None = None) -> int:
    """The ``logstore`` command line (imported on first use: ``logstore-broker --version``
    reads :mod:`logstore.cli.version` without loading the broker commands)."""
    from logstore.cli.app import main as run

    return run(argv)


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
