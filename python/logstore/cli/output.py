"""How the broker commands print: rich tables for people (the default), JSON for scripts
(``--format json``).

A command builds plain data (dicts, lists, strings, numbers, None) and hands it to
:meth:`Output.emit` with a function that draws it as tables. In JSON mode the data is
printed as one JSON document, so what a script reads is what the tables show. Errors go
to stderr in both modes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "json")

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="tables for people, json for scripts",
)


def _console() -> Console:
    # Not a terminal (a pipe, a file, a test): wide enough that no row wraps, no colour.
    if sys.stdout.isatty():
        return Console(file=sys.stdout, highlight=False)
    return Console(file=sys.stdout, width=4096, highlight=False, color_system=None, soft_wrap=True)


def cell(value: Any) -> str:
    """A table cell: None as ``-``, lists comma-separated, booleans lower case."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value) if value else "-"
    return str(value)


class Output:
    """Prints a command's results in the chosen format (``table`` or ``json``)."""

    def __init__(self, fmt: str = "table") -> None:
        self.fmt = fmt
        self.console = _console()

    @property
    def json(self) -> bool:
        return self.fmt == "json"

    def emit(self, data: Any, draw: Callable[[Output, Any], None]) -> None:
        if self.json:
            self.print_json(data)
        else:
            draw(self, data)

    def print_json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
    ) -> None:
        """One table with upper-case headers, as rpk prints them."""
        t = Table(
            box=box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False, pad_edge=False
        )
        for name in columns:
            t.add_column(name.upper(), no_wrap=True, overflow="fold")
        for row in rows:
            t.add_row(*(cell(v) for v in row))
        self.console.print(t)

    def fields(self, pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        """``KEY  value`` lines, e.g. a summary above a table."""
        if title:
            self.console.print(title, style="bold")
        items = list(pairs)
        width = max((len(k) for k, _ in items), default=0)
        for key, value in items:
            self.console.print(f"{key.upper():<{width}}  {cell(value)}", markup=False)
        self.console.print()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False)


def status_of(value: object) -> str | None:
    """None for success, else the error in words (for per-item result rows)."""
    from confluent_kafka import KafkaError

    if isinstance(value, (BaseException, KafkaError)):
        from logstore.cli.admin import error_text

        return error_text(value)
    return None


def report(out: Output, rows: list[dict[str, Any]], columns: Sequence[str]) -> int:
    """Prints per-item results, each row with an ``error`` (None when it worked) shown as
    STATUS ``OK`` or the error; returns exit status 1 when any item failed, else 0."""

    def draw(o: Output, data: list[dict[str, Any]]) -> None:
        o.table(
            [*(c.replace("_", "-") for c in columns), "status"],
            ([*(r.get(c) for c in columns), r["error"] or "OK"] for r in data),
        )

    out.emit(rows, draw)
    return 1 if any(r["error"] for r in rows) else 0
