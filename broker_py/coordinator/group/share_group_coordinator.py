"""The live coordinator of share groups (KIP-932): the sans-IO
:class:`~broker_py.coordinator.group.modern.share.manager.ShareGroupManager` on the event
loop, its records in ``__consumer_offsets``.

Held by the classic :class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`
beside the consumer-group coordinator: one group-id namespace. A share heartbeat naming a
classic or consumer group gets GROUP_ID_NOT_FOUND "Group X is not a share group." (Kafka's
getOrMaybeCreatePersistedShareGroup), checked by the caller.

Invariants, as for consumer groups:

- A group is this coordinator's while this broker leads its ``__consumer_offsets``
  partition; on resignation its groups go.
- The records a heartbeat (or a session timeout) returns are appended to the group's
  partition before the heartbeat is answered; what was persisted is the replay of the
  records whose append succeeded. When an append fails, the group is rebuilt from it
  once none of its appends is in flight
  (:mod:`~broker_py.coordinator.group.group_record_writes`), and the heartbeat gets the
  append's error.
- Topics come from the broker's metadata, read again whenever its topics object changes.
- Sessions run on the group's share.session.timeout.ms; responses carry its
  share.heartbeat.interval.ms (the GROUP config resource over the broker's defaults).
- One event-loop timer stands for the manager's earliest session deadline.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from broker_py.coordinator.group.modern.heartbeat import HeartbeatResponse
from broker_py.coordinator.group.modern.share import state_partitions
from broker_py.coordinator.group.modern.share.group import ShareGroup
from broker_py.coordinator.group.modern.share.manager import (
    ShareGroupManager,
    ShareHeartbeatRequest,
)
from broker_py.coordinator.group.modern.share.record_serde import serialize
from broker_py.coordinator.group.modern.share.records import ShareGroupEpochRecord, ShareRecord
from broker_py.coordinator.group.modern_group_coordinator import ModernGroupCoordinator
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

Partition = tuple[uuid.UUID, int]


# A share-partition start offset not yet known (the leader applies share.auto.offset.reset).
UNINITIALIZED_START_OFFSET = -1


class StateStore(Protocol):
    """What the coordinator uses of the share-state persister (the share coordinator is
    another coordinator: the server layer adapts one to the other)."""

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start: int
    ) -> ErrorCode: ...

    async def start_offset(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The state's start offset; -1 without state or when it cannot be read."""
        ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode: ...


