"""Where to start reading, seek a group or trim a partition: the ``-o``/``--to`` argument.

Forms (rpk's and kcat's):

- ``start`` (also ``beginning``, ``earliest``): the log start offset;
- ``end`` (also ``latest``): the high watermark, where the next record will land;
- ``N``: the absolute offset N; ``-N``: N records before the end;
- ``@T``: the first record whose timestamp is at or after T, where T is milliseconds
  since the epoch, an ISO-8601 time (``2024-05-01T12:00:00Z``; no zone means UTC), or a
  duration back from now (``@-15m``, ``@-2h``, ``@-1d``, ``@-30s``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time

from logstore.cli.common import CliError

_DURATION = re.compile(r"^-(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclasses.dataclass(frozen=True)
class Position:
    """``kind`` is ``start``, ``end``, ``offset``, ``from_end`` or ``timestamp``;
    ``value`` the offset, the count back from the end, or the timestamp in ms."""

    kind: str
    value: int = 0

    def describe(self) -> str:
        return {
            "start": "start",
            "end": "end",
            "offset": f"offset {self.value}",
            "from_end": f"{self.value} before the end",
            "timestamp": f"timestamp {self.value}",
        }[self.kind]


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """Milliseconds since the epoch from ``ms``, ISO-8601 or ``-DURATION``."""
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    m = _DURATION.match(text)
    if m:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - int(float(m[1]) * _UNIT_MS[m[2]])
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            f"{text!r}: expected a timestamp in ms, an ISO-8601 time or a duration like -15m"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def parse_position(text: str, option: str = "-o") -> Position:
    """The position ``text`` names; CliError naming ``option`` when it names none."""
    t = text.strip().lower()
    if t in ("start", "beginning", "earliest", "oldest"):
        return Position("start")
    if t in ("end", "latest", "newest"):
        return Position("end")
    if t.startswith("@"):
        try:
            return Position("timestamp", parse_timestamp(text.strip()[1:]))
        except CliError as exc:
            raise CliError(f"{option} {exc}") from None
    if re.fullmatch(r"-\d+", t):
        return Position("from_end", int(t[1:]))
    if re.fullmatch(r"\+?\d+", t):
        return Position("offset", int(t))
    raise CliError(
        f"{option} {text!r}: expected start, end, an offset, -N (N before the end) or @timestamp"
    )


def resolve(position: Position, start: int, end: int, at_time: int | None = None) -> int:
    """The offset ``position`` names in a partition holding [start, end): clamped to
    that range, as Kafka's offset reset clamps. ``at_time`` is the ListOffsets answer
    for a timestamp (-1 when no record is that recent: the end)."""
    if position.kind == "start":
        return start
    if position.kind == "end":
        return end
    if position.kind == "from_end":
        return max(start, end - position.value)
    if position.kind == "timestamp":
        return end if at_time is None or at_time < 0 else min(max(at_time, start), end)
    return min(max(position.value, start), end)
