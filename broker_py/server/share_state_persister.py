"""What a share-partition leader uses to keep its state (Kafka's ``DefaultStatePersister``
and ``PersisterStateManager``): each call goes to the share coordinator of its
``group:topicId:partition`` key, the leader of the key's ``__share_group_state``
partition.

- When this broker is that leader, the call runs on its own
  :class:`~broker_py.coordinator.share.share_coordinator.ShareCoordinator`; otherwise it
  is sent as InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
  DeleteShareGroupState or ReadShareGroupStateSummary (v0) over the inter-broker
  listener.
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a partition
  without a leader yet, a lost connection and a request timeout are retried, the
  coordinator looked up again each time, with a backoff doubling from
  ``retry_backoff_ms`` up to ``retry_backoff_max_ms``, until ``timeout_ms`` after the
  call started; then the last error is the answer. Other errors are answered at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from broker_py.coordinator.share.share_coordinator import ShareCoordinator
from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey, StateBatch
from broker_py.coordinator.share.share_coordinator_shard import Outcome, failed
from broker_py.server.inter_broker_clients import InterBrokerClients
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)

RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

# The broker leading a key's __share_group_state partition (None: none yet).
CoordinatorOf = Callable[[SharePartitionKey], "int | None"]


class ShareStatePersister:
    def __init__(
        self,
        broker_id: int,
        local: Callable[[], ShareCoordinator | None],
        coordinator_of: CoordinatorOf,
        clients: InterBrokerClients,
        *,
        timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
    ) -> None:
        """``local()``: this broker's share coordinator (None before it runs);
        ``coordinator_of(key)``: the broker to ask; ``clients``: connections to the
        others."""
        self.broker_id = broker_id
        self._local = local
        self._coordinator_of = coordinator_of
        self._clients = clients
        self.timeout_ms = timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms

    async def close(self) -> None:
        await self._clients.close()

    # ---- the five calls ----

    async def initialize(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> Outcome:
        R = InitializeShareGroupStateRequest
        body = _request(
            R, R.InitializeStateData, key, state_epoch=state_epoch, start_offset=start_offset
        )
        return await self._call(
            key,
            lambda c: c.initialize_state(key, state_epoch, start_offset),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            body,
        )

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        R = ReadShareGroupStateRequest
        body = _request(R, R.ReadStateData, key, leader_epoch=leader_epoch)
        return await self._call(
            key, lambda c: c.read_state(key, leader_epoch), ApiKey.READ_SHARE_GROUP_STATE, body
        )

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
    ) -> Outcome:
        batches = tuple(batches)
        R = WriteShareGroupStateRequest
        body = _request(
            R,
            R.WriteStateData,
            key,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            state_batches=[
                R.StateBatch(
                    first_offset=b.first_offset,
                    last_offset=b.last_offset,
                    delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count,
                )
                for b in batches
            ],
        )
        return await self._call(
            key,
            lambda c: c.write_state(key, state_epoch, leader_epoch, start_offset, batches),
            ApiKey.WRITE_SHARE_GROUP_STATE,
            body,
        )

    async def delete(self, key: SharePartitionKey) -> Outcome:
        R = DeleteShareGroupStateRequest
        body = _request(R, R.DeleteStateData, key)
        return await self._call(
            key, lambda c: c.delete_state(key), ApiKey.DELETE_SHARE_GROUP_STATE, body
        )

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        R = ReadShareGroupStateSummaryRequest
        body = _request(R, R.ReadStateSummaryData, key, leader_epoch=leader_epoch)
        return await self._call(
            key,
            lambda c: c.read_state_summary(key, leader_epoch),
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            body,
        )

    # ---- routing and retries ----

    async def _call(
        self,
        key: SharePartitionKey,
        local_call: Callable[[ShareCoordinator], Any],
        api: ApiKey,
        body: Any,
    ) -> Outcome:
        deadline = time.monotonic() + self.timeout_ms / 1000
        backoff = self.retry_backoff_ms / 1000
        while True:
            outcome = await self._attempt(key, local_call, api, body, deadline)
            if outcome.error not in RETRIABLE:
                return outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return outcome
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, self.retry_backoff_max_ms / 1000)

    async def _attempt(
        self,
        key: SharePartitionKey,
        local_call: Callable[[ShareCoordinator], Any],
        api: ApiKey,
        body: Any,
        deadline: float,
    ) -> Outcome:
        local = self._local()
        try:
            leader = self._coordinator_of(key)
        except KafkaError as e:  # the topic is being created
            return failed(e.errno)
        if leader is None or leader < 0:
            return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self.broker_id:
            if local is None:
                return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            outcome: Outcome = await local_call(local)
            return outcome
        client = self._clients.get(leader)
        if client is None:
            return failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        timeout_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            response = await client.send(api, body, timeout_ms, version=0)
        except KafkaError as e:  # lost connection, timeout
            return failed(e.errno)
        return _outcome(api, response)


def _request(request: Any, topic_data: Any, key: SharePartitionKey, **partition: Any) -> Any:
    """The request of one of the five share-state APIs naming only ``key``'s share
    partition (``partition``: the fields of its PartitionData besides its index); the
    five requests share that shape: group id, topics [topic id, partitions [...]]."""
    return request(
        group_id=key.group_id,
        topics=[
            topic_data(
                topic_id=key.topic_id,
                partitions=[request.PartitionData(partition=key.partition, **partition)],
            )
        ],
    )


def _outcome(api: ApiKey, response: Any) -> Outcome:
    """The answer for the one partition a request named."""
    try:
        (result,) = response.results
        (p,) = result.partitions
    except ValueError:
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    error = ErrorCode(p.error_code)  # type: ignore[call-arg]  # value lookup (mypy#10573)
    if error != ErrorCode.NONE:
        return Outcome([], error, p.error_message)
    if api == ApiKey.READ_SHARE_GROUP_STATE:
        return Outcome(
            [],
            state_epoch=p.state_epoch,
            start_offset=p.start_offset,
            state_batches=tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in p.state_batches
            ),
        )
    if api == ApiKey.READ_SHARE_GROUP_STATE_SUMMARY:
        return Outcome(
            [],
            state_epoch=p.state_epoch,
            leader_epoch=p.leader_epoch,
            start_offset=p.start_offset,
        )
    return Outcome([])
