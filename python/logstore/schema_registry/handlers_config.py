"""The `/config`, `/mode` and `/compatibility` resources of Confluent's API (v1)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from logstore.schema_registry import errors
from logstore.schema_registry.handlers_schemas import REGISTRY
from logstore.schema_registry.http_util import (
    body_json,
    flag,
    optional_flag,
    reply,
    subject_of,
    version_of,
)
from logstore.schema_registry.registry import Registry, SchemaRequest


def _reg(request: web.Request) -> Registry:
    return request.app[REGISTRY]


def _subject(request: web.Request) -> str | None:
    return request.match_info.get("subject")


def _config_json(reg: Registry, subject: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"compatibilityLevel": reg.state.compatibility(subject)}
    cfg = reg.state.configs.get(subject)
    if cfg is None and subject is not None:
        cfg = reg.state.configs.get(None)
    if cfg is not None and cfg.normalize is not None:
        doc["normalize"] = cfg.normalize
    return doc


async def get_config(request: web.Request) -> web.Response:
    reg, subject = _reg(request), _subject(request)
    if subject is not None and subject not in reg.state.configs:
        if not flag(request, "defaultToGlobal"):
            raise errors.SubjectCompatibilityNotConfiguredError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )
    return reply(_config_json(reg, subject))


async def put_config(request: web.Request) -> web.Response:
    doc = body_json(request)
    if not isinstance(doc, dict):
        raise errors.UnprocessableEntityError("The request body is not a JSON object")
    level = doc.get("compatibility", doc.get("compatibilityLevel"))
    normalize = doc.get("normalize")
    if not isinstance(level, str):
        raise errors.InvalidCompatibilityLevelError(
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive"
        )
    level = level.upper()
    norm = normalize if isinstance(normalize, bool) else None
    await _reg(request).set_config(_subject(request), level, norm)
    out: dict[str, Any] = {"compatibility": level}
    if norm is not None:
        out["normalize"] = norm
    return reply(out)


async def delete_config(request: web.Request) -> web.Response:
    old = await _reg(request).delete_config(_subject(request))
    return reply({"compatibilityLevel": old})


async def get_mode(request: web.Request) -> web.Response:
    reg, subject = _reg(request), _subject(request)
    if subject is not None and subject not in reg.state.modes:
        if not flag(request, "defaultToGlobal"):
            raise errors.SubjectModeNotConfiguredError(
                f"Subject '{subject}' does not have subject-level mode configured"
            )
    return reply({"mode": reg.state.mode(subject)})


async def put_mode(request: web.Request) -> web.Response:
    doc = body_json(request)
    mode = doc.get("mode") if isinstance(doc, dict) else None
    if not isinstance(mode, str):
        raise errors.InvalidModeError(
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT"
        )
    await _reg(request).set_mode(_subject(request), mode.upper(), flag(request, "force"))
    return reply({"mode": mode.upper()})


async def delete_mode(request: web.Request) -> web.Response:
    subject = _subject(request)
    assert subject is not None
    old = await _reg(request).delete_mode(subject)
    return reply({"mode": old})


async def compatibility(request: web.Request) -> web.Response:
    reg = _reg(request)
    subject = subject_of(request)
    req = SchemaRequest.from_json(body_json(request))
    normalize = optional_flag(request, "normalize")
    norm = reg.state.normalize(subject) if normalize is None else normalize
    new = await reg.off_loop(lambda: reg.parse(req, norm))
    level = reg.state.compatibility(subject)
    if "version" in request.match_info:
        version = version_of(request)
        try:
            against = [reg.state.get_version(subject, version)]
        except errors.SubjectNotFoundError:
            if version != "latest":
                raise
            against = []
    else:
        against = reg.live_versions_newest_first(subject)
        if not level.endswith("_TRANSITIVE"):
            # every version is checked, one at a time, at the subject's level
            def one_at_a_time() -> list[str]:
                for sv in against:
                    messages = reg.compatibility_messages(subject, new, [sv], level)
                    if messages:
                        return messages
                return []

            return _compat_reply(request, await reg.off_loop(one_at_a_time))
    messages = await reg.off_loop(lambda: reg.compatibility_messages(subject, new, against, level))
    return _compat_reply(request, messages)


def _compat_reply(request: web.Request, messages: list[str]) -> web.Response:
    out: dict[str, Any] = {"is_compatible": not messages}
    if flag(request, "verbose"):
        out["messages"] = messages
    return reply(out)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/config", get_config),
        web.put("/config", put_config, name="write:put_config"),
        web.delete("/config", delete_config, name="write:delete_config"),
        web.get("/config/{subject}", get_config),
        web.put("/config/{subject}", put_config, name="write:put_subject_config"),
        web.delete("/config/{subject}", delete_config, name="write:delete_subject_config"),
        web.get("/mode", get_mode),
        web.put("/mode", put_mode, name="write:put_mode"),
        web.get("/mode/{subject}", get_mode),
        web.put("/mode/{subject}", put_mode, name="write:put_subject_mode"),
        web.delete("/mode/{subject}", delete_mode, name="write:delete_subject_mode"),
        web.post("/compatibility/subjects/{subject}/versions/{version}", compatibility),
        web.post("/compatibility/subjects/{subject}/versions", compatibility),
    ]
