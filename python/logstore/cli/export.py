"""``logstore export``: write topics to Parquet with a local Spark job (:mod:`logstore.spark`),
showing progress on stderr."""

from __future__ import annotations

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError


@cli_command("export", short_help="Write topics to Parquet with a local Spark job.")
@click.argument("log_dirs", nargs=-1, metavar="[LOG_DIR]...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    help="output format",
)
@click.option("--out", required=True, metavar="DIR", help="output directory")
@click.option(
    "--topics", metavar="T,...", help="comma-separated topics (default: all but internal)"
)
@click.option(
    "--from", "start", metavar="OFFSET|TIME", help="first offset, or ISO-8601 time (inclusive)"
)
@click.option("--to", "end", metavar="OFFSET|TIME", help="end offset, or ISO-8601 time (exclusive)")
@click.option(
    "--bootstrap-server", metavar="HOST:PORT", help="read through the Kafka protocol instead"
)
@click.option("--overwrite", is_flag=True, help="replace DIR if it exists")
@click.option("--master", default="local[2]", show_default=True, help="Spark master")
def command(
    log_dirs: tuple[str, ...],
    fmt: str,
    out: str,
    topics: str | None,
    start: str | None,
    end: str | None,
    bootstrap_server: str | None,
    overwrite: bool,
    master: str,
) -> int:
    """Write topics to Parquet with a local Spark job: read them from a broker's log.dirs
    (or over the network) with the logstore Spark data source and write Parquet
    partitioned by topic and partition, showing progress on stderr."""
    try:
        import pyarrow  # noqa: F401 - the spark extra: pyspark, pyarrow
        import pyspark  # noqa: F401

        from logstore.spark.errors import SparkSourceError
        from logstore.spark.export import parse_bound, run_export
    except ImportError as exc:  # pyspark, pyarrow or pandas: the spark extra
        raise CliError(
            f"needs the spark extra ({exc.name or exc} is not installed): "
            "pip install '.[spark]' from a logstore checkout"
        ) from None
    if not log_dirs and not bootstrap_server:
        raise CliError("give the broker's log.dirs or --bootstrap-server")
    try:
        run_export(
            out,
            log_dirs=",".join(log_dirs) or None,
            bootstrap_servers=bootstrap_server,
            topics=topics,
            start=parse_bound(start, "--from") if start else None,
            end=parse_bound(end, "--to") if end else None,
            overwrite=overwrite,
            master=master,
        )
    except SparkSourceError as exc:
        raise CliError(str(exc)) from None
    return EXIT_OK
