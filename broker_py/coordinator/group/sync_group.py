"""SyncGroup: the leader hands out the assignment, every member gets its own.

Kafka's ``handleSyncGroup``, ``setAndPropagateAssignment``,
``resetAndPropagateAssignmentError`` and the pending-sync expiry
(``schedulePendingSync``, ``removePendingSyncMember``, ``onExpirePendingSync``), as a
mixin of :class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

Invariants:

- Only in CompletingRebalance does a SyncGroup wait; a member has at most one waiting
  (``member.sync_future``): a newer one answers the older REBALANCE_IN_PROGRESS.
- The leader's assignment (empty for every member it left out) is written to
  ``__consumer_offsets`` before any member sees it. The group turns Stable only if
  that write succeeded while it is still CompletingRebalance in that generation;
  if it failed, every waiting member gets the error and the group rebalances.
- Answering a waiting SyncGroup restarts that member's session timer.
- ``group.pending_sync_members`` are the members of the generation that have not sent
  SyncGroup. One rebalance timeout after the join completed, those still pending
  are removed and the group rebalances. The timer (``group.sync_timer``) is cancelled
  once none is pending or the group is Dead, Empty or PreparingRebalance, and does
  nothing when it fires for another generation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from broker_py.coordinator.group.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    SyncGroupResult,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.group.protocol_migration import ProtocolMigration
    from broker_py.utils.time import Time

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")


@dataclasses.dataclass(frozen=True, slots=True)
class SyncGroupParams:
    """A SyncGroup as the coordinator takes it (``protocol_type`` and ``protocol_name``
    None before v5, ``group_instance_id`` None before v3: not checked)."""

    group_id: str
    generation_id: int
    member_id: str
    protocol_type: str | None
    protocol_name: str | None
    group_instance_id: str | None
    # member id -> its assignment (the leader's SyncGroup; empty from the others)
    assignments: dict[str, bytes]


class SyncGroupMixin:
    """SyncGroup handling and the pending-sync expiry; uses the shell's lookups and
    removal, :mod:`.rebalance` and :mod:`.heartbeat`."""

    # The shell's (GroupCoordinator.__init__/start).
    _loop: asyncio.AbstractEventLoop | None
    manager: GroupMetadataManager
    migration: ProtocolMigration
    time: Time

    async def sync_group(self, params: SyncGroupParams) -> SyncGroupResult:
        assert self._loop is not None, "start() first"
        future: asyncio.Future[SyncGroupResult] = self._loop.create_future()
        self._handle_sync_group(params, future)
        return await future

    def _handle_sync_group(
        self, params: SyncGroupParams, future: asyncio.Future[SyncGroupResult]
    ) -> None:
        member_id, generation_id = params.member_id, params.generation_id
        error = self.validate_group_status(params.group_id, ApiKey.SYNC_GROUP)
        if error is not None:
            future.set_result(SyncGroupResult(error))
            return
        if self.migration.serves(params.group_id):
            future.set_result(self.migration.sync(params))
            return
        group = self.manager.get_group(params.group_id)
        if group is None:
            future.set_result(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync_group(group, params)
        if error is not None:
            future.set_result(SyncGroupResult(error))
        elif group.is_(EMPTY):
            future.set_result(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(PREPARING):
            future.set_result(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(COMPLETING):
            member = group.get(member_id)
            if member.sync_future is not None and member.sync_future is not future:
                member.complete_sync(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.sync_future = future
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "assignment received from leader %s for group %s for generation %d; "
                    "the group has %d members",
                    member_id,
                    group.group_id,
                    group.generation_id,
                    group.size,
                )
                assignment = dict(params.assignments)
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning(
                        "empty assignments for members %s of group %s generation %d",
                        missing,
                        group.group_id,
                        group.generation_id,
                    )
                for m in missing:
                    assignment[m] = b""

                def stored(error: ErrorCode) -> None:
                    # Only the generation that wrote it may take it (the group may have
                    # moved on while the write waited for its acks).
                    if group.is_(COMPLETING) and generation_id == group.generation_id:
                        if error:
                            self._reset_and_propagate_assignment_error(group, error)
                            self._maybe_prepare_rebalance(
                                group,
                                f"error {error.name} storing the assignment of group "
                                f"{group.group_id}",
                            )
                        else:
                            self._set_and_propagate_assignment(group, assignment)
                            group.transition_to(STABLE)

                self.manager.store_group(group, assignment, stored)
        elif group.is_(STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            future.set_result(
                SyncGroupResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            self._schedule_heartbeat_expiration(group, member)

    def _validate_sync_group(self, group: Group, params: SyncGroupParams) -> ErrorCode | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, params.member_id, params.group_instance_id)
        if error is not None:
            return error
        if params.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if params.protocol_type is not None and params.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if params.protocol_name is not None and params.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        protocol_type, protocol_name = (
            (group.protocol_type, group.protocol_name) if error == ErrorCode.NONE else (None, None)
        )
        for member in group.members.values():
            if member.complete_sync(
                SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
            ):
                # Expirations are ignored while a member waits in SyncGroup; start anew.
                self._schedule_heartbeat_expiration(group, member)

    def _schedule_pending_sync(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        group.sync_timer = self.time.call_later(
            group.rebalance_timeout_ms / 1000,
            self._on_expire_pending_sync,
            group,
            group.generation_id,
        )

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _maybe_complete_sync_expiration(self, group: Group) -> None:
        if group.sync_timer is not None and (
            not group.pending_sync_members or group.state in (DEAD, EMPTY, PREPARING)
        ):
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_expire_pending_sync(self, group: Group, generation_id: int) -> None:
        group.sync_timer = None
        if generation_id != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync_members:
            pending = sorted(group.pending_sync_members)
            for member_id in pending:
                self._remove_member(group, member_id)
            log.info(
                "group %s removed members who did not send SyncGroup: %s", group.group_id, pending
            )
            self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")
