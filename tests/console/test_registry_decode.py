"""Decoding values framed with a schema id (magic byte 0, 4-byte id) through a schema
registry's REST API, ``GET /schemas/ids/{id}``. The registry here is an aiohttp server
in the test answering that one route as Confluent's registry does (the body of
docs.confluent.io's API reference), over real HTTP; AVRO payloads are written with
fastavro as Confluent's serializers write them."""

from __future__ import annotations

import asyncio
import io
import json
import struct

import aiohttp
import fastavro
import pytest
from aiohttp import web

from logstore.console.registry import Registry

AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
SCHEMAS = {
    1: {"schema": json.dumps(AVRO)},  # no schemaType: AVRO
    2: {"schemaType": "JSON", "schema": '{"type": "object"}'},
    3: {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message M { int64 id = 1; }'},
}


def framed(sid: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", sid) + payload


async def _decode_all() -> list[str]:
    asked: list[str] = []

    async def by_id(request: web.Request) -> web.Response:
        asked.append(request.match_info["id"])
        sid = int(request.match_info["id"])
        if sid not in SCHEMAS:
            return web.json_response(
                {"error_code": 40403, "message": "Schema not found"}, status=404
            )
        return web.json_response(SCHEMAS[sid])

    app = web.Application()
    app.router.add_get("/schemas/ids/{id}", by_id)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    registry = Registry(f"http://127.0.0.1:{port}/")
    avro = io.BytesIO()
    fastavro.schemaless_writer(avro, fastavro.parse_schema(AVRO), {"id": 7, "item": "tea"})
    out = []
    try:
        async with aiohttp.ClientSession() as session:
            out.append(await registry.decode(session, 1, framed(1, avro.getvalue())))
            out.append(await registry.decode(session, 1, framed(1, avro.getvalue())))
            out.append(await registry.decode(session, 2, framed(2, b'{"a": 1}')))
            out.append(await registry.decode(session, 3, framed(3, b"\x00\x08\x2a")))
            for sid, payload in ((9, b"x"), (1, b"\xff")):
                with pytest.raises(ValueError) as exc:
                    await registry.decode(session, sid, framed(sid, payload))
                out.append(str(exc.value))
    finally:
        await runner.cleanup()
    out.append(",".join(asked))
    return out


def test_decode_avro_json_protobuf_and_errors():
    avro, cached, doc, proto, missing, bad, asked = asyncio.run(_decode_all())
    assert json.loads(avro) == {"id": 7, "item": "tea"} and cached == avro
    assert json.loads(doc) == {"a": 1}
    assert json.loads(proto) == {"message_indexes": [0], "fields": {"1": [42]}}
    assert "schema 9: 404 Schema not found" in missing
    assert bad.startswith("AVRO schema 1: cannot decode")
    assert asked == "1,2,3,9"  # schema 1 fetched once
