"""The `/schemas` and `/subjects` resources of Confluent's API (v1)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from logstore.schema_registry import errors
from logstore.schema_registry.http_util import (
    body_json,
    flag,
    id_of,
    optional_flag,
    reply,
    subject_of,
    version_of,
)
from logstore.schema_registry.records import SchemaValue
from logstore.schema_registry.registry import Registry, SchemaRequest, schema_json
from logstore.schema_registry.schemas import SCHEMA_TYPES

REGISTRY = web.AppKey("registry", Registry)


def _reg(request: web.Request) -> Registry:
    return request.app[REGISTRY]


async def root(request: web.Request) -> web.Response:
    return reply({})


async def schema_types(request: web.Request) -> web.Response:
    return reply(sorted(SCHEMA_TYPES, key=("JSON", "PROTOBUF", "AVRO").index))


async def list_schemas(request: web.Request) -> web.Response:
    state = _reg(request).state
    prefix = request.query.get("subjectPrefix", "")
    deleted, latest_only = flag(request, "deleted"), flag(request, "latestOnly")
    out = []
    for subject in state.subject_names(deleted):
        if not subject.startswith(prefix):
            continue
        versions = state.version_numbers(subject, deleted)
        for v in versions[-1:] if latest_only else versions:
            out.append(schema_json(state.get_version(subject, v, deleted)))
    return reply(out)


async def _formatted(request: web.Request, doc: dict[str, Any], sv: SchemaValue) -> dict[str, Any]:
    """`?format=`: PROTOBUF `serialized` (base64 descriptor), AVRO `resolved`."""
    fmt = request.query.get("format")
    if fmt:
        reg = _reg(request)
        doc["schema"] = await reg.off_loop(lambda: reg.parse_stored(sv).formatted(fmt))
    return doc


async def schema_by_id(request: web.Request) -> web.Response:
    sv = _reg(request).state.schema_by_id(id_of(request))
    return reply(await _formatted(request, schema_json(sv, with_subject=False), sv))


async def schema_text_by_id(request: web.Request) -> web.Response:
    sv = _reg(request).state.schema_by_id(id_of(request))
    return web.Response(text=sv.schema, content_type="application/octet-stream")


async def schema_id_versions(request: web.Request) -> web.Response:
    usages = _reg(request).state.usages(id_of(request), flag(request, "deleted"))
    return reply([{"subject": s, "version": v} for s, v in usages])


async def schema_id_subjects(request: web.Request) -> web.Response:
    usages = _reg(request).state.usages(id_of(request), flag(request, "deleted"))
    return reply(sorted({s for s, _ in usages}))


async def list_subjects(request: web.Request) -> web.Response:
    prefix = request.query.get("subjectPrefix", "")
    names = _reg(request).state.subject_names(flag(request, "deleted"))
    return reply([s for s in names if s.startswith(prefix)])


async def list_versions(request: web.Request) -> web.Response:
    state = _reg(request).state
    return reply(state.version_numbers(subject_of(request), flag(request, "deleted")))


async def register(request: web.Request) -> web.Response:
    req = SchemaRequest.from_json(body_json(request))
    schema_id = await _reg(request).register(
        subject_of(request), req, optional_flag(request, "normalize")
    )
    return reply({"id": schema_id})


async def get_version(request: web.Request) -> web.Response:
    sv = _reg(request).state.get_version(
        subject_of(request), version_of(request), flag(request, "deleted")
    )
    return reply(await _formatted(request, schema_json(sv), sv))


async def get_version_text(request: web.Request) -> web.Response:
    sv = _reg(request).state.get_version(
        subject_of(request), version_of(request), flag(request, "deleted")
    )
    return web.Response(text=sv.schema, content_type="application/octet-stream")


async def referenced_by(request: web.Request) -> web.Response:
    state = _reg(request).state
    sv = state.get_version(subject_of(request), version_of(request), True)
    return reply(state.referenced_by(sv.subject, sv.version))


async def delete_version(request: web.Request) -> web.Response:
    version = await _reg(request).delete_version(
        subject_of(request), version_of(request), flag(request, "permanent")
    )
    return reply(version)


async def lookup(request: web.Request) -> web.Response:
    reg = _reg(request)
    subject = subject_of(request)
    req = SchemaRequest.from_json(body_json(request))
    deleted = flag(request, "deleted")
    if subject not in reg.state.subject_names(deleted=True):
        raise errors.SubjectNotFoundError(f"Subject '{subject}' not found.")
    normalize = optional_flag(request, "normalize")
    norm = reg.state.normalize(subject) if normalize is None else normalize
    found = await reg.off_loop(lambda: reg.find(subject, req, norm, deleted))
    if found is None:
        raise errors.SchemaNotFoundError("Schema not found")
    return reply(schema_json(found))


async def delete_subject(request: web.Request) -> web.Response:
    versions = await _reg(request).delete_subject(subject_of(request), flag(request, "permanent"))
    return reply(versions)


def routes() -> list[web.RouteDef]:
    """Write routes are named "write:..." (the app forwards them to the primary)."""
    return [
        web.get("/", root),
        web.get("/schemas/types", schema_types),
        web.get("/schemas", list_schemas),
        web.get("/schemas/ids/{id}", schema_by_id),
        web.get("/schemas/ids/{id}/schema", schema_text_by_id),
        web.get("/schemas/ids/{id}/versions", schema_id_versions),
        web.get("/schemas/ids/{id}/subjects", schema_id_subjects),
        web.get("/subjects", list_subjects),
        web.get("/subjects/{subject}/versions", list_versions),
        web.post("/subjects/{subject}/versions", register, name="write:register"),
        web.get("/subjects/{subject}/versions/{version}", get_version),
        web.get("/subjects/{subject}/versions/{version}/schema", get_version_text),
        web.get("/subjects/{subject}/versions/{version}/referencedby", referenced_by),
        web.delete(
            "/subjects/{subject}/versions/{version}", delete_version, name="write:delete_version"
        ),
        web.post("/subjects/{subject}", lookup),
        web.delete("/subjects/{subject}", delete_subject, name="write:delete_subject"),
    ]
