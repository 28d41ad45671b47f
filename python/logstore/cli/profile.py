"""``logstore profile``: named connection profiles, as ``rpk profile`` keeps them.

``create NAME`` takes the connection options every broker command takes (``-b``,
``--user``/``--password``, ``--tls*``, ``-X``, ``--timeout`` ...) and stores those given
as flags or through their environment variables, then makes NAME the current profile;
``use NAME`` switches, ``clear`` leaves no profile current, ``list`` marks the current
one with ``*``, ``show [NAME]`` prints one (the password masked), ``delete NAME`` removes
one. The file and the precedence rules: :mod:`logstore.cli.profile_store`. A name that
does not exist (or already does, for ``create``) and an unreadable file are usage
errors (exit status 2).
"""

from __future__ import annotations

from typing import Any

import click

from logstore.cli import profile_store
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.connection import _OPTIONS
from logstore.cli.output import Output, format_option

MASK = "********"


@cli_group("profile")
def group() -> None:
    """Named sets of brokers and credentials (stored in your config dir, mode 0600)."""


def _masked(profile: dict[str, Any]) -> dict[str, Any]:
    return {k: (MASK if k == "password" and v is not None else v) for k, v in profile.items()}


def _connection_options() -> list[click.Parameter]:
    """The broker commands' connection options, except -v (not a connection setting)."""

    def carrier() -> None: ...

    for option in _OPTIONS:
        option(carrier)
    params: list[click.Parameter] = carrier.__click_params__  # type: ignore[attr-defined]
    return [p for p in params if p.name != "verbose"]


@group.command("create", params=_connection_options())
@click.argument("name")
def create(name: str, **values: Any) -> int:
    """Store the connection options given as profile NAME and make it the current one."""
    profiles = profile_store.load()
    if name in profiles.profiles:
        raise CliError(f"profile {name!r} exists (delete it first, or pick another name)")
    stored = profile_store.given(click.get_current_context(), values)
    profiles.profiles[name] = stored
    profiles.current = name
    path = profile_store.save(profiles)
    keys = ", ".join(sorted(stored)) or "nothing: the defaults apply"
    click.echo(f"Created profile {name} ({keys}) in {path}; it is the current profile.")
    return EXIT_OK


@group.command("use")
@click.argument("name")
def use(name: str) -> int:
    """Make NAME the current profile: broker commands take their options from it."""
    profiles = profile_store.load()
    profiles.get(name)
    profiles.current = name
    profile_store.save(profiles)
    click.echo(f"Using profile {name}.")
    return EXIT_OK


@group.command("clear")
def clear() -> int:
    """Leave no profile current (the profiles are kept)."""
    profiles = profile_store.load()
    if profiles.current is not None:
        profiles.current = None
        profile_store.save(profiles)
    click.echo("No profile is current.")
    return EXIT_OK


@group.command("delete")
@click.argument("name")
def delete(name: str) -> int:
    """Remove profile NAME (if it was current, none is)."""
    profiles = profile_store.load()
    profiles.get(name)
    del profiles.profiles[name]
    if profiles.current == name:
        profiles.current = None
    profile_store.save(profiles)
    click.echo(f"Deleted profile {name}.")
    return EXIT_OK


@group.command("list")
@format_option
def list_(fmt: str) -> int:
    """List the profiles; the current one is marked *."""
    profiles = profile_store.load()
    rows = [
        {
            "name": name,
            "current": name == profiles.current,
            "brokers": p.get("brokers"),
            "user": p.get("user"),
        }
        for name, p in sorted(profiles.profiles.items())
    ]
    Output(fmt).emit(
        rows,
        lambda o, d: o.table(
            ["name", "brokers", "user"],
            ([f"{r['name']}*" if r["current"] else r["name"], r["brokers"], r["user"]] for r in d),
        ),
    )
    return EXIT_OK


@group.command("show")
@click.argument("name", required=False)
@format_option
def show(name: str | None, fmt: str) -> int:
    """Show profile NAME (default: the current one), the password masked."""
    profiles = profile_store.load()
    if name is None:
        if profiles.current is None:
            raise CliError("no profile is current: name one, or `logstore profile use NAME`")
        name = profiles.current
    data = {
        "name": name,
        "current": name == profiles.current,
        **_masked(profiles.get(name)),
    }
    Output(fmt).emit(data, lambda o, d: o.fields(list(d.items())))
    return EXIT_OK
