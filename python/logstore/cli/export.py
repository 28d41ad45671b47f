"""``logstore export``: write topics to Parquet with a local Spark job (:mod:`logstore.spark`),
showing progress on stderr."""

from __future__ import annotations

import argparse

from logstore.cli.common import EXIT_OK, CliError


def _cmd_export(args: argparse.Namespace) -> int:
    try:
        from logstore.spark.errors import SparkSourceError
        from logstore.spark.export import parse_bound, run_export
    except ImportError as exc:
        raise CliError(f"{exc}: export needs pyspark and pyarrow (pip install 'logstore[spark]')") from None
    if not args.log_dirs and not args.bootstrap_server:
        raise CliError("give the broker's log.dirs or --bootstrap-server")
    try:
        run_export(
            args.out,
            log_dirs=",".join(args.log_dirs) or None,
            bootstrap_servers=args.bootstrap_server,
            topics=args.topics,
            start=parse_bound(args.start, "--from") if args.start else None,
            end=parse_bound(args.end, "--to") if args.end else None,
            overwrite=args.overwrite,
            master=args.master,
        )
    except SparkSourceError as exc:
        raise CliError(str(exc)) from None
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(
        "export",
        help="write topics to Parquet with a local Spark job",
        description="Read topics from a broker's log.dirs (or over the network) with the "
        "logstore Spark data source and write Parquet partitioned by topic and partition.",
    )
    export.add_argument("log_dirs", nargs="*", metavar="LOG_DIR", help="the broker's log.dirs")
    export.add_argument("--format", choices=["parquet"], default="parquet", help="output format (parquet)")
    export.add_argument("--out", required=True, metavar="DIR", help="output directory")
    export.add_argument("--topics", metavar="T,...", help="comma-separated topics (default: all but internal)")
    export.add_argument("--from", dest="start", metavar="OFFSET|TIME", help="first offset, or ISO-8601 time (inclusive)")
    export.add_argument("--to", dest="end", metavar="OFFSET|TIME", help="end offset, or ISO-8601 time (exclusive)")
    export.add_argument("--bootstrap-server", metavar="HOST:PORT", help="read through the Kafka protocol instead")
    export.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    export.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    export.set_defaults(func=_cmd_export)
