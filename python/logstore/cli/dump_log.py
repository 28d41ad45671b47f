"""``logstore dump-log FILE...``: the equivalent of Kafka's ``kafka-dump-log.sh``
(DumpLogSegments) for ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files."""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO

from logstore.cli.common import EXIT_INCONSISTENT, EXIT_OK, CliError, _segment_name, _sibling
from logstore.cli.index_files import (
    _dump_offset_index,
    _dump_time_index,
    _dump_txn_index,
    _verify_indexes,
    _verify_offset_index,
    _verify_time_index,
)
from logstore.cli.log_scan import DEFAULT_CHUNK_SIZE, LogDumper


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


def _cmd_dump_log(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            status = max(status, dump_file(path, args, sys.stdout))
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror or exc}") from None
    return status


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
