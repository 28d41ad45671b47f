"""The click classes of every ``logstore`` command: subcommands listed in the order
they were added, and errors tagged with the command that raised them (for the one-line
``logstore <command>: error: ...`` message of :func:`logstore.cli.app.main`)."""

from __future__ import annotations

from typing import Any

import click


class Command(click.Command):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if not hasattr(exc, "command"):
                try:
                    exc.command = ctx.command_path  # type: ignore[attr-defined]
                except AttributeError:  # an exception type with __slots__
                    pass
            raise


class Group(click.Group):
    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


Group.group_class = Group


def command(name: str, **kwargs: Any) -> Any:
    """``@click.command`` with :class:`Command`."""
    return click.command(name, cls=Command, **kwargs)


def group(name: str, **kwargs: Any) -> Any:
    """``@click.group`` with :class:`Group`."""
    return click.group(name, cls=Group, **kwargs)
