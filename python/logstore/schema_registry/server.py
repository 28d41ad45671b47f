"""One running registry instance: the `_schemas` store, the primary election, the HTTP
listener. The broker embeds it (broker_py/server/schema_registry_service.py) and
`logstore schema-registry` runs it alone; both build a `RegistryServer` and await `start()`.

Start order: the HTTP listener first (requests wait for the first read of `_schemas` to end,
up to the app's ready timeout), then the store's catch-up, then the election, so an
instance never takes writes before it has read `_schemas` to its end; a new primary reads it to
its end again before its first write (every write does).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client import CollectorRegistry

from logstore.schema_registry.app import DEFAULT_MAX_BODY, make_app
from logstore.schema_registry.auth import BasicAuthenticator
from logstore.schema_registry.election import GroupElector
from logstore.schema_registry.election_protocol import DEFAULT_GROUP, Identity
from logstore.schema_registry.election_sasl import SaslCredentials
from logstore.schema_registry.forwarding import Forwarder
from logstore.schema_registry.metrics import RegistryMetrics
from logstore.schema_registry.registry import Registry
from logstore.schema_registry.store import TOPIC, KafkaStore

log = logging.getLogger(__name__)


class ListenerError(ValueError):
    """A listener URL that is not http://HOST:PORT or https://HOST:PORT."""


def parse_listener(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of `http://HOST:PORT` or `https://HOST:PORT`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ListenerError(f"{url!r}: the scheme must be http or https")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or not parts.hostname and parts.hostname != "":
        raise ListenerError(f"{url!r}: expected {parts.scheme}://HOST:PORT")
    if parts.path not in ("", "/"):
        raise ListenerError(f"{url!r}: a listener has no path")
    return parts.scheme, parts.hostname or "", port


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        for prefix in ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://"):
            if item.upper().startswith(prefix):
                item = item[len(prefix) :]
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port)))
    return out


@dataclass
class RegistryConfig:
    listener: str  # http://HOST:PORT or https://HOST:PORT
    client_config: dict[str, Any]  # confluent-kafka config: bootstrap.servers, security.*
    advertised_host: str | None = None
    group: str = DEFAULT_GROUP
    topic: str = TOPIC
    replication_factor: int | None = None  # None: min(3, live brokers)
    eligible: bool = True
    server_tls: ssl.SSLContext | None = None  # required for https://
    kafka_tls: ssl.SSLContext | None = None  # the election client's, for an SSL cluster
    forward_tls: ssl.SSLContext | None = None  # to reach an https:// primary
    authenticator: BasicAuthenticator | None = None
    metrics_registry: CollectorRegistry | None = None
    max_body: int = DEFAULT_MAX_BODY
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    extra: dict[str, Any] = field(default_factory=dict)


class RegistryServer:
    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        scheme, host, port = parse_listener(config.listener)
        if scheme == "https" and config.server_tls is None:
            raise ListenerError(f"{config.listener!r}: https needs TLS keys")
        self.scheme, self.host, self.port = scheme, host, port
        self.registry = Registry(
            lambda apply: KafkaStore(
                config.client_config,
                apply,
                topic=config.topic,
                replication_factor=config.replication_factor,
            )
        )
        self.metrics = (
            RegistryMetrics(
                config.metrics_registry,
                self.registry.state.schema_count,
                lambda: self.registry.is_primary,
            )
            if config.metrics_registry is not None
            else None
        )
        self.app = make_app(
            self.registry,
            forwarder=Forwarder(tls=config.forward_tls),
            authenticator=config.authenticator,
            metrics=self.metrics,
            max_body=config.max_body,
        )
        # the election client's SASL: the same credentials as the producer and consumer
        self.kafka_sasl = SaslCredentials.from_client_config(config.client_config)
        self._runner: web.AppRunner | None = None
        self._elector: GroupElector | None = None
        self._start_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.advertised_host()}:{self.port}"

    def advertised_host(self) -> str:
        if self.config.advertised_host:
            return self.config.advertised_host
        if self.host in ("", "0.0.0.0", "::"):
            return socket.gethostname()
        return self.host

    async def start(self) -> None:
        """Listens, then reads `_schemas` and joins the election in the background."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host or None, self.port, ssl_context=self.config.server_tls
        )
        await site.start()
        self._start_task = asyncio.get_running_loop().create_task(self._start_registry())

    async def _start_registry(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.registry.start()
                break
            except Exception as exc:  # the cluster is not up yet: retry
                log.warning("schema registry: cannot read %s yet: %s", self.config.topic, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        identity = Identity(self.advertised_host(), self.port, self.scheme, self.config.eligible)
        self._elector = GroupElector(
            parse_bootstrap(str(self.config.client_config["bootstrap.servers"])),
            identity,
            self.registry.set_primary,
            group=self.config.group,
            tls=self.config.kafka_tls,
            sasl=self.kafka_sasl,
            session_timeout_ms=self.config.session_timeout_ms,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
        )
        self._elector.start()

    async def wait_ready(self, timeout_s: float) -> None:
        await asyncio.wait_for(self.registry.ready.wait(), timeout_s)

    async def stop(self) -> None:
        if self._start_task is not None:
            self._start_task.cancel()
            try:
                await self._start_task
            except (asyncio.CancelledError, Exception):
                pass
        if self._elector is not None:
            await self._elector.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.registry.stop()
