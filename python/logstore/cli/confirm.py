"""The one rule every destructive ``logstore`` command follows before it deletes
(``topic delete``, ``topic trim-prefix``, ``group delete``, ``acl delete``, ``user
delete``):

- ``--no-confirm``: go ahead without asking (scripts);
- stdin is a terminal: print what will be deleted and ask ``[y/N]`` on stderr; only
  ``y`` or ``yes`` goes ahead, anything else (or end of input) deletes nothing and
  exits 1 with ``nothing deleted``;
- stdin is not a terminal and no ``--no-confirm``: refuse with exit status 2, so a
  script never deletes by accident and never hangs on a prompt.

Ctrl-C at the prompt ends the command with 130 like anywhere else (the
KeyboardInterrupt reaches :func:`logstore.cli.app.main`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from logstore.cli.common import EXIT_FAILED, EXIT_USAGE, CliError

F = TypeVar("F", bound=Callable[..., Any])

no_confirm_option: Callable[[F], F] = click.option(
    "--no-confirm",
    is_flag=True,
    help="delete without asking (needed when stdin is not a terminal)",
)

YES = ("y", "yes")


def confirm(question: str | Callable[[], str], no_confirm: bool) -> None:
    """Returns when the deletion may go ahead; CliError otherwise (see the module).
    ``question`` may be a function, called only when there is someone to ask (e.g. to
    list what matches a filter)."""
    if no_confirm:
        return
    if not sys.stdin.isatty():
        raise CliError(
            "refusing to delete without --no-confirm (stdin is not a terminal)", EXIT_USAGE
        )
    text = question() if callable(question) else question
    sys.stderr.write(f"{text} [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if answer.strip().lower() not in YES:
        if not answer:
            sys.stderr.write("\n")
        raise CliError("nothing deleted (not confirmed)", EXIT_FAILED)
