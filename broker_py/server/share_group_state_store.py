"""The group coordinator's view of the share-state persister
(:class:`~broker_py.coordinator.group.share_group_coordinator.StateStore`): share groups
initialize and delete their partitions' state in the share coordinator, another
coordinator, through the broker's
:class:`~broker_py.server.share_state_persister.ShareStatePersister`."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey
from broker_py.coordinator.share.share_coordinator_shard import UNINITIALIZED_START_OFFSET
from broker_py.server.share_state_persister import ShareStatePersister
from logstore.protocol.error_codes import ErrorCode


class ShareGroupStateStore:
    def __init__(self, persister: Callable[[], ShareStatePersister | None]) -> None:
        self._persister = persister

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start: int
    ) -> ErrorCode:
        persister = self._persister()
        if persister is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        key = SharePartitionKey(group_id, topic_id, partition)
        return (await persister.initialize(key, state_epoch, start)).error

    async def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        persister = self._persister()
        if persister is None:
            return UNINITIALIZED_START_OFFSET
        summary = await persister.read_summary(SharePartitionKey(group_id, topic_id, partition), 0)
        if summary.error != ErrorCode.NONE:
            return UNINITIALIZED_START_OFFSET
        return summary.start_offset

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        persister = self._persister()
        if persister is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return (await persister.delete(SharePartitionKey(group_id, topic_id, partition))).error
