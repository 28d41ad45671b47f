"""JoinGroup: how a member enters the group or rejoins it.

Kafka's ``handleJoinGroup``, ``doNewMemberJoinGroup``, ``doCurrentMemberJoinGroup``,
``addMemberAndRebalance``, ``updateStaticMemberAndRebalance`` and
``updateMemberAndRebalance``, as a mixin of
:class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

A JoinGroup waits on a future the coordinator completes: at once with an error, with
MEMBER_ID_REQUIRED, or for a member that rejoins a group without changing anything;
otherwise when the rebalance it joined completes (:mod:`.rebalance`).

Invariants:

- A new member's id is ``<group instance id or client id>-<uuid4>``. From JoinGroup v4
  on, a dynamic member gets it with MEMBER_ID_REQUIRED and is a *pending member* until
  it joins with it (or its session timeout passes, :mod:`.heartbeat`).
- A member id the group does not know is UNKNOWN_MEMBER_ID (unless it is pending); a
  static member's old id is FENCED_INSTANCE_ID once its instance rejoined.
- A member is admitted only while the group has room under ``group.max.size``
  (during PreparingRebalance counting the members that rejoined); one refused is
  removed and gets GROUP_MAX_SIZE_REACHED.
- A new member expires after ``new_member_join_timeout_ms``, not its session timeout,
  until its JoinGroup is answered: it cannot heartbeat before.
- During CompletingRebalance or Stable, a rejoin with unchanged protocols is answered
  with the current generation at once (in Stable not the leader's: it forces a
  rebalance); any other rejoin goes through a rebalance.
- Every JoinGroup to a PreparingRebalance group ends with an attempt to complete the
  rebalance.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import TYPE_CHECKING

from broker_py.coordinator.group.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    JoinGroupResult,
    MemberMetadata,
    Protocols,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.group.protocol_migration import ProtocolMigration
    from broker_py.utils.time import Time

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")


@dataclasses.dataclass(frozen=True, slots=True)
class JoinGroupParams:
    """A JoinGroup as the coordinator takes it: the request's fields, with what its
    version implies (``require_known_member_id``: v4+ for a dynamic member;
    ``support_skipping_assignment``: v9+; ``rebalance_timeout_ms`` is the session
    timeout before v1) and the client's id and host."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    support_skipping_assignment: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    # The client's reason for joining (v8+); None: not provided.
    reason: str | None = None

    @property
    def reason_text(self) -> str:
        return self.reason or "not provided"


