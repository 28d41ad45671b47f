"""``logstore clean PARTITION_DIR``: compact a stopped partition log (one forced pass of
the log cleaner) with a progress bar on stderr, or only report with ``--dry-run``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import IO

from logstore.cli.common import EXIT_OK, CliError, _native

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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
