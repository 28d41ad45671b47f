"""What every page handler shares: the console's state on the application, template
rendering, and the guards on actions that change something.

A form that changes something (produce, reset offsets, delete) is a POST carrying the
console's form token (one random token per console process, in every form it renders),
so another site's page cannot make the browser post one; it is refused with 403 unless
the console runs with ``--allow-writes``.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from typing import Any

import aiohttp
import jinja2
from aiohttp import web

from logstore.console.history import History
from logstore.console.kafka import Kafka
from logstore.console.registry import Registry
from logstore.console.settings import Settings


@dataclasses.dataclass
class State:
    settings: Settings
    kafka: Kafka
    history: History
    templates: jinja2.Environment
    registry: Registry | None = None
    session: aiohttp.ClientSession | None = None
    token: str = dataclasses.field(default_factory=lambda: secrets.token_urlsafe(24))


STATE = web.AppKey("state", State)


def state(request: web.Request) -> State:
    return request.app[STATE]


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    st = state(request)
    page = st.templates.get_template(template).render(
        writes=st.settings.allow_writes,
        token=st.token,
        registry=st.settings.registry,
        path=request.path,
        **context,
    )
    return web.Response(text=page, status=status, content_type="text/html")


def error_page(request: web.Request, status: int, title: str, message: str) -> web.Response:
    return render(request, "error.html", status=status, title=title, message=message)


def refuse(request: web.Request, title: str, message: str) -> web.HTTPForbidden:
    """The 403 page, to raise."""
    page = error_page(request, 403, title, message)
    return web.HTTPForbidden(text=page.text, content_type="text/html")


async def write_form(request: web.Request, what: str) -> Any:
    """The POSTed form of an action that changes something; raises the 403 page when
    writes are off or the form token is missing or wrong."""
    form = await request.post()
    st = state(request)
    if not hmac.compare_digest(str(form.get("token", "")), st.token):
        raise refuse(request, "Refused", "The form is stale or from another site.")
    if not st.settings.allow_writes:
        raise refuse(
            request,
            "Writes are off",
            f"{what} changes the cluster: start the console with --allow-writes to allow it.",
        )
    return form


async def read_form(request: web.Request) -> Any:
    """A POSTed form that changes nothing (a preview): checked for the form token only."""
    form = await request.post()
    if not hmac.compare_digest(str(form.get("token", "")), state(request).token):
        raise refuse(request, "Refused", "The form is stale or from another site.")
    return form
