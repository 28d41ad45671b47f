"""``logstore demo [DIR]``: write a small demo partition and dump its first segment."""

from __future__ import annotations

import argparse
import os
import sys
import time

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import CliError, _native
from logstore.cli.dump_log import dump_file
from logstore.cli.log_scan import DEFAULT_CHUNK_SIZE


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


@cli_command("demo", short_help="Write a small demo partition and dump it.")
@click.argument(
    "directory", required=False, default=os.path.join("logstore-demo", "demo-0"), metavar="[DIR]"
)
def command(directory: str) -> int:
    """Write a demo partition (batches with keys, headers, every codec, a transaction)
    into DIR (default ./logstore-demo/demo-0) and dump its first segment."""
    segments = write_demo(directory)
    out = sys.stdout
    out.write(f"Wrote a demo partition to {directory}: {len(segments)} segments\n")
    for path in segments:
        out.write(f"  {path}\n")
    out.write("\n")
    ns = argparse.Namespace(
        print_records=True, deep_iteration=True, verify_index=True, chunk_size=DEFAULT_CHUNK_SIZE
    )
    return dump_file(segments[0], ns, out)
