"""Sends a leader's ISR changes to the controller (Kafka's ``AlterPartitionManager``).

A partition proposes at most one change at a time (:class:`PendingIsrChange`); the
manager batches the changes waiting into one AlterPartition (API 56) at a time, sent
through the broker-to-controller channel with this broker's epoch, and hands each
partition the controller's answer (``Partition.on_isr_change_result``): the committed ISR
with its partition epoch, or an error, after which the partition may propose again. A
request that fails as a whole (no controller within the timeout) answers every change in
it with that error.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker_py.cluster.replica import PendingIsrChange
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaException
from logstore.protocol.messages.controller import AlterPartitionRequest
from logstore.protocol.schema import Message, StructValue

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition

log = logging.getLogger(__name__)

NULL_UUID = uuid.UUID(int=0)


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        topic_id: Callable[[str], uuid.UUID | None],
        send: Callable[[ApiKey, Message, int], Awaitable[Message]],
        timeout_ms: int = 30_000,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._topic_id = topic_id
        self._send = send
        self.timeout_ms = timeout_ms
        self._waiting: list[tuple[Partition, PendingIsrChange]] = []
        self._task: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, change: PendingIsrChange) -> None:
        """Called by a leader partition (on the event loop) with its proposed ISR."""
        self._waiting.append((partition, change))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._send_waiting(), name="alter-partition"
            )

    async def _send_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            await self._send_batch(batch)

    def _request(self, batch: list[tuple[Partition, PendingIsrChange]]) -> Message:
        by_topic: dict[str, list[StructValue]] = {}
        for partition, change in batch:
            isr = sorted(change.proposed_isr)
            by_topic.setdefault(partition.topic, []).append(
                AlterPartitionRequest.PartitionData(
                    partition_index=partition.index,
                    leader_epoch=partition.leader_epoch,
                    new_isr=isr,
                    new_isr_with_epochs=[
                        AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=-1) for b in isr
                    ],
                    leader_recovery_state=0,
                    partition_epoch=partition.partition_epoch,
                )
            )
        return AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self._broker_epoch(),
            topics=[
                AlterPartitionRequest.TopicData(
                    topic_name=t, topic_id=self._topic_id(t) or NULL_UUID, partitions=ps
                )
                for t, ps in by_topic.items()
            ],
        )

    async def _send_batch(self, batch: list[tuple[Partition, PendingIsrChange]]) -> None:
        try:
            response = await self._send(
                ApiKey.ALTER_PARTITION, self._request(batch), self.timeout_ms
            )
        except (TimeoutError, KafkaException) as e:
            log.warning("AlterPartition of %d partitions failed: %s", len(batch), e)
            for partition, change in batch:
                partition.on_isr_change_result(change, ErrorCode.REQUEST_TIMED_OUT)
            return
        names = {self._topic_id(p.topic): p.topic for p, _ in batch}
        results: dict[tuple[str | None, int], StructValue] = {}
        for t in response.topics:
            topic = t.topic_name or names.get(t.topic_id)
            for p in t.partitions:
                results[(topic, p.partition_index)] = p
        for partition, change in batch:
            r = results.get((partition.topic, partition.index))
            # ErrorCode(code) is the member of that value; mypy takes it for a call of
            # ErrorCode.__new__ (code, retriable, description) (mypy#10573).
            error = (
                ErrorCode(response.error_code)  # type: ignore[call-arg]
                if response.error_code
                else (
                    ErrorCode(r.error_code)  # type: ignore[call-arg]
                    if r is not None
                    else ErrorCode.UNKNOWN_SERVER_ERROR
                )
            )
            if error != ErrorCode.NONE or r is None:  # NONE comes only with r
                log.info(
                    "AlterPartition of %s (leader epoch %d, partition epoch %d) refused: %s",
                    partition.name,
                    partition.leader_epoch,
                    partition.partition_epoch,
                    error.name,
                )
                partition.on_isr_change_result(change, error)
            else:
                log.info(
                    "ISR of %s is now %s (partition epoch %d)",
                    partition.name,
                    list(r.isr),
                    r.partition_epoch,
                )
                partition.on_isr_change_result(
                    change, error, r.leader_epoch, list(r.isr), r.partition_epoch
                )
