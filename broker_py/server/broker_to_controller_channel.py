"""A broker's channel to the active controller (Kafka's
BrokerToControllerChannelManager): forwarded admin requests, ControlledShutdown and
AlterPartition go through it.

``controller_endpoint()`` says where the controller is now: its inter-broker
listener's ``Listener`` or ``(host, port)``, or None while no controller is known.
One :class:`NetworkClient` (client id ``broker-<id>-to-controller``, or
``broker-<id>-<purpose>``) is kept to the current controller; when the endpoint
changes it is closed and a client to the new one made.

:meth:`send` retries until its deadline, re-reading the controller before each
attempt, and waits ``retry_backoff_ms`` between attempts, when:

- no controller is known;
- the connection was lost or could not be set up (DisconnectError), or an attempt
  got no response within ``request_timeout_ms`` (RequestTimeoutError; the client
  then closed the connection);
- the response carries NOT_CONTROLLER (41) in an ``error_code`` field, at the top
  level or in any nested struct (Kafka: ``errorCounts`` holds NOT_CONTROLLER): the
  controller moved.

Any other response is returned as it is, and other errors (authentication,
unsupported version, a response that does not decode) are raised at once. At the
deadline it raises RequestTimeoutError; the request may have been processed by a
controller whose answer was lost. :meth:`send_once` makes one attempt, for callers
that count their own attempts (controlled shutdown).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker_py.network.network_client import (
    DisconnectError,
    NetworkClient,
    NetworkClientFactory,
    RequestTimeoutError,
    endpoint_address,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.schema import Array, Message, Struct, StructValue

log = logging.getLogger(__name__)


def has_error(value: StructValue, code: int) -> bool:
    """Whether ``code`` is the value of an ``error_code`` field of ``value`` or of any
    struct nested in it."""
    for field in value.SCHEMA.fields:
        v = getattr(value, field.name)
        if field.name == "error_code" and v == code:
            return True
        t = field.type.element if isinstance(field.type, Array) else field.type
        if not isinstance(t, Struct) or v is None:
            continue
        for item in v if isinstance(field.type, Array) else (v,):
            if has_error(item, code):
                return True
    return False


class BrokerToControllerChannelManager:
    def __init__(
        self,
        broker_id: int,
        controller_endpoint: Callable[[], Any],
        new_client: NetworkClientFactory,
        *,
        purpose: str = "to-controller",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
    ) -> None:
        """``new_client(host, port, client_id)``: ``InterBrokerChannelBuilder(config).client``;
        ``request_timeout_ms`` (Kafka's ``request.timeout.ms``) bounds each attempt."""
        self.broker_id = broker_id
        self.client_id = f"broker-{broker_id}-{purpose}"
        self._controller_endpoint = controller_endpoint
        self._new_client = new_client
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._client: NetworkClient | None = None
        self._address: tuple[str, int] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # clients to former controllers
        self._closed = False

    def _client_for(self, endpoint: Any) -> NetworkClient:
        address = endpoint_address(endpoint)
        if self._client is None or address != self._address:
            if self._client is not None:
                task = asyncio.get_running_loop().create_task(
                    self._client.close(), name=f"{self.client_id}-close"
                )
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            self._client = self._new_client(address[0], address[1], self.client_id)
            self._address = address
        return self._client

    async def send(self, api_key: ApiKey, request: Message, timeout_ms: int) -> Message:
        """The controller's response to ``request`` (see the module docstring);
        RequestTimeoutError after ``timeout_ms``."""
        api_key = ApiKey(api_key)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        attempts = 0
        reason = "no controller is known"
        while not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            endpoint = self._controller_endpoint()
            if endpoint is None:
                reason = "no controller is known"
            else:
                client = self._client_for(endpoint)
                attempts += 1
                try:
                    # The attempt's own timeout closes a dead connection; the deadline
                    # only abandons the response (the connection stays usable).
                    response = await asyncio.wait_for(
                        client.send(api_key, request, self.request_timeout_ms), remaining
                    )
                except TimeoutError:
                    break
                except (DisconnectError, RequestTimeoutError) as e:
                    reason = str(e)
                else:
                    if not has_error(response, ErrorCode.NOT_CONTROLLER):
                        return response
                    reason = f"{client.address} is not the controller"
                log.debug(
                    "%s: %s attempt %d failed, retrying: %s",
                    self.client_id,
                    api_key.api_name,
                    attempts,
                    reason,
                )
            await asyncio.sleep(min(self.retry_backoff_ms / 1000, max(0.0, deadline - loop.time())))
        if self._closed:
            raise DisconnectError(f"{self.client_id}: the channel is closed")
        raise RequestTimeoutError(
            f"{api_key.api_name} to the controller: no answer within {timeout_ms} ms "
            f"({attempts} attempts; last: {reason})"
        )

    async def send_once(self, api_key: ApiKey, request: Message) -> Message:
        """One attempt of :meth:`send`, bounded by ``request_timeout_ms``: the controller's
        response whatever its error codes (NOT_CONTROLLER included). DisconnectError when
        no controller is known, the channel is closed or the connection fails;
        RequestTimeoutError when no response came in time."""
        api_key = ApiKey(api_key)
        if self._closed:
            raise DisconnectError(f"{self.client_id}: the channel is closed")
        endpoint = self._controller_endpoint()
        if endpoint is None:
            raise DisconnectError("no controller is known")
        return await self._client_for(endpoint).send(api_key, request, self.request_timeout_ms)

    async def close(self) -> None:
        """Closes the client; sends under way fail with DisconnectError."""
        self._closed = True
        if self._client is not None:
            await self._client.close()
            self._client = None
        await asyncio.gather(*self._closing)
