"""Heartbeat, session expiry and pending-member expiry.

Kafka's ``handleHeartbeat``, ``completeAndScheduleNextHeartbeatExpiration``,
``onExpireHeartbeat``, ``addPendingMemberExpiration`` and
``onExpirePendingMember``, as a mixin of
:class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

Invariants:

- A member has at most one heartbeat timer (``member.heartbeat_timer``), on the
  coordinator's :class:`~broker_py.utils.time.Time`; each heartbeat, completed join
  or sync and member's offset commit replaces it. When it fires, the member is
  removed and the group rebalances (or tries to complete the rebalance under way).
- A member waiting in JoinGroup or SyncGroup is not expired, since it cannot
  heartbeat meanwhile, except a new member, timed by the new-member join timeout.
- A timer that fires for a member no longer in the group (or for a Dead group) does
  nothing.
- A pending member (MEMBER_ID_REQUIRED handed out, not joined yet) expires after the
  session timeout it asked with; at most one timer per pending member
  (``group.pending_member_timers``).
- A heartbeat is ILLEGAL_GENERATION for another generation, UNKNOWN_MEMBER_ID to an
  Empty group and REBALANCE_IN_PROGRESS (still counted) while PreparingRebalance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_py.coordinator.group.group_metadata import DEAD, EMPTY, PREPARING, Group, MemberMetadata
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.group.protocol_migration import ProtocolMigration
    from broker_py.utils.time import Time

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")


class HeartbeatMixin:
    """Heartbeats and the session and pending-member timers; uses the shell's lookups
    and removal."""

    # The shell's (GroupCoordinator.__init__/start).
    manager: GroupMetadataManager
    migration: ProtocolMigration
    time: Time

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self.validate_group_status(group_id, ApiKey.HEARTBEAT)
        if error is not None:
            return error
        if self.migration.serves(group_id):
            return self.migration.heartbeat(group_id, member_id, group_instance_id, generation_id)
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat_expiration(group, group.get(member_id))
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _schedule_heartbeat_expiration(
        self, group: Group, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """The member's next heartbeat is due within ``timeout_ms`` (its session timeout)."""
        member.cancel_heartbeat()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.time.call_later(
            timeout / 1000, self._on_expire_heartbeat, group, member
        )

    def _on_expire_heartbeat(self, group: Group, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(DEAD) or group.members.get(member.member_id) is not member:
            return
        # Members waiting for a rebalance are not expected to heartbeat meanwhile,
        # except new ones, which have the new-member timeout instead.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info(
            "member %s in group %s has failed, removing it from the group",
            member.member_id,
            group.group_id,
        )
        self._remove_member_and_update_group(
            group, member, f"removing member {member.member_id} on heartbeat expiration"
        )

    def _add_pending_member_expiration(self, group: Group, member_id: str, timeout_ms: int) -> None:
        old = group.pending_member_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.pending_member_timers[member_id] = self.time.call_later(
            timeout_ms / 1000, self._on_expire_pending_member, group, member_id
        )

    def _on_expire_pending_member(self, group: Group, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if not group.is_(DEAD) and group.is_pending_member(member_id):
            log.info(
                "pending member %s in group %s has been removed after session timeout expiration",
                member_id,
                group.group_id,
            )
            self._remove_pending_member_and_update_group(group, member_id)
