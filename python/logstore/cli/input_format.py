"""``logstore produce -f/--input-format``: how the input splits into records, and a
record into its fields, with rpk's ``rpk topic produce -f`` escapes (delimiters only,
no sizes or modifiers).

Format text:

- ``%v`` the value (exactly one), ``%k`` the key, ``%t`` the topic (wins over the
  TOPIC argument), ``%p`` the partition (digits; wins over ``-p``), ``%h`` headers
  written ``K=V,K=V`` (as ``consume -f '%h'`` prints them; added to ``-H``'s); each
  at most once;
- ``%%``, ``%{``, ``%}``: a literal ``%``, ``{``, ``}``;
- ``\\n``, ``\\r``, ``\\t``, ``\\0``, ``\\\\``, ``\\xNN``: newline, carriage return,
  tab, NUL, backslash, the byte NN;
- anything else is literal text that must appear in the input as written.

Text after the last ``%`` field is the record delimiter (``'%k:%v\\n'``: records end at
a newline, a key ends at the first ``:``). A format that ends with a field (``%k:%v``)
takes the delimiter from ``--delimiter`` (default newline). Two fields need text
between them, which is how the first one ends.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

from logstore.cli.common import EXIT_FAILED, EXIT_USAGE, CliError

FIELDS = {"k": "key", "v": "value", "t": "topic", "p": "partition", "h": "headers"}
# %%, %{ and %} as escapes, so that unescape() keeps them literal.
_LITERAL_PERCENT = {"%": "\\x25", "{": "\\x7b", "}": "\\x7d"}
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\"}


def shown(spec: str) -> str:
    """A format as the user typed it in a shell (quoted once, backslashes as typed)."""
    return shlex.quote(spec)


def unescape(text: str, what: str) -> bytes:
    """``text`` with the backslash escapes above turned into bytes (CliError naming
    ``what`` for an unknown escape)."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt]
            i += 2
        elif nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            raise CliError(
                f"{what}: unknown escape \\{nxt} (known: \\n \\r \\t \\0 \\\\ \\xNN)", EXIT_USAGE
            )
    return bytes(out)


@dataclasses.dataclass
class Fields:
    """One input record's parts (None: not in the format)."""

    value: bytes
    key: bytes | None = None
    topic: str | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)


class InputFormat:
    """A parsed ``--input-format``: the record delimiter (None: not in the format) and
    a regular expression over one record."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        what = f"--input-format {shown(spec)}"
        parts: list[tuple[str, bytes]] = []  # ("lit", text) or ("field", name)
        literal = ""
        i = 0
        while i < len(spec):
            c = spec[i]
            if c != "%":
                literal += c
                i += 1
                continue
            token = spec[i + 1 : i + 2]
            if token in _LITERAL_PERCENT:
                literal += _LITERAL_PERCENT[token]
            elif token in FIELDS:
                parts.append(("lit", unescape(literal, what)))
                literal = ""
                parts.append(("field", token.encode()))
            else:
                raise CliError(
                    f"{what}: unknown field %{token} (known: %k %v %t %p %h, %% for a %)",
                    EXIT_USAGE,
                )
            i += 2
        parts.append(("lit", unescape(literal, what)))
        parts = [p for p in parts if p != ("lit", b"")]

        fields = [p[1].decode() for p in parts if p[0] == "field"]
        if fields.count("v") != 1:
            raise CliError(f"{what}: needs exactly one %v", EXIT_USAGE)
        for name in FIELDS:
            if fields.count(name) > 1:
                raise CliError(f"{what}: %{name} appears more than once", EXIT_USAGE)
        for a, b in zip(parts, parts[1:]):
            if a[0] == "field" and b[0] == "field":
                raise CliError(
                    f"{what}: %{a[1].decode()} and %{b[1].decode()} need text between them "
                    "(where the first one ends)",
                    EXIT_USAGE,
                )
        self.delimiter: bytes | None = None
        if parts[-1][0] == "lit":
            self.delimiter = parts.pop()[1]
        pattern = b""
        for kind, text in parts:
            if kind == "lit":
                pattern += re.escape(text)
            elif text == b"p":
                pattern += rb"(?P<p>\d+)"
            else:
                pattern += b"(?P<" + text + b">.*?)"
        self.regex = re.compile(pattern, re.DOTALL)
        self.fields = set(fields)

    def parse(self, record: bytes, number: int) -> Fields:
        """The fields of input record ``number`` (from 1); CliError (exit 1) when it
        does not match."""
        m = self.regex.fullmatch(record)
        if m is None:
            text = record[:60].decode("utf-8", errors="backslashreplace")
            raise CliError(
                f"input record {number} ({text!r}) does not match --input-format "
                f"{shown(self.spec)}",
                EXIT_FAILED,
            )
        out = Fields(value=m["v"])
        if "k" in self.fields:
            out.key = m["k"]
        if "t" in self.fields:
            out.topic = m["t"].decode("utf-8", errors="surrogateescape")
            if not out.topic:
                raise CliError(f"input record {number}: empty topic (%t)", EXIT_FAILED)
        if "p" in self.fields:
            out.partition = int(m["p"])
        if "h" in self.fields and m["h"]:
            for pair in m["h"].split(b","):
                k, sep, v = pair.partition(b"=")
                if not sep or not k:
                    raise CliError(
                        f"input record {number}: header {pair!r} is not KEY=VALUE (%h)",
                        EXIT_FAILED,
                    )
                out.headers.append((k.decode("utf-8", errors="surrogateescape"), v))
        return out
