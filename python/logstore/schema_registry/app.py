"""The aiohttp application: routes, and the middleware every request passes through, in order:
metrics and error rendering (the only place an error becomes a response: Confluent's
`{"error_code", "message"}` body, its status, Confluent's content type), authentication,
the bounded body read, waiting for the first read of `_schemas`, and forwarding writes to the
primary.

A body over `max_body` bytes is refused with 413 from its Content-Length before any of it is
read, or as soon as a chunked body passes the limit; a body not received within
`body_timeout_s` ends the request (a slow client holds only its own connection).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from logstore.schema_registry import errors, handlers_config, handlers_schemas
from logstore.schema_registry.auth import BasicAuthenticator
from logstore.schema_registry.forwarding import Forwarder
from logstore.schema_registry.handlers_schemas import REGISTRY
from logstore.schema_registry.http_util import error_reply
from logstore.schema_registry.metrics import RegistryMetrics
from logstore.schema_registry.registry import Registry

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 16 * 1024 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise errors.RequestTooLargeError(
            f"Request body of {length} bytes is over the limit of {limit} bytes"
        )

    async def read() -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise errors.RequestTooLargeError(
                    f"Request body is over the limit of {limit} bytes"
                )
            chunks.append(chunk)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except TimeoutError:
        raise errors.OperationTimeoutError("The request body was not received in time") from None


def make_app(
    registry: Registry,
    *,
    forwarder: Forwarder | None = None,
    authenticator: BasicAuthenticator | None = None,
    metrics: RegistryMetrics | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    body_timeout_s: float = 30.0,
    ready_timeout_s: float = 60.0,
) -> web.Application:
    forward = forwarder or Forwarder()

    @web.middleware
    async def outer(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.match_info.route
        endpoint = route.resource.canonical if route.resource is not None else "unmatched"
        try:
            response = await handler(request)
        except errors.SchemaRegistryError as err:
            response = error_reply(err)
            if err.status == 413:
                response.force_close()
        except web.HTTPException as exc:
            code = exc.status
            response = error_reply(_http_error(code, exc.reason))
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            response = error_reply(errors.StoreError("Internal Server Error"))
        if metrics is not None:
            metrics.observe(
                endpoint, request.method, response.status, time.perf_counter() - started
            )
        return response

    @web.middleware
    async def inner(request: web.Request, handler: Handler) -> web.StreamResponse:
        if authenticator is not None:
            authenticator.authenticate(request.headers.get("Authorization"))
        request["body"] = await _read_body(request, max_body, body_timeout_s)
        if not registry.ready.is_set():
            try:
                await asyncio.wait_for(registry.ready.wait(), ready_timeout_s)
            except TimeoutError:
                raise errors.OperationTimeoutError(
                    "The registry has not finished reading _schemas"
                ) from None
        name = request.match_info.route.name or ""
        if name.startswith("write:") and not registry.is_primary:
            return await forward.forward(registry.primary_url, request, request["body"])
        return await handler(request)

    app = web.Application(middlewares=[outer, inner], client_max_size=max_body)
    app[REGISTRY] = registry
    app.add_routes(handlers_schemas.routes())
    app.add_routes(handlers_config.routes())

    async def close_forwarder(_: web.Application) -> None:
        await forward.close()

    app.on_cleanup.append(close_forwarder)
    return app


def _http_error(status: int, reason: str) -> errors.SchemaRegistryError:
    err = errors.SchemaRegistryError(reason)
    err.status = err.error_code = status
    return err
