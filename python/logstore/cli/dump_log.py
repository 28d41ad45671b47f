"""``logstore dump-log FILE...``: the equivalent of Kafka's ``kafka-dump-log.sh``
(DumpLogSegments) for ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files."""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO

import click

from logstore.cli.base import command as cli_command
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
from logstore.cli.progress import ProgressBar


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
        bar = getattr(args, "progress", None)
        dumper = LogDumper(
            out,
            print_records=args.print_records,
            deep_iteration=args.deep_iteration,
            chunk_size=args.chunk_size,
            progress=bar,
        )
        try:
            scan = dumper.scan(path)
        finally:
            if bar is not None:
                bar.finish()
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


@cli_command(
    "dump-log", short_help="Print a segment's batches or index entries (kafka-dump-log.sh)."
)
@click.argument("files", nargs=-1, required=True, metavar="SEGMENT...")
@click.option("--print-records", is_flag=True, help="print every record (implies --deep-iteration)")
@click.option(
    "--verify-index",
    is_flag=True,
    help="check every .index/.timeindex entry against the batches of the .log",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="decode every record (decompressing) and check it against its batch header",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="a progress bar on stderr while a .log is read (default: when stderr is a terminal)",
)
@click.option("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, hidden=True)
def command(
    files: tuple[str, ...],
    print_records: bool,
    verify_index: bool,
    deep_iteration: bool,
    progress: bool | None,
    chunk_size: int,
) -> int:
    """Print the batches of .log segments (e.g. 00000000000000000000.log), or the entries
    of .index, .timeindex and .txnindex files: Kafka's kafka-dump-log.sh. Exit status 1
    when a corrupt batch, a torn tail or an index mismatch is found."""
    args = argparse.Namespace(
        print_records=print_records,
        verify_index=verify_index,
        deep_iteration=deep_iteration,
        chunk_size=chunk_size,
    )
    if progress is None:
        progress = sys.stderr.isatty()
    status = EXIT_OK
    for path in files:
        args.progress = ProgressBar(sys.stderr, os.path.basename(path)) if progress else None
        try:
            status = max(status, dump_file(path, args, sys.stdout))
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror or exc}") from None
    return status
