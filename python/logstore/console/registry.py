"""Values framed with a schema id, decoded through a schema registry's REST API
(Confluent's: ``GET /schemas/ids/{id}`` answers ``{"schema": ..., "schemaType": ...}``,
``schemaType`` absent meaning AVRO).

After the 5-byte frame (:func:`logstore.console.render.schema_id`) the payload is, by
schema type: AVRO, the record in Avro's binary encoding (decoded with fastavro);
JSON, a JSON document; PROTOBUF, the message indexes (a zigzag varint count, then that
many zigzag varints; a single 0 byte stands for ``[0]``) and the message in protobuf's
wire format, shown field number by field number (:func:`protobuf_fields`: the console
holds no compiled ``.proto``). Schemas are cached by id (ids never change meaning).
"""

from __future__ import annotations

import io
import json
from typing import Any

import aiohttp
import fastavro

CACHE_SIZE = 512
MAX_DEPTH = 8


class Registry:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._schemas: dict[int, tuple[str, str]] = {}
        self._parsed: dict[int, Any] = {}

    async def schema(self, session: aiohttp.ClientSession, sid: int) -> tuple[str, str]:
        """(schema type, schema text) of id ``sid``; ValueError naming what failed."""
        if sid in self._schemas:
            return self._schemas[sid]
        url = f"{self.url}/schemas/ids/{sid}"
        try:
            async with session.get(url, timeout=self.timeout) as response:
                body = await response.json(content_type=None)
                if response.status != 200:
                    message = body.get("message") if isinstance(body, dict) else body
                    raise ValueError(f"registry: schema {sid}: {response.status} {message}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ValueError(f"registry {self.url}: {type(exc).__name__}: {exc}") from None
        found = (str(body.get("schemaType") or "AVRO").upper(), str(body["schema"]))
        if len(self._schemas) >= CACHE_SIZE:
            self._schemas.clear()
            self._parsed.clear()
        self._schemas[sid] = found
        return found

    async def decode(self, session: aiohttp.ClientSession, sid: int, data: bytes) -> str:
        """The framed value ``data`` decoded, as pretty JSON; ValueError when it cannot be."""
        kind, text = await self.schema(session, sid)
        payload = data[5:]
        try:
            if kind == "AVRO":
                if sid not in self._parsed:
                    self._parsed[sid] = fastavro.parse_schema(json.loads(text))
                doc = fastavro.schemaless_reader(io.BytesIO(payload), self._parsed[sid], None)
            elif kind == "JSON":
                doc = json.loads(payload)
            elif kind == "PROTOBUF":
                indexes, rest = message_indexes(payload)
                doc = {"message_indexes": indexes, "fields": protobuf_fields(rest)}
            else:
                raise ValueError(f"schema type {kind} is not one the console decodes")
        except (ValueError, EOFError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"{kind} schema {sid}: cannot decode: {exc}") from None
        return json.dumps(doc, indent=2, default=str, ensure_ascii=False)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def message_indexes(data: bytes) -> tuple[list[int], bytes]:
    count, pos = _varint(data, 0)
    count = _zigzag(count)
    if count == 0:
        return [0], data[pos:]
    if count < 0 or count > 64:
        raise ValueError(f"bad message index count {count}")
    out = []
    for _ in range(count):
        v, pos = _varint(data, pos)
        out.append(_zigzag(v))
    return out, data[pos:]


def protobuf_fields(data: bytes, depth: int = 0) -> dict[str, list[Any]]:
    """Protobuf wire format as ``{"field number": [values]}``: varints as integers,
    fixed64/fixed32 as unsigned integers, length-delimited as a nested message when it
    parses as one, else UTF-8 text, else hex."""
    out: dict[str, list[Any]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        elif wire == 2:
            size, pos = _varint(data, pos)
            chunk = data[pos : pos + size]
            if len(chunk) != size:
                raise ValueError("truncated field")
            pos += size
            value = _nested(chunk, depth)
        else:
            raise ValueError(f"wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated field")
        out.setdefault(str(number), []).append(value)
    return out


def _nested(chunk: bytes, depth: int) -> Any:
    try:
        text = chunk.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    if depth < MAX_DEPTH:
        try:
            return protobuf_fields(chunk, depth + 1)
        except ValueError:
            pass
    return chunk.hex()
