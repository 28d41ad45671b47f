"""``logstore schema-registry``: run the schema registry (Confluent's REST API v1) alone, in
front of any Kafka-compatible cluster, as the broker runs it with
``schema.registry.listeners``. Instances sharing a cluster elect one primary (group
``schema-registry``) and forward writes to it; Ctrl-C stops.

The Kafka connection takes the usual options (``-b``/``--bootstrap``, SASL PLAIN and
SCRAM-SHA-256/512, TLS); the election's group client uses the same ones, so an instance in
front of a SASL-only cluster can become the primary (``--no-primary``: never).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from typing import Any

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output


def _kafka_tls(client: ClientOptions) -> ssl.SSLContext | None:
    if "SSL" not in client.protocol():
        return None
    ctx = ssl.create_default_context(cafile=client.tls_ca)
    if client.tls_cert:
        ctx.load_cert_chain(client.tls_cert, client.tls_key)
    return ctx


async def _serve(config: Any, ready: Any) -> None:
    from logstore.schema_registry.server import RegistryServer

    server = RegistryServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    ready(server)
    try:
        await stop.wait()
    finally:
        await server.stop()


@cli_command("schema-registry")
@click.option(
    "--listen",
    default="http://0.0.0.0:8081",
    show_default=True,
    help="http://HOST:PORT or https://HOST:PORT to serve on",
)
@click.option("--bootstrap", help="bootstrap servers (same as -b/--brokers)")
@click.option("--advertised-host", help="host name other instances forward writes to")
@click.option("--group-id", default="schema-registry", show_default=True)
@click.option("--topic", default="_schemas", show_default=True)
@click.option("--no-primary", is_flag=True, help="never become the primary")
@click.option("--tls-server-cert", type=click.Path(dir_okay=False), help="PEM, for https://")
@click.option("--tls-server-key", type=click.Path(dir_okay=False), help="PEM, for https://")
@broker_command
def command(
    client: ClientOptions,
    out: Output,
    listen: str,
    bootstrap: str | None,
    advertised_host: str | None,
    group_id: str,
    topic: str,
    no_primary: bool,
    tls_server_cert: str | None,
    tls_server_key: str | None,
) -> int:
    """Serve the schema registry's REST API, backed by the cluster's `_schemas` topic."""
    from logstore.schema_registry.server import ListenerError, RegistryConfig, parse_listener

    if bootstrap:
        client = ClientOptions(**{**client.__dict__, "brokers": bootstrap})
    try:
        scheme, _, _ = parse_listener(listen)
    except ListenerError as exc:
        raise CliError(str(exc)) from None
    server_tls = None
    if scheme == "https":
        if not tls_server_cert:
            raise CliError("an https:// listener needs --tls-server-cert (and --tls-server-key)")
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(tls_server_cert, tls_server_key)
    conf = client.config()
    from logstore.schema_registry.election_sasl import SaslCredentials

    try:
        SaslCredentials.from_client_config(conf)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    config = RegistryConfig(
        listener=listen,
        client_config=conf,
        advertised_host=advertised_host,
        group=group_id,
        topic=topic,
        eligible=not no_primary,
        server_tls=server_tls,
        kafka_tls=_kafka_tls(client),
    )
    logging.basicConfig(level=logging.INFO if client.verbose else logging.WARNING)

    def ready(server: Any) -> None:
        click.echo(f"schema registry listening on {server.url} (Kafka: {client.brokers})")

    asyncio.run(_serve(config, ready))
    return EXIT_OK
