"""``logstore cluster quotas describe|alter``: client quotas (KIP-546), as ``rpk cluster
quotas`` and ``kafka-configs.sh --entity-type users|clients`` manage them, through
DescribeClientQuotas and AlterClientQuotas on the broker's own codec (librdkafka has
neither).

An entity is given as ``--name TYPE=NAME`` or ``--default TYPE`` (TYPE ``user``,
``client-id`` or ``ip``; both kinds repeatable, at most one per type; ``ip`` alone), so
``--name user=alice --default client-id`` is alice's default for her clients.
``describe`` filters the same way, plus ``--any TYPE`` (any named or default entity of
that type) and ``--strict`` (only entities with exactly the filter's types); with no
filter it lists every entity.
``alter`` takes ``--add KEY=VALUE`` and ``--delete KEY`` (``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``; for an ip,
``connection_creation_rate``) and ``--dry`` (validated by the broker, not written).
"""

from __future__ import annotations

from typing import Any

import click

from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.metadata_probe import first_answer, negotiated_version
from logstore.cli.output import Output
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = list[tuple[str, str | None]]


@cli_group("quotas")
def quotas() -> None:
    """Client quotas per user, client id and IP (rpk cluster quotas)."""


def _entity_type(text: str) -> str:
    if text not in TYPES:
        raise CliError(f"unknown entity type {text!r} (use {', '.join(TYPES)})", EXIT_USAGE)
    return text


def _entity(names: tuple[str, ...], defaults: tuple[str, ...], anys: tuple[str, ...] = ()):
    """(type, match type, name) per entity type the options give; CliError when a type
    is given twice or a --name is not TYPE=NAME."""
    out: list[tuple[str, int, str | None]] = []
    for text in names:
        kind, sep, name = text.partition("=")
        if not sep or not name:
            raise CliError(f"--name {text!r}: expected TYPE=NAME", EXIT_USAGE)
        out.append((_entity_type(kind), MATCH_EXACT, name))
    out.extend((_entity_type(kind), MATCH_DEFAULT, None) for kind in defaults)
    out.extend((_entity_type(kind), MATCH_ANY, None) for kind in anys)
    kinds = [kind for kind, _, _ in out]
    if len(set(kinds)) != len(kinds):
        raise CliError("each entity type may be given once", EXIT_USAGE)
    return out


def _label(entity: Entity) -> str:
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)


def _value(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _exchange(client: ClientOptions, api_key: ApiKey, request: Any) -> Any:
    def exchange(connection: Any) -> Any:
        version = negotiated_version(connection, api_key)
        if version < 0:
            raise CliError(f"{connection.address} does not serve {api_key.api_name}")
        return connection.request(api_key, request, version=version)

    return first_answer(client, api_key.api_name, exchange, None)


def _entity_options(fn: Any) -> Any:
    fn = click.option(
        "--default", "defaults", multiple=True, metavar="TYPE", help="the default TYPE entity"
    )(fn)
    return click.option(
        "--name", "names", multiple=True, metavar="TYPE=NAME", help="a named entity"
    )(fn)


@quotas.command("describe")
@_entity_options
@click.option("--any", "anys", multiple=True, metavar="TYPE", help="any entity of TYPE")
@click.option("--strict", is_flag=True, help="only entities with exactly these types")
@broker_command
def describe(
    client: ClientOptions,
    out: Output,
    names: tuple[str, ...],
    defaults: tuple[str, ...],
    anys: tuple[str, ...],
    strict: bool,
) -> int:
    """Show the quotas of the entities matching the filter (every entity without one)."""
    R = DescribeClientQuotasRequest
    request = R(
        components=[
            R.ComponentData(entity_type=kind, match_type=match_type, match=name)
            for kind, match_type, name in _entity(names, defaults, anys)
        ],
        strict=strict,
    )
    response = _exchange(client, ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    if response is None:
        raise CliError("the broker does not serve DescribeClientQuotas", EXIT_FAILED)
    assert isinstance(response, DescribeClientQuotasResponse)
    if response.error_code:
        raise CliError(
            f"DescribeClientQuotas: {ErrorCode(response.error_code).name}: "
            f"{response.error_message}",
            EXIT_FAILED,
        )
    data = sorted(
        (
            {
                "entity": [{"type": e.entity_type, "name": e.entity_name} for e in entry.entity],
                "values": {
                    v.key: _value(v.value) for v in sorted(entry.values, key=lambda v: v.key)
                },
            }
            for entry in response.entries or []
        ),
        key=lambda d: _label([(e["type"], e["name"]) for e in d["entity"]]),
    )

    def draw(o: Output, d: list[dict[str, Any]]) -> None:
        if not d:
            o.line("no client quotas")
        for item in d:
            o.line(_label([(e["type"], e["name"]) for e in item["entity"]]))
            for key, value in item["values"].items():
                o.line(f"  {key}={value}")

    out.emit(data, draw)
    return EXIT_OK


@quotas.command("alter")
@_entity_options
@click.option("--add", "adds", multiple=True, metavar="KEY=VALUE", help="set a quota")
@click.option("--delete", "deletes", multiple=True, metavar="KEY", help="remove a quota")
@click.option("--dry", is_flag=True, help="validate only: the broker checks, writes nothing")
@broker_command
def alter(
    client: ClientOptions,
    out: Output,
    names: tuple[str, ...],
    defaults: tuple[str, ...],
    adds: tuple[str, ...],
    deletes: tuple[str, ...],
    dry: bool,
) -> int:
    """Set (--add) or remove (--delete) quotas of one entity."""
    entity: Entity = [(kind, name) for kind, _, name in _entity(names, defaults)]
    if not entity:
        raise CliError("name an entity: --name TYPE=NAME or --default TYPE", EXIT_USAGE)
    if not adds and not deletes:
        raise CliError("nothing to change: --add KEY=VALUE or --delete KEY", EXIT_USAGE)
    R = AlterClientQuotasRequest
    ops = []
    for text in adds:
        key, sep, value = text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None:
            raise CliError(f"--add {text!r}: expected KEY=NUMBER", EXIT_USAGE)
        ops.append(R.OpData(key=key, value=number, remove=False))
    ops.extend(R.OpData(key=key, value=0.0, remove=True) for key in deletes)
    request = R(
        entries=[
            R.EntryData(
                entity=[R.EntityData(entity_type=k, entity_name=n) for k, n in entity], ops=ops
            )
        ],
        validate_only=dry,
    )
    response = _exchange(client, ApiKey.ALTER_CLIENT_QUOTAS, request)
    if response is None:
        raise CliError("the broker does not serve AlterClientQuotas", EXIT_FAILED)
    assert isinstance(response, AlterClientQuotasResponse)
    entry = response.entries[0]
    error = (
        None
        if not entry.error_code
        else f"{ErrorCode(entry.error_code).name}: {entry.error_message}"
    )
    data = {"entity": _label(entity), "dry": dry, "error": error}

    def draw(o: Output, d: dict[str, Any]) -> None:
        o.table(["entity", "status"], [[d["entity"], d["error"] or ("OK (dry)" if dry else "OK")]])

    out.emit(data, draw)
    return EXIT_FAILED if error else EXIT_OK
