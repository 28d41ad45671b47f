"""The ``logstore`` parser and :func:`main`: every subcommand's parser, in order, and
the mapping of errors to exit statuses."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from logstore.cli import clean, demo, dump_log, export
from logstore.cli.common import EXIT_OK, EXIT_USAGE, CliError


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logstore", description="Tools for logstore's Kafka-format partition logs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    export.add_parser(sub)
    dump_log.add_parser(sub)
    demo.add_parser(sub)
    clean.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        status = func(args)
        sys.stdout.flush()
    except CliError as exc:
        sys.stdout.flush()
        print(f"logstore {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # e.g. `logstore dump-log ... | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a storage error from the native module, an OSError...
        sys.stdout.flush()
        print(f"logstore {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return status
