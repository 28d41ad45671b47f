"""The console's aiohttp application: :func:`make_app` wires the pages, the static
files, authentication, the error pages and the sampler; :func:`serve` runs it.

Authentication: with users (``--basic-auth``) every request, static files included,
needs HTTP basic credentials matching one of them (401 with a ``WWW-Authenticate``
challenge otherwise); without, the console only listens on loopback
(:mod:`logstore.console.settings`). A broker error becomes a 502 page naming the
Kafka error; a bad form value the page's own message.

The sampler records :meth:`Kafka.sample` into the history every ``sample_interval``
seconds while the console runs; a failed sample is skipped.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import jinja2
from aiohttp import web

from logstore.cli.common import CliError
from logstore.cli.connection import ClientOptions
from logstore.console import groups, overview, records, security, topics
from logstore.console.charts import human
from logstore.console.history import History
from logstore.console.kafka import Kafka
from logstore.console.registry import Registry
from logstore.console.settings import Settings
from logstore.console.web import STATE, State, error_page

HERE = Path(__file__).parent
log = logging.getLogger("logstore.console")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _authorized(header: str | None, users: tuple[tuple[str, str], ...]) -> bool:
    if not header or not header.startswith("Basic "):
        return False
    try:
        given = base64.b64decode(header[6:], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    name, _, password = given.partition(":")
    ok = False
    for u, p in users:
        # compare every entry, so the time taken says nothing about which matched
        ok |= hmac.compare_digest(name.encode(), u.encode()) & hmac.compare_digest(
            password.encode(), p.encode()
        )
    return ok


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    users = request.app[STATE].settings.users
    if users and not _authorized(request.headers.get("Authorization"), users):
        return web.Response(
            status=401,
            text="authentication required",
            headers={"WWW-Authenticate": 'Basic realm="logstore console", charset="UTF-8"'},
        )
    return await handler(request)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except CliError as exc:
        return error_page(request, 502, "The cluster refused", str(exc))
    except Exception as exc:
        log.exception("%s %s", request.method, request.path)
        return error_page(request, 500, "Console error", f"{type(exc).__name__}: {exc}")


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["human"] = lambda v: "-" if v is None else human(float(v))
    # a name as one URL path segment ("/" in a group id too: jinja's urlencode keeps it)
    env.filters["segment"] = lambda v: urllib.parse.quote(str(v), safe="")
    return env


async def _sampler(state: State) -> None:
    while True:
        try:
            values = await state.kafka.run(state.kafka.sample)
            state.history.record(time.monotonic(), values)
        except Exception as exc:
            log.debug("sample skipped: %s", exc)
        await asyncio.sleep(state.settings.sample_interval)


def make_app(options: ClientOptions, settings: Settings) -> web.Application:
    app = web.Application(middlewares=[_auth, _errors])
    state = State(
        settings=settings,
        kafka=Kafka(options),
        history=History(),
        templates=templates(),
        registry=Registry(settings.registry) if settings.registry else None,
    )
    app[STATE] = state

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        state.session = aiohttp.ClientSession()
        task = asyncio.create_task(_sampler(state))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await state.session.close()
        state.kafka.close()

    app.cleanup_ctx.append(lifecycle)
    for module in (overview, topics, records, groups, security):
        module.routes(app)
    app.router.add_static("/static", HERE / "static")
    return app


async def serve(options: ClientOptions, settings: Settings) -> None:
    """Serves until cancelled; prints the URL once listening."""
    runner = web.AppRunner(make_app(options, settings), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        print(f"logstore console: serving http://{host}:{settings.port}/", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
