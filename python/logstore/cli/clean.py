"""``logstore clean PARTITION_DIR``: compact a stopped partition log (one forced pass of
the log cleaner) with a progress bar on stderr, or only report with ``--dry-run``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError, _native
from logstore.cli.progress import ProgressBar

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def _parse_configs(native, pairs: Sequence[str]) -> dict[str, str]:
    """The ``--config`` pairs under Kafka's names, checked as a broker checks a topic's
    configs (an unknown name, ``_`` spellings included, or a bad value is refused with
    Kafka's message)."""
    configs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--config {pair!r}: expected KEY=VALUE (e.g. delete.retention.ms=0)")
        configs[key.strip()] = value.strip()
    try:
        native.validate_topic_configs(configs, {})
    except native.InvalidConfigError as e:
        raise CliError(f"--config: {e}") from None
    return configs


@cli_command("clean", short_help="Compact a stopped partition log (one cleaner pass).")
@click.argument("directory", metavar="PARTITION_DIR")
@click.option("--dry-run", is_flag=True, help="only read the files and report what a pass would do")
@click.option(
    "--config",
    "config",
    multiple=True,
    metavar="KEY=VALUE",
    help="topic config for the pass (Kafka names, e.g. delete.retention.ms=0); repeatable",
)
@click.option(
    "--dedupe-buffer-size",
    type=int,
    default=128 << 20,
    help="offset map memory, as log.cleaner.dedupe.buffer.size (default 128 MiB)",
)
@click.option("--force", is_flag=True, help="clean a log that lacks the clean-shutdown marker")
def command(
    directory: str, dry_run: bool, config: tuple[str, ...], dedupe_buffer_size: int, force: bool
) -> int:
    """Compact the stopped partition log in PARTITION_DIR (e.g. data/orders-0): keep the
    latest record per key, drop tombstones and transaction markers past
    delete.retention.ms and aborted transactions, merge small segments. The log must not
    be in use: a log without the clean-shutdown marker is refused unless --force is given."""
    native = _native()
    if not os.path.isdir(directory):
        raise CliError(f"{directory}: not a directory")
    if not any(name.endswith(".log") for name in os.listdir(directory)):
        raise CliError(f"{directory}: holds no .log segment")
    configs = _parse_configs(native, config)
    stopped = os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_MARKER))
    if not stopped and not dry_run and not force:
        raise CliError(
            f"{directory}: no {CLEAN_SHUTDOWN_MARKER} marker: a broker has it open or it crashed. "
            "Stop the broker (or check no process uses the log) and pass --force"
        )
    bar = ProgressBar(sys.stderr, "dry run" if dry_run else "cleaning")
    try:
        if dry_run:
            stats = native.clean_dry_run(
                directory, dedupe_buffer_size=dedupe_buffer_size, progress=bar, **configs
            )
        else:
            log = native.Log.open(directory, **configs)
            try:
                stats = log.clean(dedupe_buffer_size=dedupe_buffer_size, force=True, progress=bar)
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
    if dry_run:
        out.write("dry run: nothing was changed\n")
    return EXIT_OK
