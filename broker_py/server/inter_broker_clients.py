"""One :class:`NetworkClient` per peer broker for a broker-to-broker channel
(transaction markers, transaction verification).

A peer's client is made on first use from its inter-broker endpoint, as the metadata
names it then, and kept while the endpoint stays the same; a peer that re-registered
elsewhere gets a new client and the old one is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker_py.network.network_client import NetworkClient

# (host, port) of a broker's inter-broker endpoint, or None when unknown.
EndpointOf = Callable[[int], "tuple[str, int] | None"]
ClientFactory = Callable[[str, int, str], NetworkClient]


class InterBrokerClients:
    def __init__(
        self, client_id: str, endpoint_of: EndpointOf | None, make_client: ClientFactory | None
    ) -> None:
        self.client_id = client_id
        self._endpoint_of = endpoint_of
        self._make_client = make_client
        self._clients: dict[int, tuple[tuple[str, int], NetworkClient]] = {}

    def get(self, broker_id: int) -> NetworkClient | None:
        """The client of ``broker_id``, or None when it has no known endpoint (or this
        broker runs without inter-broker connections: single-node mode)."""
        if self._endpoint_of is None or self._make_client is None:
            return None
        endpoint = self._endpoint_of(broker_id)
        if endpoint is None:
            return None
        held = self._clients.get(broker_id)
        if held is not None and held[0] == endpoint:
            return held[1]
        if held is not None:
            asyncio.get_running_loop().create_task(held[1].close())
        client = self._make_client(endpoint[0], endpoint[1], self.client_id)
        self._clients[broker_id] = (endpoint, client)
        return client

    async def close(self) -> None:
        clients = [c for _, c in self._clients.values()]
        self._clients.clear()
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
