"""A record's key, value or header as the console shows it. Pure.

Formats: ``text`` (UTF-8, undecodable bytes as ``\\xNN``), ``json`` (pretty-printed when
the bytes are one JSON document, else as text), ``hex`` (two digits a byte, spaced every
4 bytes) and ``auto``: JSON when it parses, text when it is printable UTF-8, hex
otherwise. Shown data is cut at :data:`SHOWN_BYTES` (the cut is marked).

A value in Confluent's wire format starts with the magic byte 0 and a 4-byte big-endian
schema id (:func:`schema_id`); the rest is the payload the registry's schema decodes.
"""

from __future__ import annotations

import json
import struct

FORMATS = ("auto", "text", "json", "hex")
SHOWN_BYTES = 16 * 1024


def schema_id(data: bytes | None) -> int | None:
    """The schema id of a value in Confluent's framing (magic byte 0 + 4-byte id)."""
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return int(struct.unpack(">I", data[1:5])[0])


def hex_text(data: bytes) -> str:
    h = data.hex()
    return " ".join(h[i : i + 8] for i in range(0, len(h), 8))


def _printable(text: str) -> bool:
    return all(c.isprintable() or c in "\n\r\t" for c in text)


def show(data: bytes | None, fmt: str = "auto") -> tuple[str, str]:
    """(the format used, the text) for ``data`` in ``fmt``; ``("null", "null")`` for a
    null key or value."""
    if data is None:
        return "null", "null"
    cut = data[:SHOWN_BYTES]
    suffix = f" … ({len(data)} bytes, {SHOWN_BYTES} shown)" if len(data) > SHOWN_BYTES else ""
    if fmt == "hex":
        return "hex", hex_text(cut) + suffix
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if fmt in ("auto", "json") and text is not None and not suffix:
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            if fmt == "json" or isinstance(doc, (dict, list)):
                return "json", json.dumps(doc, indent=2, ensure_ascii=False)
    if fmt == "auto" and (text is None or not _printable(text)):
        return "hex", hex_text(cut) + suffix
    return "text", cut.decode("utf-8", errors="backslashreplace") + suffix