class ShareGroupCoordinator(ModernGroupCoordinator[ShareRecord, ShareGroup]):
    def __init__(
        self,
        groups: GroupMetadataManager,
        time: Time = SYSTEM_TIME,
        *,
        max_size: int,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 5000,
        enabled: bool = False,
        initialize_retry_ms: int = 30000,
    ) -> None:
        """``enabled``: group.share.enable (share groups are served only when enabled; a
        heartbeat otherwise gets UNSUPPORTED_VERSION);
        ``initialize_retry_ms``: group.share.initialize.retry.interval.ms."""
        self.enabled = enabled
        self.manager = ShareGroupManager(time, max_size)
        super().__init__("share group", groups, time, self.manager, serialize, ShareGroup)
        self._default_timeouts = (session_timeout_ms, heartbeat_interval_ms)
        self._group_timeouts: Callable[[str], tuple[int, int]] | None = None
        self._state_store: Callable[[], StateStore | None] | None = None
        self._metadata_ready: Callable[[], bool] = lambda: False
        self._initialize_retry_s = initialize_retry_ms / 1000
        # (group id, topic id, partition) -> monotonic time it was put in initializing.
        self._initializing_since: dict[tuple[str, uuid.UUID, int], float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- lifecycle ----

    def set_group_timeouts(self, timeouts: Callable[[str], tuple[int, int]]) -> None:
        """share.session.timeout.ms and share.heartbeat.interval.ms in force for a group."""
        self._group_timeouts = timeouts

    def timeouts(self, group_id: str) -> tuple[int, int]:
        if self._group_timeouts is None:
            return self._default_timeouts
        return self._group_timeouts(group_id)

    def load_records(self, records: list[ShareRecord]) -> None:
        """The share-group records read back from an offsets partition, in log order:
        replayed, then every member of each group gets a full session."""
        loaded: list[str] = []
        for record in records:
            if record.group_id not in loaded:
                loaded.append(record.group_id)
                self._writes.loading(record.group_id)
                self.manager.forget_group(record.group_id)
            self.manager.replay(record)
            self._writes.replayed(record)
        for group_id in loaded:
            self.manager.on_loaded(group_id, self.timeouts(group_id)[0])
        self._arm()

    # ---- lookups ----

    def group(self, group_id: str) -> ShareGroup | None:
        return self.manager.group(group_id)

    def refresh_topics(self) -> bool:
        """As for any modern group; then, once the metadata holds every topic, deleted
        topics leave the groups' share-partition state."""
        changed = super().refresh_topics()
        if changed and self._metadata_ready():
            self._forget_deleted_topics()
        return changed

    def set_metadata_ready(self, ready: Callable[[], bool]) -> None:
        """``ready()``: the metadata holds every topic (one missing from it was deleted)."""
        self._metadata_ready = ready

    def _forget_deleted_topics(self) -> None:
        """Deleted topics leave the groups' ShareGroupStatePartitionMetadata records."""
        existing = {t.topic_id for t in self.manager.topics.values()}
        for group in list(self.manager.groups.values()):
            if group.deleted:
                continue
            gone = state_partitions.gone_topics(group, existing)
            if gone:
                record = state_partitions.without_topics(group, gone)
                self.manager.replay(record)
                self._persist(group.group_id, [record], lambda _error: None)

    # ---- heartbeat ----

    def heartbeat(
        self, request: ShareHeartbeatRequest
    ) -> HeartbeatResponse | asyncio.Future[HeartbeatResponse]:
        """ShareGroupHeartbeat for a group this broker coordinates (the caller checked
        the coordinator and the group's type): the response, or a future of it while the
        group's records are written."""
        self.refresh_topics()
        session_ms, interval_ms = self.timeouts(request.group_id)
        result = self.manager.heartbeat(request, session_ms, interval_ms)
        response = result.response
        if response.error_code != ErrorCode.NONE:
            self._arm()
            return response
        records = list(result.records)
        initialize = self._plan_initialize(request.group_id)
        if initialize:
            records.append(self._state_partitions_record(request.group_id))
        if not records:
            self._arm()
            return response
        done: asyncio.Future[HeartbeatResponse] = asyncio.get_running_loop().create_future()

        def answer(_task: object = None) -> None:
            if not done.done():
                done.set_result(response)

        def written(error: ErrorCode) -> None:
            if done.done():
                return
            if error != ErrorCode.NONE:
                done.set_result(
                    HeartbeatResponse(error_code=error, error_message=error.description)
                )
            elif initialize:
                # Answered once the new partitions' state exists (or failed to), so that
                # the member's first ShareFetch finds it.
                task = asyncio.ensure_future(self._initialize(request.group_id, initialize))
                task.add_done_callback(answer)
            else:
                answer()

        self._persist(request.group_id, records, written)
        self._arm()
        return done

    # ---- share-partition state (ShareGroupStatePartitionMetadata) ----

    def set_state_store(self, store: Callable[[], StateStore | None]) -> None:
        """The share-state persister (None before it runs)."""
        self._state_store = store

    def state_store(self) -> StateStore | None:
        return None if self._state_store is None else self._state_store()

    def _state_partitions_record(self, group_id: str) -> ShareRecord:
        group = self.manager.group(group_id)
        assert group is not None and group.state_partitions is not None
        return group.state_partitions

    def _names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: t.name for t in self.manager.topics.values()}

    def _plan_initialize(self, group_id: str) -> set[Partition]:
        """Partitions whose state this heartbeat initializes, already put in the group's
        initializing set (the record is the caller's to write)."""
        group = self.manager.group(group_id)
        if group is None or self.state_store() is None:
            return set()
        now = self.time.monotonic()

        def retry(tp: Partition) -> bool:
            since = self._initializing_since.get((group_id, *tp))
            return since is None or now - since >= self._initialize_retry_s

        add = state_partitions.to_initialize(group, self.manager.topics, retry)
        if add:
            for tp in add:
                self._initializing_since[(group_id, *tp)] = now
            self.manager.replay(state_partitions.with_initializing(group, add, self._names()))
        return add

    async def _initialize(self, group_id: str, partitions: set[Partition]) -> None:
        """InitializeShareGroupState for ``partitions`` at the group epoch with start
        offset -1, then the record moving them to initialized (or out of initializing).
        A partition whose state already has a start offset is left as it is: its
        share-partition leader initialized it first."""
        store = self.state_store()
        group = self.manager.group(group_id)
        if store is None or group is None:
            return
        epoch = group.group_epoch

        async def one(tp: Partition) -> bool:
            if await store.start_offset(group_id, *tp) >= 0:
                return True
            error = await store.initialize(group_id, *tp, epoch, UNINITIALIZED_START_OFFSET)
            if error != ErrorCode.NONE:
                log.warning(
                    "share group %s: state of %s-%d not initialized (%s)",
                    group_id,
                    tp[0],
                    tp[1],
                    error.name,
                )
            return error == ErrorCode.NONE

        ordered = sorted(partitions)
        results = await asyncio.gather(*(one(tp) for tp in ordered))
        for tp in ordered:
            self._initializing_since.pop((group_id, *tp), None)
        group = self.manager.group(group_id)
        if group is None or not self.active:
            return
        done = {tp for tp, ok in zip(ordered, results, strict=True) if ok}
        record = state_partitions.after_initialize(group, done, set(ordered) - done, self._names())
        self.manager.replay(record)
        self._persist(group_id, [record], lambda _error: None)

    async def mark_initialized(self, group_id: str, partitions: set[Partition]) -> None:
        """AlterShareGroupOffsets set these partitions' start offsets."""
        group = self.manager.group(group_id)
        if group is None or not partitions:
            return
        record = state_partitions.after_initialize(group, partitions, set(), self._names())
        self.manager.replay(record)
        await self._write(group_id, [record])

    async def start_deleting(self, group_id: str, topics: Mapping[uuid.UUID, str]) -> ErrorCode:
        """DeleteShareGroupOffsets: whole topics moved to deleting before their state is."""
        group = self.manager.group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        record = state_partitions.with_deleting(group, topics)
        self.manager.replay(record)
        return await self._write(group_id, [record])

    async def finish_deleting(self, group_id: str, deleted: set[uuid.UUID]) -> None:
        group = self.manager.group(group_id)
        if group is None or not deleted:
            return
        record = state_partitions.after_delete(group, deleted)
        self.manager.replay(record)
        await self._write(group_id, [record])

    def partitions_with_state(self, group_id: str) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        group = self.manager.group(group_id)
        return {} if group is None else state_partitions.with_state(group)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        group = self.manager.group(group_id)
        return {} if group is None else dict(state_partitions.initialized(group))

    async def _write(self, group_id: str, records: list[ShareRecord]) -> ErrorCode:
        """Appends records already applied; the append's error once it is answered."""
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def written(error: ErrorCode) -> None:
            if not done.done():
                done.set_result(error)

        self._persist(group_id, records, written)
        return await done

    async def _delete_state(
        self, group_id: str, partitions: Mapping[uuid.UUID, tuple[str, frozenset[int]]]
    ) -> None:
        """DeleteGroups: the deleted group's share-partition state goes too (failures are
        logged; the share coordinator prunes nothing else of it)."""
        store = self.state_store()
        if store is None:
            return
        keys = [(t, p) for t, (_, ps) in partitions.items() for p in ps]
        errors = await asyncio.gather(*(store.delete(group_id, *key) for key in keys))
        for (topic_id, partition), error in zip(keys, errors, strict=True):
            if error != ErrorCode.NONE:
                log.warning(
                    "share group %s deleted; the state of %s-%d was not (%s)",
                    group_id,
                    topic_id,
                    partition,
                    error.name,
                )

    # ---- administration ----

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else its
        records are tombstoned and then the state of its initializing and initialized
        partitions deleted through the persister (Kafka deletes the state first and
        answers its error; here the group is gone at once and a failure is logged)."""
        group = self.manager.group(group_id)
        with_state = {} if group is None else state_partitions.with_state(group)
        try:
            records = self.manager.delete_group(group_id)
        except KafkaError as e:
            return e.errno
        self._persist(group_id, records, lambda _error: None)
        if with_state:
            task = asyncio.get_running_loop().create_task(self._delete_state(group_id, with_state))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return ErrorCode.NONE

    def offsets_error(self, group_id: str, *, must_exist: bool) -> ErrorCode | None:
        """Why the start offsets of ``group_id`` cannot be altered or deleted now
        (Alter/DeleteShareGroupOffsets): NON_EMPTY_GROUP while it has members,
        GROUP_ID_NOT_FOUND when ``must_exist`` and there is no such share group."""
        group = self.manager.group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND if must_exist else None
        return ErrorCode.NON_EMPTY_GROUP if group.members else None

    async def next_state_epoch(self, group_id: str) -> tuple[ErrorCode, int]:
        """AlterShareGroupOffsets: the group (created empty when missing, as Kafka's
        getOrMaybeCreatePersistedShareGroup) gets its group epoch bumped and written; the
        new epoch is the state epoch its start offsets are initialized at."""
        group = self.manager.group(group_id)
        record = ShareGroupEpochRecord(
            group_id,
            1 if group is None else group.group_epoch + 1,
            0 if group is None else group.metadata_hash,
        )
        self.manager.replay(record)
        return await self._write(group_id, [record]), record.epoch

    # ---- persistence ----

    def _persist(
        self, group_id: str, records: list[ShareRecord], callback: Callable[[ErrorCode], None]
    ) -> None:
        self._writes.append(group_id, records, callback)

    def _loaded(self, group_id: str) -> None:
        self.manager.on_loaded(group_id, self.timeouts(group_id)[0])

    # ---- timers ----

    def _expire(self) -> None:
        for fired in self.manager.expire():
            log.info(
                "share group %s: member %s removed (session timeout)",
                fired.group_id,
                fired.member_id,
            )
            self._persist(fired.group_id, fired.records, lambda _error: None)
