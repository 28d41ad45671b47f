"""Forwarding a write to the primary: the same method, path, query, body, content type and
Authorization header; the primary's status, body and content type come back unchanged.

No primary known answers 50004; a primary that cannot be reached (or answers nothing within
the timeout) answers 50003.
"""

from __future__ import annotations

import ssl

import aiohttp
from aiohttp import web

from logstore.schema_registry import errors

_PASS_HEADERS = ("Content-Type", "Accept", "Authorization")
# set on a forwarded request, so a primary that lost its role does not forward it again
FORWARDED = "X-Logstore-Forwarded"


class Forwarder:
    def __init__(self, timeout_s: float = 30.0, tls: ssl.SSLContext | None = None) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.tls = tls
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(
        self, primary_url: str | None, request: web.Request, body: bytes
    ) -> web.Response:
        if request.headers.get(FORWARDED):
            raise errors.UnknownLeaderError(
                "Forwarded request reached an instance that is not the primary"
            )
        if not primary_url:
            raise errors.UnknownLeaderError(
                "Unknown primary: no schema registry instance is primary"
            )
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        headers = {h: request.headers[h] for h in _PASS_HEADERS if h in request.headers}
        headers[FORWARDED] = "1"
        url = primary_url.rstrip("/") + request.rel_url.path_qs
        try:
            async with self._session.request(
                request.method, url, data=body, headers=headers, ssl=self.tls or True
            ) as resp:
                payload = await resp.read()
                return web.Response(
                    status=resp.status,
                    body=payload,
                    headers={"Content-Type": resp.headers.get("Content-Type", "application/json")},
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.RequestForwardingFailedError(
                f"Error while forwarding the request to the primary {primary_url}: {exc}"
            ) from None
