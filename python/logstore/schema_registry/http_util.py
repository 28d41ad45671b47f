"""What every handler shares: Confluent's content type, JSON bodies and query flags, version
and id path segments."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from logstore.schema_registry import errors

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
BODY_KEY = web.AppKey("body", bytes)
INT32_MAX = 2**31 - 1


def reply(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(),
        content_type=CONTENT_TYPE,
    )


def error_reply(err: errors.SchemaRegistryError) -> web.Response:
    return reply(err.body(), err.status)


def body_json(request: web.Request) -> Any:
    raw: bytes = request["body"]
    if not raw.strip():
        raise errors.UnprocessableEntityError("The request body is empty")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.BadRequestError(f"Malformed JSON: {exc}") from None


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def optional_flag(request: web.Request, name: str) -> bool | None:
    if name not in request.query:
        return None
    return flag(request, name)


def subject_of(request: web.Request) -> str:
    return request.match_info["subject"]


def version_of(request: web.Request) -> int | str:
    raw = request.match_info["version"]
    if raw == "latest":
        return "latest"
    try:
        v = int(raw)
    except ValueError:
        v = 0
    if v == -1:
        return "latest"
    if not 1 <= v <= INT32_MAX:
        raise errors.InvalidVersionError(
            f"The specified version '{raw}' is not valid. Valid values are between "
            f'[1, 2^31-1] and the string "latest"'
        )
    return v


def id_of(request: web.Request) -> int:
    raw = request.match_info["id"]
    try:
        v = int(raw)
    except ValueError:
        raise errors.SchemaNotFoundError(f"Schema {raw} not found") from None
    return v
