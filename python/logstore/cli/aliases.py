"""rpk's spellings of ``logstore`` commands, accepted as hidden aliases:

- ``logstore topic produce`` = ``logstore produce`` (``rpk topic produce``);
- ``logstore topic consume`` = ``logstore consume`` (``rpk topic consume``);
- ``logstore security acl ...`` = ``logstore acl ...`` (``rpk security acl``);
- ``logstore security user ...`` = ``logstore user ...`` (``rpk security user``).

An alias is the same command (options, behaviour, exit statuses) under a second name;
it is left out of the command lists (``security`` is hidden, and lists its two), and
its ``--help`` starts with ``(alias of logstore <command>)``. A mistyped command gets
click's ``Did you mean ...?`` among the names and aliases of its group.
"""

from __future__ import annotations

import copy

import click

from logstore.cli.base import Group

# (group path under ``logstore``, alias name, the command's path under ``logstore``)
ALIASES = [
    ("topic", "produce", "produce"),
    ("topic", "consume", "consume"),
    ("security", "acl", "acl"),
    ("security", "user", "user"),
]


def _alias(cmd: click.Command, of: str, hidden: bool) -> click.Command:
    alias = copy.copy(cmd)
    alias.hidden = hidden
    alias.help = f"(alias of logstore {of}) {cmd.help or ''}".rstrip()
    alias.short_help = f"(alias of logstore {of})"
    return alias


def register(root: click.Group) -> None:
    """Adds the aliases to ``root`` (the ``logstore`` group, its commands registered)."""
    for parent_name, name, target in ALIASES:
        parent = root.commands.get(parent_name)
        if parent is None:
            parent = Group(
                parent_name,
                hidden=True,
                help=f"rpk's `{parent_name}` commands (aliases).",
            )
            root.add_command(parent)
        assert isinstance(parent, click.Group)
        # Inside a group that is only aliases (itself hidden), its commands are listed.
        parent.add_command(_alias(root.commands[target], target, not parent.hidden), name)
