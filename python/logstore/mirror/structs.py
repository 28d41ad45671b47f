"""The byte layout of Kafka's ``org.apache.kafka.common.protocol.types.Schema`` structs,
which MirrorMaker 2's internal records use: fields back to back, no tags, no lengths
around the struct. ``INT16``/``INT32``/``INT64``: big-endian two's complement. ``STRING``:
an INT16 byte length, then that many bytes of UTF-8 (never null).

:class:`Reader` raises :class:`FormatError` on truncated input or bad UTF-8.
"""

from __future__ import annotations

import struct


class FormatError(ValueError):
    """A record that does not parse as the struct it should hold."""


def int16(v: int) -> bytes:
    return struct.pack(">h", v)


def int32(v: int) -> bytes:
    return struct.pack(">i", v)


def int64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str) -> bytes:
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise FormatError(f"string of {len(data)} bytes does not fit an INT16 length")
    return struct.pack(">h", len(data)) + data


class Reader:
    """Reads fields in order from ``data``; :meth:`end` checks nothing is left over."""

    def __init__(self, data: bytes | None) -> None:
        if data is None:
            raise FormatError("null where a struct was expected")
        self._data = data
        self._pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise FormatError(f"truncated struct: need {n} bytes at {self._pos}")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise FormatError("null string in a STRING field")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"string is not UTF-8: {exc}") from None

    def end(self) -> None:
        """Kafka's ``Schema.read`` ignores trailing bytes; so does this (a newer
        version may append fields)."""
