"""Decoding record values written by Confluent's serializers, through a registry's REST API
(`logstore consume --decode`).

Wire format: magic byte 0, the schema id (4 bytes, big-endian), then by schema type:
AVRO, the record in Avro's binary encoding; JSON, the JSON document; PROTOBUF, the message
indexes (a zigzag varint count, then that many zigzag varints; a lone 0 stands for [0]) and
the message in protobuf's wire format. A value without the magic byte, or whose id the
registry does not know, is left as it is. Schemas (and the schemas their references name)
are fetched once per id and cached; the result is the value as one line of JSON.
"""

from __future__ import annotations

import base64
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

Fetch = Callable[[str], dict[str, Any]]


def http_fetch(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> Fetch:
    def fetch(path: str) -> dict[str, Any]:
        req = urllib.request.Request(url.rstrip("/") + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc

    return fetch


def _zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def message_indexes(data: bytes) -> tuple[list[int], bytes]:
    count, pos = _zigzag_varint(data, 0)
    if count == 0:
        return [0], data[pos:]
    indexes = []
    for _ in range(count):
        i, pos = _zigzag_varint(data, pos)
        indexes.append(i)
    return indexes, data[pos:]


class Decoder:
    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self._decoders: dict[int, Callable[[bytes], Any]] = {}
        self._pool = descriptor_pool.DescriptorPool()
        self._files: set[str] = set()

    def decode(self, value: bytes | None) -> bytes | None:
        """The value as JSON text, or unchanged when it is not framed or not known."""
        if value is None or len(value) < 5 or value[0] != 0:
            return value
        schema_id = int.from_bytes(value[1:5], "big")
        try:
            decode = self._decoders.get(schema_id) or self._load(schema_id)
            return json.dumps(decode(value[5:]), default=str).encode()
        except Exception:  # an unknown id, or bytes that do not match the schema
            return value

    def _load(self, schema_id: int) -> Callable[[bytes], Any]:
        doc = self.fetch(f"/schemas/ids/{schema_id}?format=serialized")
        kind = doc.get("schemaType", "AVRO")
        refs = doc.get("references", [])
        decode: Callable[[bytes], Any]
        if kind == "AVRO":
            named: dict[str, Any] = {}
            self._avro_refs(refs, named)
            parsed = fastavro.parse_schema(json.loads(doc["schema"]), named_schemas=named)

            def decode(payload: bytes) -> Any:
                return fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)

        elif kind == "JSON":

            def decode(payload: bytes) -> Any:
                return json.loads(payload)

        else:
            file = self._add_proto(doc["schema"], refs)

            def decode(payload: bytes) -> Any:
                indexes, body = message_indexes(payload)
                desc = file.message_types_by_name[list(file.message_types_by_name)[indexes[0]]]
                for i in indexes[1:]:
                    desc = desc.nested_types[i]
                msg = message_factory.GetMessageClass(desc)()
                msg.ParseFromString(body)
                return json_format.MessageToDict(msg)

        self._decoders[schema_id] = decode
        return decode

    def _ref_doc(self, ref: dict[str, Any], fmt: str = "") -> dict[str, Any]:
        subject = urllib.parse.quote(str(ref["subject"]), safe="")
        query = f"?format={fmt}" if fmt else ""
        return self.fetch(f"/subjects/{subject}/versions/{ref['version']}{query}")

    def _avro_refs(self, refs: list[dict[str, Any]], named: dict[str, Any]) -> None:
        for ref in refs:
            doc = self._ref_doc(ref)
            self._avro_refs(doc.get("references", []), named)
            fastavro.parse_schema(json.loads(doc["schema"]), named_schemas=named)

    def _add_proto(self, serialized: str, refs: list[dict[str, Any]]) -> Any:
        for ref in refs:
            if ref["name"] in self._files:
                continue
            doc = self._ref_doc(ref, "serialized")
            self._add_proto(doc["schema"], doc.get("references", []))
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
        if proto.name not in self._files:
            self._pool.Add(proto)
            self._files.add(proto.name)
        return self._pool.FindFileByName(proto.name)
