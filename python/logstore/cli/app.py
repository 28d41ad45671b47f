"""The ``logstore`` command tree (click) and :func:`main`, which maps every outcome to an
exit status (see :mod:`logstore.cli.common`) and every error to one line on stderr:
``logstore <command>: error: <what>``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from logstore.cli.base import Group
from logstore.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        from logstore.cli.version import version_string

        click.echo(version_string())
        ctx.exit(0)


@click.group(
    cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="print the version and exit",
)
def cli() -> None:
    """logstore: run and operate a Kafka-compatible broker.

    The broker commands (topic, group, cluster, acl, user, produce, consume) work
    against any Kafka-compatible broker through the Kafka protocol: -b/--brokers
    (default 127.0.0.1:9092). The offline commands (dump-log, clean, export, demo) read
    a stopped broker's files. Exit status: 0 done, 1 something failed (the Kafka error
    is named), 2 usage error or no broker reachable.
    """


def _register() -> None:
    from logstore.cli import (
        acl,
        aliases,
        clean,
        cluster,
        console,
        consume,
        demo,
        dev_cluster,
        dump_log,
        export,
        group,
        mirror,
        produce,
        profile,
        registry,
        schema_registry,
        topic,
        user,
        version,
    )

    for cmd in (
        topic.group,
        group.group,
        cluster.group,
        profile.group,
        acl.group,
        user.group,
        produce.command,
        consume.command,
        version.command,
        dev_cluster.group,
        dump_log.command,
        export.command,
        demo.command,
        clean.command,
        mirror.group,
        console.command,
        registry.group,
        schema_registry.command,
    ):
        cli.add_command(cmd)
    aliases.register(cli)


_register()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default: sys.argv) and returns its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        status = cli.main(args=args, prog_name="logstore", standalone_mode=False)
        sys.stdout.flush()
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort as exc:
        # click raises Abort for Ctrl-C (and end of input) at a prompt.
        print("logstore: aborted", file=sys.stderr)
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        return EXIT_INTERRUPTED if interrupted else EXIT_USAGE
    except click.ClickException as exc:
        # Usage errors, bad parameters, files click cannot open: all exit status 2.
        exc.show()
        return EXIT_USAGE
    except CliError as exc:
        sys.stdout.flush()
        name = getattr(exc, "command", "logstore")
        print(f"{name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # e.g. `logstore dump-log ... | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a storage error from the native module, an OSError...
        sys.stdout.flush()
        name = getattr(exc, "command", "logstore")
        print(f"{name}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return status if isinstance(status, int) else EXIT_OK