class JoinGroupMixin:
    """JoinGroup handling; uses the shell's lookups and removal, :mod:`.rebalance`
    and :mod:`.heartbeat`."""

    # The shell's (GroupCoordinator.__init__/start).
    _loop: asyncio.AbstractEventLoop | None
    config: BrokerConfig
    manager: GroupMetadataManager
    migration: ProtocolMigration
    time: Time

    # A new member's JoinGroup is answered UNKNOWN_MEMBER_ID after this long at most.
    new_member_join_timeout_ms = 5 * 60 * 1000

    async def join_group(self, params: JoinGroupParams) -> JoinGroupResult:
        assert self._loop is not None, "start() first"
        future: asyncio.Future[JoinGroupResult] = self._loop.create_future()
        self._handle_join_group(params, future)
        return await future

    def _handle_join_group(
        self, params: JoinGroupParams, future: asyncio.Future[JoinGroupResult]
    ) -> None:
        member_id = params.member_id

        def respond(result: JoinGroupResult) -> None:
            if not future.done():
                future.set_result(result)

        error = self.validate_group_status(params.group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            return respond(JoinGroupResult(member_id, error))
        if (
            not self.config["group.min.session.timeout.ms"]
            <= params.session_timeout_ms
            <= self.config["group.max.session.timeout.ms"]
        ):
            return respond(JoinGroupResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
        if self.migration.serves(params.group_id, joining=True):
            # A consumer group with members: served as a classic member inside it.
            served = self.migration.join(params)
            if isinstance(served, asyncio.Future):
                served.add_done_callback(lambda f: respond(f.result()))
            else:
                respond(served)
            return None
        is_unknown_member = member_id == ""
        group = self.manager.get_group(params.group_id)
        if group is None:
            if not is_unknown_member:
                return respond(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            group = self.manager.add_group(Group(params.group_id, self.time.milliseconds()))
        if not self._accept_joining_member(group, member_id):
            self._remove_member(group, member_id)
            respond(JoinGroupResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._do_new_member_join_group(group, params, future)
        else:
            self._do_current_member_join_group(group, params, future)
        if group.is_(PREPARING):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config["group.max.size"]
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_awaiting_join() < max_size
        return group.has(member_id) or group.size < max_size

    def _do_new_member_join_group(
        self, group: Group, params: JoinGroupParams, future: asyncio.Future[JoinGroupResult]
    ) -> None:
        if group.is_(DEAD):
            future.set_result(JoinGroupResult("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(
            params.protocol_type, [name for name, _ in params.protocols]
        ):
            future.set_result(JoinGroupResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        group_instance_id = params.group_instance_id
        new_member_id = (
            f"{group_instance_id if group_instance_id is not None else params.client_id}"
            f"-{uuid.uuid4()}"
        )
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoins with an unknown member id in state %s; "
                    "replacing member %s",
                    group_instance_id,
                    group.group_id,
                    group.state,
                    old_member_id,
                )
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, params, future
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, params, future)
        elif params.require_known_member_id:
            log.info(
                "new member of group %s in state %s gets member id %s",
                group.group_id,
                group.state,
                new_member_id,
            )
            group.pending_members.add(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, params.session_timeout_ms)
            future.set_result(JoinGroupResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, params, future)

    def _do_current_member_join_group(
        self, group: Group, params: JoinGroupParams, future: asyncio.Future[JoinGroupResult]
    ) -> None:
        member_id = params.member_id
        protocols = params.protocols
        reason = params.reason_text
        if group.is_(DEAD):
            future.set_result(JoinGroupResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(params.protocol_type, [name for name, _ in protocols]):
            future.set_result(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if params.group_instance_id is not None:
                future.set_result(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            log.info(
                "pending member %s joins group %s in state %s",
                member_id,
                group.group_id,
                group.state,
            )
            self._add_member_and_rebalance(group, member_id, params, future)
            return
        error = self._validate_current_member(group, member_id, params.group_instance_id)
        if error is not None:
            future.set_result(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        if group.is_(PREPARING):
            self._update_member_and_rebalance(
                group,
                member,
                params,
                future,
                f"member {member_id} joining group during {group.state}; client reason: {reason}",
            )
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # The member lost the JoinGroup response: the current generation again.
                future.set_result(
                    self._join_result(group, member, include_members=group.is_leader(member_id))
                )
            else:
                self._update_member_and_rebalance(
                    group,
                    member,
                    params,
                    future,
                    f"updating metadata for member {member_id} during {group.state}; "
                    f"client reason: {reason}",
                )
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance: it may have seen metadata change.
                self._update_member_and_rebalance(
                    group,
                    member,
                    params,
                    future,
                    f"member {member_id} rejoining group during {group.state}; "
                    f"client reason: {reason}",
                )
            else:
                future.set_result(self._join_result(group, member, include_members=False))
        else:
            log.warning(
                "member %s rejoins group %s in unexpected state %s",
                member_id,
                group.group_id,
                group.state,
            )
            future.set_result(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _join_result(
        group: Group, member: MemberMetadata, include_members: bool, skip_assignment: bool = False
    ) -> JoinGroupResult:
        return JoinGroupResult(
            member_id=member.member_id,
            error=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            skip_assignment=skip_assignment,
            members=group.current_member_metadata() if include_members else [],
        )

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        params: JoinGroupParams,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        member = MemberMetadata(
            member_id,
            params.group_instance_id,
            params.client_id,
            params.client_host,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            params.protocol_type,
            params.protocols,
        )
        member.is_new = True
        # A new member while the first rebalance waits lets it wait a little longer.
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        # New members cannot heartbeat before their JoinGroup is answered, so their
        # expiry is the (long) new-member timeout, not the session timeout.
        self._schedule_heartbeat_expiration(group, member, self.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id "
            f"{params.group_instance_id}; client reason: {params.reason_text}",
        )

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_member_id: str,
        new_member_id: str,
        params: JoinGroupParams,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        group_instance_id = params.group_instance_id
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat_expiration(group, member)
        old_protocols = member.protocols
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(
            member,
            params.protocols,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            future,
        )
        if group.is_(STABLE):
            if group.select_protocol() == group.protocol_name:
                # Nothing the assignment depends on changed: persist the new member id only.
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def stored(error: ErrorCode) -> None:
                    if error:
                        log.warning(
                            "failed to persist group %s after static member rejoin: %s",
                            group.group_id,
                            error.name,
                        )
                        group.update_member(
                            member,
                            old_protocols,
                            old_rebalance_timeout_ms,
                            old_session_timeout_ms,
                            None,
                        )
                        old = group.replace_static_member(
                            group_instance_id, new_member_id, old_member_id
                        )
                        self._schedule_heartbeat_expiration(group, old)
                        if not future.done():
                            future.set_result(
                                JoinGroupResult(
                                    "",
                                    error,
                                    group.generation_id,
                                    group.protocol_type,
                                    group.protocol_name,
                                    current_leader,
                                )
                            )
                    elif params.support_skipping_assignment:
                        is_leader = group.is_leader(new_member_id)
                        member.complete_join(
                            self._join_result(
                                group, member, include_members=is_leader, skip_assignment=is_leader
                            )
                        )
                    else:
                        # The old leader id is returned so this member does not run a
                        # trivial assignment a Stable group would not broadcast anyway.
                        result = self._join_result(group, member, include_members=False)
                        result.leader_id = current_leader
                        member.complete_join(result)

                self.manager.store_group(group, assignment, stored)
            else:
                self._maybe_prepare_rebalance(
                    group,
                    f"static member {new_member_id} ({group_instance_id}) rejoined with other "
                    "protocols",
                )
        elif group.is_(COMPLETING):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(
                group,
                f"static member {new_member_id} ({group_instance_id}) rejoined; "
                f"client reason: {params.reason_text}",
            )

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: MemberMetadata,
        params: JoinGroupParams,
        future: asyncio.Future[JoinGroupResult],
        reason: str,
    ) -> None:
        group.update_member(
            member, params.protocols, params.rebalance_timeout_ms, params.session_timeout_ms, future
        )
        self._maybe_prepare_rebalance(group, reason)
