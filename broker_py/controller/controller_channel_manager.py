"""The controller's channels to the brokers (Kafka's ControllerChannelManager with one
RequestSendThread per broker).

Per destination broker: one :class:`NetworkClient` (client id
``broker-<controller id>-controller-to-broker-<broker id>``), one FIFO queue and one
sender task.

Invariants:

- Requests to one broker are sent one at a time, in the order :meth:`send` queued
  them: the next is sent only after the previous one's response arrived.
- A request that fails to get a response (DisconnectError, RequestTimeoutError, a
  failed connection setup) is sent again after ``retry_backoff_ms`` (plus the
  client's own reconnect backoff), until it gets one, the broker is removed or the
  channel manager is stopped; the requests behind it wait. A request that cannot
  be encoded or whose response cannot be decoded is dropped with an error logged,
  as retrying could not help.
- ``callback(response)`` runs on the event loop, in the sender's task, before the
  next request to that broker is sent; an exception it raises is logged.
- Requests queued for a broker that is removed, or when the manager stops, are
  dropped without their callbacks; :meth:`send` to a broker not added is dropped
  with a warning (Kafka: "since it is offline").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from broker_py.network.network_client import NetworkClient, NetworkClientFactory, endpoint_address
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import KafkaException, ProtocolError
from logstore.protocol.schema import Message

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Message], Any]


@dataclasses.dataclass
class _QueueItem:
    api_key: ApiKey
    request: Message
    callback: ResponseCallback | None


@dataclasses.dataclass
class _BrokerState:
    broker_id: int
    address: tuple[str, int]
    client: NetworkClient
    queue: asyncio.Queue[_QueueItem]
    task: asyncio.Task[None] | None = None


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        new_client: NetworkClientFactory,
        *,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
    ) -> None:
        """``new_client(host, port, client_id)`` makes each broker's client
        (``InterBrokerChannelBuilder(config).client``); ``request_timeout_ms`` is
        Kafka's ``controller.socket.timeout.ms``."""
        self.controller_id = controller_id
        self._new_client = new_client
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._brokers: dict[int, _BrokerState] = {}
        self._closing: set[asyncio.Task[None]] = set()  # channels of removed brokers
        self._running = False

    @property
    def broker_ids(self) -> set[int]:
        return set(self._brokers)

    def queue_size(self, broker_id: int) -> int:
        """Requests queued for ``broker_id`` and not yet sent (0 if not added)."""
        state = self._brokers.get(broker_id)
        return state.queue.qsize() if state is not None else 0

    async def start(self) -> None:
        """Starts the sender of every broker added so far (later ones start at once)."""
        self._running = True
        for state in self._brokers.values():
            self._start_sender(state)

    async def stop(self) -> None:
        """Stops every sender and closes every client; queued requests are dropped."""
        self._running = False
        states = list(self._brokers.values())
        self._brokers.clear()
        await asyncio.gather(*(self._shutdown(state) for state in states), *self._closing)

    def add_broker(self, broker_id: int, endpoint: Any) -> None:
        """Adds a channel to ``broker_id`` at ``endpoint`` (its inter-broker listener's
        ``Listener`` or ``(host, port)``). A broker already added at the same address
        is left as it is; at another address its channel is replaced (its queue is
        dropped)."""
        address = endpoint_address(endpoint)
        state = self._brokers.get(broker_id)
        if state is not None:
            if state.address == address:
                return
            self.remove_broker(broker_id)
        client = self._new_client(
            address[0], address[1], f"broker-{self.controller_id}-controller-to-broker-{broker_id}"
        )
        state = _BrokerState(broker_id, address, client, asyncio.Queue())
        self._brokers[broker_id] = state
        if self._running:
            self._start_sender(state)

    def remove_broker(self, broker_id: int) -> None:
        """Stops the channel to ``broker_id``: its sender stops (a request in flight is
        abandoned) and its queued requests are dropped. Nothing if not added."""
        state = self._brokers.pop(broker_id, None)
        if state is not None:
            task = asyncio.get_running_loop().create_task(
                self._shutdown(state), name=f"controller-to-broker-{broker_id}-close"
            )
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def send(
        self,
        broker_id: int,
        api_key: ApiKey,
        request: Message,
        callback: ResponseCallback | None = None,
    ) -> None:
        """Queues ``request`` for ``broker_id``; ``callback(response)`` gets its response."""
        key = ApiKey(api_key)  # type: ignore[call-arg]  # value lookup (mypy#10573)
        state = self._brokers.get(broker_id)
        if state is None:
            log.warning(
                "controller %d: not sending %s to broker %d, which is not connected (offline)",
                self.controller_id,
                key.api_name,
                broker_id,
            )
            return
        state.queue.put_nowait(_QueueItem(key, request, callback))

    def _start_sender(self, state: _BrokerState) -> None:
        if state.task is None:
            state.task = asyncio.get_running_loop().create_task(
                self._send_loop(state),
                name=f"broker-{self.controller_id}-controller-to-broker-{state.broker_id}",
            )

    async def _shutdown(self, state: _BrokerState) -> None:
        if state.task is not None:
            state.task.cancel()
            await asyncio.gather(state.task, return_exceptions=True)
        await state.client.close()

    async def _send_loop(self, state: _BrokerState) -> None:
        while True:
            item = await state.queue.get()
            response = await self._send_until_answered(state, item)
            if response is None or item.callback is None:
                continue
            try:
                item.callback(response)
            except Exception:
                log.exception(
                    "controller %d: the callback of %s to broker %d failed",
                    self.controller_id,
                    item.api_key.api_name,
                    state.broker_id,
                )

    async def _send_until_answered(self, state: _BrokerState, item: _QueueItem) -> Message | None:
        attempt = 0
        while True:
            try:
                return await state.client.send(item.api_key, item.request, self.request_timeout_ms)
            except ProtocolError as e:
                log.error(
                    "controller %d: dropping %s to broker %d: %s",
                    self.controller_id,
                    item.api_key.api_name,
                    state.broker_id,
                    e,
                )
                return None
            except (KafkaException, OSError) as e:
                attempt += 1
                level = logging.WARNING if attempt == 1 or attempt % 50 == 0 else logging.DEBUG
                log.log(
                    level,
                    "controller %d: %s to broker %d at %s:%d failed (attempt %d), retrying: %s",
                    self.controller_id,
                    item.api_key.api_name,
                    state.broker_id,
                    *state.address,
                    attempt,
                    e,
                )
            await asyncio.sleep(self.retry_backoff_ms / 1000)
