"""The broker's listeners: one :class:`SocketServer` per entry of ``listeners``, and
the addresses clients are told to use (``advertised.listeners``).

Listeners are matched by name, as Kafka's DynamicListenerConfig does: a new name
starts listening (bound before the change is accepted, so an address in use refuses
the change), a name that goes stops listening and closes its connections, and an
existing listener cannot move to another address while the broker runs.

Every listener counts its connections against one :class:`ConnectionQuotas` and its
held request bytes against one :class:`RequestMemoryPool`, both broker-wide.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from broker_py.config.kafka_config import BrokerConfig, ConfigError, Listener
from broker_py.network import fd_budget
from broker_py.network.connection_quotas import ConnectionQuotas
from broker_py.network.request_memory_pool import RequestMemoryPool
from broker_py.network.socket_server import SocketServer
from broker_py.security.sasl.authenticator_factory import authenticators
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.security.ssl.ssl_context import server_context
from broker_py.security.ssl.ssl_principal_mapper import SslPrincipalMapper

log = logging.getLogger(__name__)


class ListenerManager:
    def __init__(
        self,
        config: BrokerConfig,
        scram_credentials: ScramCredentialStore,
        handlers: Callable[[], dict],
        on_unsupported: Callable,
        on_error: Callable,
    ) -> None:
        self.config = config
        self._scram_credentials = scram_credentials
        self._handlers = handlers
        self._on_unsupported = on_unsupported
        self._on_error = on_error
        self.servers: list[SocketServer] = []
        self.quotas = ConnectionQuotas(config, fd_budget.current().connections)
        self.memory_pool = RequestMemoryPool.from_config(config)
        self._tasks: list[asyncio.Task[None]] = []

    def server_for(self, listener: Listener) -> SocketServer:
        """A server for ``listener`` (ConfigError, naming the key, for a SASL listener
        whose mechanisms or JAAS config are not usable or an SSL one whose keystore is
        not)."""
        config = self.config
        return SocketServer(
            listener.host or "0.0.0.0",
            listener.port,
            self._handlers(),
            self._on_unsupported,
            config["socket.request.max.bytes"],
            name=listener.name,
            new_authenticator=authenticators(config, listener.name, self._scram_credentials),
            ssl_context=server_context(config, listener.name)
            if config.security_protocol(listener.name) in ("SSL", "SASL_SSL")
            else None,
            principal_mapper=SslPrincipalMapper(
                *reversed(config.listener_value(listener.name, "ssl.principal.mapping.rules"))
            ),
            on_error=self._on_error,
            config=config,
            quotas=self.quotas,
            memory_pool=self.memory_pool,
        )

    async def start(self, processing: bool = True) -> None:
        """Listens on every listener; with ``processing`` False requests wait for
        :meth:`enable_request_processing` (a cluster broker registering first)."""
        for listener in self.config["listeners"]:
            server = self.server_for(listener)
            server.processing = processing
            await server.start()
            self.servers.append(server)

    def enable_request_processing(self) -> None:
        for server in self.servers:
            server.enable_request_processing()

    async def stop(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self.servers:
            await server.stop()

    @property
    def bound_port(self) -> int:
        return self.servers[0].port

    def _changes(self) -> tuple[list[Listener], list[SocketServer]]:
        """(listeners to add, servers to remove) for ``listeners`` as configured now.
        Raises ConfigError for a listener whose address would change."""
        wanted = {listener.name: listener for listener in self.config["listeners"]}
        running = {server.name: server for server in self.servers}
        for name, server in running.items():
            listener = wanted.get(name)
            if (
                listener is not None
                and ((listener.host or "0.0.0.0"), listener.port) != (server.host, server.port)
                and listener.port != 0
            ):
                raise ConfigError(
                    "listeners",
                    str(listener),
                    f"listener {name} is on {server.host}:{server.port}; "
                    "an existing listener cannot move while the broker runs "
                    "(restart it, or add the address under a new listener name)",
                )
        added = [listener for name, listener in wanted.items() if name not in running]
        removed = [server for name, server in running.items() if name not in wanted]
        return added, removed

    def prepare_changes(
        self,
    ) -> tuple[list[Listener], list[SocketServer], list[tuple[SocketServer, socket.socket]]]:
        """For the configs as they would be: (listeners to add, servers to remove, new
        servers with their bound sockets). Raises ConfigError when a listener cannot
        move or a new address cannot be bound (sockets bound so far are returned to the
        caller only on success; on failure they are closed here)."""
        if not self.servers:
            return [], [], []  # not serving yet: start() listens on what is configured
        added, removed = self._changes()
        bound: list[tuple[SocketServer, socket.socket]] = []
        try:
            for listener in added:
                server = self.server_for(listener)
                try:
                    bound.append((server, server.bind()))
                except OSError as e:
                    raise ConfigError(
                        "listeners",
                        str(listener),
                        f"cannot listen on {server.host}:{server.port}: {e.strerror or e}",
                    ) from None
        except BaseException:
            for _, sock in bound:
                sock.close()
            raise
        return added, removed, bound

    def apply_changes(
        self, removed: list[SocketServer], bound: list[tuple[SocketServer, socket.socket]]
    ) -> None:
        for server in removed:
            self.servers.remove(server)
            log.info("stopping listener %s on %s:%d", server.name, server.host, server.port)
            self._tasks.append(
                asyncio.create_task(server.stop(), name=f"stop-listener-{server.name}")
            )
        for server, sock in bound:
            self.servers.append(server)
            log.info(
                "starting listener %s on %s:%d", server.name, server.host, sock.getsockname()[1]
            )
            self._tasks.append(
                asyncio.create_task(server.start(sock), name=f"start-listener-{server.name}")
            )

    def advertised_listener(self, connection=None) -> Listener:
        """The address clients are told to use: the entry of ``advertised.listeners``
        (default: ``listeners``) named as the listener ``connection`` came in on (else
        the first), with host/port taken from the bound socket where it says 0.0.0.0 /
        port 0."""
        server = getattr(connection, "server", None)
        advertised = self.config.advertised_listener(getattr(server, "name", None))
        host, port = advertised.host, advertised.port
        if self.servers and not self.config.is_set("advertised.listeners"):
            bound = next((s for s in self.servers if s.name == advertised.name), self.servers[0])
            port = port or bound.port
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
        return Listener(advertised.name, host, port)
