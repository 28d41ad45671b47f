"""LeaveGroup: members leave, one per request before v3, in a batch from v3 on.

Kafka's ``handleLeaveGroup`` and ``removeCurrentMemberFromGroup``, as a mixin of
:class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

Invariants:

- A member that leaves is removed at once (its pending JoinGroup answered
  UNKNOWN_MEMBER_ID, its timers cancelled); a Stable or CompletingRebalance group
  then rebalances, a PreparingRebalance one tries to complete its rebalance.
- An empty member id with a group instance id removes that static member
  (administrative removal). A pending member stops being pending, which may let a
  rebalance that waited for it complete.
- Each member gets its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); a
  top-level error comes with no per-member errors.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_py.coordinator.group.group_metadata import DEAD, Group
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.group.protocol_migration import ProtocolMigration

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")


class LeaveGroupMixin:
    """LeaveGroup handling; uses the shell's lookups and removal."""

    # The shell's (GroupCoordinator.__init__/start).
    manager: GroupMetadataManager
    migration: ProtocolMigration

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """``members``: (member_id, group_instance_id, reason). Returns the top-level
        error and one error per member (none when the top-level error is set)."""
        error = self.validate_group_status(group_id, ApiKey.LEAVE_GROUP)
        if error is not None:
            return error, []
        if self.migration.serves(group_id):
            return self.migration.leave(group_id, members)
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, group_instance_id, reason in members:
            reason = reason or "not provided"
            if member_id == "":
                # Administrative removal of a static member by its instance id.
                current = group.current_static_member_id(group_instance_id)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_current_member_from_group(group, current, reason)
                    errors.append(ErrorCode.NONE)
            elif group.is_pending_member(member_id):
                log.info(
                    "pending member %s has left group %s through LeaveGroup",
                    member_id,
                    group.group_id,
                )
                self._remove_pending_member_and_update_group(group, member_id)
                errors.append(ErrorCode.NONE)
            else:
                error = self._validate_current_member(group, member_id, group_instance_id)
                if error is None:
                    self._remove_current_member_from_group(group, member_id, reason)
                    error = ErrorCode.NONE
                errors.append(error)
        return ErrorCode.NONE, errors

    def _remove_current_member_from_group(self, group: Group, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        log.info(
            "member %s has left group %s through LeaveGroup; client reason: %s",
            member,
            group.group_id,
            reason,
        )
