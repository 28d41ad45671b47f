"""``logstore console``: serve the web console (:mod:`logstore.console`) for the cluster
the connection options name, until Ctrl-C.

It takes every broker command's connection options (SASL, TLS, ``-X``, profiles) and
its own: ``--listen HOST:PORT`` (default 127.0.0.1:8080; another than loopback needs
``--basic-auth``), ``--basic-auth USER:PASS`` or a file of such lines, ``--registry URL``
(a schema registry, to decode records framed with a schema id), ``--allow-writes``
(produce, reset offsets and delete from the pages; off by default) and
``--sample-interval`` (seconds between the samples its charts draw).
"""

from __future__ import annotations

import asyncio

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output


@cli_command("console")
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="where to serve (not loopback: needs --basic-auth)",
)
@click.option("--registry", metavar="URL", help="schema registry URL, to decode schema ids")
@click.option(
    "--allow-writes", is_flag=True, help="allow produce, offset resets and deletes from the pages"
)
@click.option(
    "--basic-auth",
    metavar="USER:PASS|FILE",
    envvar="LOGSTORE_CONSOLE_AUTH",
    help="require HTTP basic auth: USER:PASS or a file of USER:PASS lines "
    "(env LOGSTORE_CONSOLE_AUTH)",
)
@click.option(
    "--sample-interval",
    type=click.FloatRange(min=0.2),
    default=5.0,
    show_default=True,
    help="seconds between the throughput and lag samples the charts draw",
)
@broker_command
def command(
    listen: str,
    registry: str | None,
    allow_writes: bool,
    basic_auth: str | None,
    sample_interval: float,
    client: ClientOptions,
    out: Output,
) -> int:
    """Serve a web console for the cluster: brokers and health, topics and their records,
    consumer groups and their lag, ACLs, users, configs and quotas."""
    from logstore.console.app import serve
    from logstore.console.settings import SettingsError, settings

    try:
        chosen = settings(listen, registry, allow_writes, basic_auth, sample_interval)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    client.config()  # a bad -X or missing SASL password: refused before serving
    try:
        asyncio.run(serve(client, chosen))
    except OSError as exc:
        raise CliError(f"--listen {listen}: {exc.strerror or exc}") from None
    return EXIT_OK
