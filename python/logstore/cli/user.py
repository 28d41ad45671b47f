"""``logstore user``: create, delete and list SCRAM users (``rpk security user``,
``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type
users``), through AlterUserScramCredentials and DescribeUserScramCredentials.

The new user's password is ``--new-password`` (``--password`` is the SASL password of
the connection); without it, it is asked for twice on the terminal.
"""

from __future__ import annotations

from typing import Any

import click
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from logstore.cli.admin import Admin
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.confirm import confirm, no_confirm_option
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output, report, status_of

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism(name: str) -> ScramMechanism:
    return ScramMechanism[name.upper().replace("-", "_")]


def _mechanism_name(m: Any) -> str:
    return getattr(m, "name", str(m)).replace("_", "-")


@cli_group("user")
def group() -> None:
    """Create, delete and list SCRAM users."""


def _describe(admin: Admin) -> dict[str, list[dict[str, Any]]]:
    result = admin.result(
        admin.client.describe_user_scram_credentials(**admin.kwargs()), "describe users"
    )
    return {
        user: [
            {"mechanism": _mechanism_name(c.mechanism), "iterations": c.iterations}
            for c in desc.scram_credential_infos
        ]
        for user, desc in result.items()
    }


@group.command("create")
@click.argument("name")
@click.option(
    "--new-password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="the user's password",
)
@click.option(
    "--mechanism",
    type=click.Choice(MECHANISMS, case_sensitive=False),
    default="SCRAM-SHA-256",
    show_default=True,
)
@click.option("--iterations", type=click.IntRange(min=4096), default=4096, show_default=True)
@broker_command
def create(
    name: str,
    new_password: str,
    mechanism: str,
    iterations: int,
    client: ClientOptions,
    out: Output,
) -> int:
    """Create a SCRAM user, or set the password of an existing one."""
    admin = Admin(client)
    upsert = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(_mechanism(mechanism), iterations), new_password.encode()
    )
    results = admin.results(admin.client.alter_user_scram_credentials([upsert], **admin.kwargs()))
    rows = [{"user": name, "mechanism": mechanism.upper(), "error": status_of(results[name])}]
    return report(out, rows, ["user", "mechanism"])


@group.command("delete")
@click.argument("name")
@click.option(
    "--mechanism",
    type=click.Choice(MECHANISMS, case_sensitive=False),
    help="delete only this credential (default: every one the user has)",
)
@no_confirm_option
@broker_command
def delete(
    name: str, mechanism: str | None, no_confirm: bool, client: ClientOptions, out: Output
) -> int:
    """Delete a SCRAM user's credentials (asks first; see --no-confirm)."""
    admin = Admin(client)
    if mechanism:
        mechanisms = [mechanism.upper()]
    else:
        mechanisms = [c["mechanism"] for c in _describe(admin).get(name, [])]
        if not mechanisms:
            raise CliError(f"no SCRAM user named {name}", 1)
    confirm(f"Delete the {', '.join(mechanisms)} credentials of user {name}?", no_confirm)
    rows = []
    for m in mechanisms:
        results = admin.results(
            admin.client.alter_user_scram_credentials(
                [UserScramCredentialDeletion(name, _mechanism(m))], **admin.kwargs()
            )
        )
        rows.append({"user": name, "mechanism": m, "error": status_of(results[name])})
    return report(out, rows, ["user", "mechanism"])


@group.command("list")
@broker_command
def list_(client: ClientOptions, out: Output) -> int:
    """List SCRAM users and their mechanisms."""
    users = _describe(Admin(client))
    rows = [{"user": u, "mechanisms": creds} for u, creds in sorted(users.items())]
    out.emit(
        rows,
        lambda o, d: o.table(
            ["user", "mechanisms"],
            (
                [r["user"], [f"{c['mechanism']}({c['iterations']})" for c in r["mechanisms"]]]
                for r in d
            ),
        ),
    )
    return EXIT_OK
