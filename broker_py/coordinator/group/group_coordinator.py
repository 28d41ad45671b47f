"""The classic group coordinator: membership, rebalances and committed offsets.

This follows Kafka's ``GroupCoordinator`` (the classic protocol, before KIP-848) rule
for rule; the method names are Kafka's. Everything runs on the event loop, so each
request handler sees and changes the group state without interleaving; only
JoinGroup and SyncGroup wait, on a future the coordinator completes later.

Rebalance, in short:

1. A join (new member, changed metadata, the leader rejoining) or a member leaving
   or expiring moves the group to PreparingRebalance. The first rebalance of an
   Empty group waits ``group.initial.rebalance.delay.ms``, extended while new
   members keep arriving, up to the rebalance timeout (InitialDelayedJoin); others
   complete once every member has rejoined, or when the rebalance timeout expires,
   dropping the (dynamic) members that did not rejoin (DelayedJoin).
2. Completion bumps the generation, selects the protocol and answers every pending
   JoinGroup: the leader gets all members' metadata. The group is now
   CompletingRebalance, and every member must send SyncGroup within the rebalance
   timeout or be removed (DelayedSync).
3. The leader's SyncGroup carries the assignments: they are written to
   ``__consumer_offsets`` and handed to every member that waits; the group is Stable.

Members are expected to heartbeat within ``session.timeout.ms``; one that does not is
removed and the group rebalances. Timers are ``loop.call_later`` handles kept on the
group and its members; :meth:`GroupCoordinator.stop` cancels them all and answers
every waiting request with NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable

from logstore.protocol.error_codes import ErrorCode
from broker_py.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    DelayedJoin,
    Group,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncGroupResult,
)
from broker_py.coordinator.group.group_metadata_manager import OFFSETS_TOPIC, GroupMetadataManager, now_ms
from logstore.protocol.api_keys import ApiKey

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupOverview", "GroupSummary", "MemberSummary"]

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

Protocols = list[tuple[str, bytes]]
TopicPartition = tuple[str, int]


class MemberSummary:
    __slots__ = ("assignment", "client_host", "client_id", "group_instance_id", "member_id", "metadata")

    def __init__(self, member: MemberMetadata, metadata: bytes = b"", assignment: bytes = b"") -> None:
        self.member_id = member.member_id
        self.group_instance_id = member.group_instance_id
        self.client_id = member.client_id
        self.client_host = member.client_host
        self.metadata = metadata
        self.assignment = assignment


class GroupSummary:
    __slots__ = ("members", "protocol", "protocol_type", "state")

    def __init__(self, state: str, protocol_type: str, protocol: str, members: list[MemberSummary]) -> None:
        self.state = state
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.members = members


class GroupOverview:
    __slots__ = ("group_id", "protocol_type", "state")

    def __init__(self, group_id: str, protocol_type: str, state: str) -> None:
        self.group_id = group_id
        self.protocol_type = protocol_type
        self.state = state


DEAD_GROUP = GroupSummary(str(DEAD), "", "", [])
NO_GROUP = GroupSummary("", "", "", [])


class GroupCoordinator:
    # A new member's JoinGroup is answered UNKNOWN_MEMBER_ID after this long at most.
    new_member_join_timeout_ms = 5 * 60 * 1000

    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.manager = GroupMetadataManager(broker)
        self.active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiration_task: asyncio.Task[None] | None = None

    # ---- lifecycle ----

    async def start(self) -> None:
        """Loads every group and offset from ``__consumer_offsets`` (when it exists)
        and starts the offset expiration task. The topic is created on first use."""
        self._loop = asyncio.get_running_loop()
        await self.manager.load()
        self.active = True
        self._expiration_task = asyncio.create_task(self._expiration_loop(), name="group-offset-expiration")

    async def stop(self) -> None:
        self.active = False
        if self._expiration_task is not None:
            self._expiration_task.cancel()
            await asyncio.gather(self._expiration_task, return_exceptions=True)
            self._expiration_task = None
        for group in self.manager.current_groups():
            self._cancel_timers(group)
            for member in group.members.values():
                member.complete_join(JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                member.complete_sync(SyncGroupResult(ErrorCode.NOT_COORDINATOR))

    @property
    def groups(self) -> dict[str, Group]:
        return self.manager.groups

    def ensure_offsets_topic(self) -> None:
        self.manager.ensure_offsets_topic()

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    async def _expiration_loop(self) -> None:
        interval_ms = _config_or(self.config, "offsets.retention.check.interval.ms", 600_000)
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                self.manager.expire_offsets()
            except Exception:
                log.exception("offset expiration")

    def _cancel_timers(self, group: Group) -> None:
        if group.delayed_join is not None:
            group.delayed_join.cancel()
            group.delayed_join = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        for timer in group.pending_member_timers.values():
            timer.cancel()
        group.pending_member_timers.clear()
        for member in group.members.values():
            member.cancel_heartbeat()

    # ---- validation ----

    def validate_group_status(self, group_id: str | None, api: ApiKey) -> ErrorCode | None:
        if group_id is None:
            return ErrorCode.INVALID_GROUP_ID
        if api not in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS) and not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None

    @staticmethod
    def _validate_current_member(group: Group, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # ---- JoinGroup ----

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        reason: str | None = None,
    ) -> JoinGroupResult:
        assert self._loop is not None, "start() first"
        future: asyncio.Future[JoinGroupResult] = self._loop.create_future()
        self._handle_join_group(
            group_id,
            member_id,
            group_instance_id,
            require_known_member_id,
            support_skipping_assignment,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
            future,
            reason or "not provided",
        )
        return await future

    def _handle_join_group(
        self,
        group_id,
        member_id,
        group_instance_id,
        require_known_member_id,
        support_skipping_assignment,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocol_type,
        protocols,
        future,
        reason,
    ) -> None:
        def respond(result: JoinGroupResult) -> None:
            if not future.done():
                future.set_result(result)

        error = self.validate_group_status(group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            return respond(JoinGroupResult(member_id, error))
        if not self.config["group.min.session.timeout.ms"] <= session_timeout_ms <= self.config["group.max.session.timeout.ms"]:
            return respond(JoinGroupResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
        is_unknown_member = member_id == ""
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown_member:
                return respond(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            group = self.manager.add_group(Group(group_id, now_ms()))
        if not self._accept_joining_member(group, member_id):
            self._remove_member(group, member_id)
            respond(JoinGroupResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._do_new_member_join_group(
                group, group_instance_id, require_known_member_id, support_skipping_assignment, client_id,
                client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, future, reason,
            )  # fmt: skip
        else:
            self._do_current_member_join_group(
                group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, future, reason,
            )  # fmt: skip
        if group.is_(PREPARING):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config["group.max.size"]
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or group.num_awaiting_join() < max_size
        return group.has(member_id) or group.size < max_size

    def _do_new_member_join_group(
        self, group, group_instance_id, require_known_member_id, support_skipping_assignment, client_id,
        client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, future, reason,
    ) -> None:  # fmt: skip
        if group.is_(DEAD):
            future.set_result(JoinGroupResult("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            future.set_result(JoinGroupResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoins with an unknown member id in state %s; "
                    "replacing member %s",
                    group_instance_id, group.group_id, group.state, old_member_id,
                )  # fmt: skip
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, group_instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, future, reason, support_skipping_assignment,
                )  # fmt: skip
            else:
                self._add_member_and_rebalance(
                    rebalance_timeout_ms, session_timeout_ms, new_member_id, group_instance_id, client_id,
                    client_host, protocol_type, protocols, group, future, reason,
                )  # fmt: skip
        elif require_known_member_id:
            log.info("new member of group %s in state %s gets member id %s", group.group_id, group.state, new_member_id)
            group.pending_members.add(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            future.set_result(JoinGroupResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(
                rebalance_timeout_ms, session_timeout_ms, new_member_id, None, client_id, client_host,
                protocol_type, protocols, group, future, reason,
            )  # fmt: skip

    def _do_current_member_join_group(
        self, group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
        session_timeout_ms, protocol_type, protocols, future, reason,
    ) -> None:  # fmt: skip
        if group.is_(DEAD):
            future.set_result(JoinGroupResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            future.set_result(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                future.set_result(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            log.info("pending member %s joins group %s in state %s", member_id, group.group_id, group.state)
            self._add_member_and_rebalance(
                rebalance_timeout_ms, session_timeout_ms, member_id, None, client_id, client_host,
                protocol_type, protocols, group, future, reason,
            )  # fmt: skip
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            future.set_result(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        if group.is_(PREPARING):
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future,
                f"member {member_id} joining group during {group.state}; client reason: {reason}",
            )  # fmt: skip
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # The member lost the JoinGroup response: the current generation again.
                future.set_result(self._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future,
                    f"updating metadata for member {member_id} during {group.state}; client reason: {reason}",
                )  # fmt: skip
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance: it may have seen metadata change.
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future,
                    f"member {member_id} rejoining group during {group.state}; client reason: {reason}",
                )  # fmt: skip
            else:
                future.set_result(self._join_result(group, member, include_members=False))
        else:
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id, group.state)
            future.set_result(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _join_result(group: Group, member: MemberMetadata, include_members: bool, skip_assignment: bool = False) -> JoinGroupResult:
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
        self, rebalance_timeout_ms, session_timeout_ms, member_id, group_instance_id, client_id, client_host,
        protocol_type, protocols, group, future, reason,
    ) -> None:  # fmt: skip
        member = MemberMetadata(
            member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols,
        )  # fmt: skip
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
            group, f"adding new member {member_id} with group instance id {group_instance_id}; client reason: {reason}"
        )

    def _update_static_member_and_rebalance(
        self, group, old_member_id, new_member_id, group_instance_id, protocols, rebalance_timeout_ms,
        session_timeout_ms, future, reason, support_skipping_assignment,
    ) -> None:  # fmt: skip
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat_expiration(group, member)
        old_protocols = member.protocols
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        if group.is_(STABLE):
            if group.select_protocol() == group.protocol_name:
                # Nothing the assignment depends on changed: persist the new member id only.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                error = self.manager.store_group(group, assignment)
                if error:
                    log.warning("failed to persist group %s after static member rejoin: %s", group.group_id, error.name)
                    group.update_member(member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None)
                    old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                    self._schedule_heartbeat_expiration(group, old)
                    if not future.done():
                        future.set_result(
                            JoinGroupResult(
                                "", error, group.generation_id, group.protocol_type, group.protocol_name, current_leader
                            )
                        )
                elif support_skipping_assignment:
                    is_leader = group.is_leader(new_member_id)
                    member.complete_join(self._join_result(group, member, include_members=is_leader, skip_assignment=is_leader))
                else:
                    # The old leader id is returned so this member does not run a
                    # trivial assignment a Stable group would not broadcast anyway.
                    result = self._join_result(group, member, include_members=False)
                    result.leader_id = current_leader
                    member.complete_join(result)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {new_member_id} ({group_instance_id}) rejoined with other protocols"
                )
        elif group.is_(COMPLETING):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {new_member_id} ({group_instance_id}) rejoined; client reason: {reason}")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future, reason) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        self._maybe_prepare_rebalance(group, reason)

    # ---- rebalance ----

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            # Members waiting in SyncGroup must rejoin.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s-%d) (reason: %s)",
            group.group_id, group.generation_id, OFFSETS_TOPIC, self.partition_for(group.group_id), reason,
        )  # fmt: skip
        if initial:
            delay = self.config["group.initial.rebalance.delay.ms"]
            self._watch_join(group, DelayedJoin(True, delay, max(group.rebalance_timeout_ms - delay, 0)))
        else:
            self._watch_join(group, DelayedJoin(False, group.rebalance_timeout_ms))

    def _watch_join(self, group: Group, op: DelayedJoin) -> None:
        """Installs ``op`` as the group's pending join completion (tryCompleteElseWatch)."""
        assert self._loop is not None
        if group.delayed_join is not None:
            group.delayed_join.cancel()
        group.delayed_join = op
        op.timer = self._loop.call_later(op.delay_ms / 1000, self._on_join_expired, group, op)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        op = group.delayed_join
        if op is not None and not op.initial and group.has_all_members_joined():
            self._complete_delayed_join(group, op)

    def _on_join_expired(self, group: Group, op: DelayedJoin) -> None:
        if group.delayed_join is not op:
            return
        op.timer = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            configured = self.config["group.initial.rebalance.delay.ms"]
            delay = min(configured, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._watch_join(group, DelayedJoin(True, delay, remaining))
        else:
            self._complete_delayed_join(group, op)

    def _complete_delayed_join(self, group: Group, op: DelayedJoin) -> None:
        op.cancel()
        group.delayed_join = None
        self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        not_rejoined = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        if not_rejoined:
            log.info("group %s removed dynamic members who did not rejoin: %s", group.group_id, [m.member_id for m in not_rejoined])
            for member in not_rejoined:
                self._remove_member(group, member.member_id)
        if group.is_(DEAD):
            log.info("group %s is dead, skipping rebalance stage", group.group_id)
        elif not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or for
            # their sessions to expire) one more rebalance timeout.
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._watch_join(group, DelayedJoin(False, group.rebalance_timeout_ms))
        else:
            group.init_next_generation(now_ms())
            if group.is_(EMPTY):
                log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
                error = self.manager.store_group(group, {})
                if error:
                    log.warning("failed to write empty metadata for group %s: %s", group.group_id, error.name)
            else:
                log.info(
                    "stabilized group %s generation %d (%s-%d) with %d members",
                    group.group_id, group.generation_id, OFFSETS_TOPIC, self.partition_for(group.group_id), group.size,
                )  # fmt: skip
                for member in list(group.members.values()):
                    member.complete_join(self._join_result(group, member, include_members=group.is_leader(member.member_id)))
                    self._schedule_heartbeat_expiration(group, member)
                    member.is_new = False
                    group.pending_sync_members.add(member.member_id)
                self._schedule_pending_sync(group)

    # ---- SyncGroup ----

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        assert self._loop is not None, "start() first"
        future: asyncio.Future[SyncGroupResult] = self._loop.create_future()
        self._handle_sync_group(group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id, assignments, future)
        return await future

    def _handle_sync_group(self, group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id, assignments, future) -> None:
        error = self.validate_group_status(group_id, ApiKey.SYNC_GROUP)
        if error is not None:
            future.set_result(SyncGroupResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            future.set_result(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync_group(group, generation_id, member_id, protocol_type, protocol_name, group_instance_id)
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
                    "assignment received from leader %s for group %s for generation %d; the group has %d members",
                    member_id, group.group_id, group.generation_id, group.size,
                )  # fmt: skip
                assignment = dict(assignments)
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning("empty assignments for members %s of group %s generation %d", missing, group.group_id, group.generation_id)
                for m in missing:
                    assignment[m] = b""
                error = self.manager.store_group(group, assignment)
                if group.is_(COMPLETING) and generation_id == group.generation_id:
                    if error:
                        self._reset_and_propagate_assignment_error(group, error)
                        self._maybe_prepare_rebalance(group, f"error {error.name} storing the assignment of group {group.group_id}")
                    else:
                        self._set_and_propagate_assignment(group, assignment)
                        group.transition_to(STABLE)
        elif group.is_(STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            future.set_result(SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat_expiration(group, member)

    def _validate_sync_group(self, group, generation_id, member_id, protocol_type, protocol_name, group_instance_id) -> ErrorCode | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
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
        protocol_type, protocol_name = (group.protocol_type, group.protocol_name) if error == ErrorCode.NONE else (None, None)
        for member in group.members.values():
            if member.complete_sync(SyncGroupResult(error, protocol_type, protocol_name, member.assignment)):
                # Expirations are ignored while a member waits in SyncGroup; start anew.
                self._schedule_heartbeat_expiration(group, member)

    def _schedule_pending_sync(self, group: Group) -> None:
        assert self._loop is not None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        group.sync_timer = self._loop.call_later(
            group.rebalance_timeout_ms / 1000, self._on_expire_pending_sync, group, group.generation_id
        )

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _maybe_complete_sync_expiration(self, group: Group) -> None:
        if group.sync_timer is not None and (not group.pending_sync_members or group.state in (DEAD, EMPTY, PREPARING)):
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
            log.info("group %s removed members who did not send SyncGroup: %s", group.group_id, pending)
            self._prepare_rebalance(group, f"removing {pending} on pending sync request expiration")

    # ---- Heartbeat and session expiry ----

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self.validate_group_status(group_id, ApiKey.HEARTBEAT)
        if error is not None:
            return error
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

    def _schedule_heartbeat_expiration(self, group: Group, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """The member's next heartbeat is due within ``timeout_ms`` (its session timeout)."""
        assert self._loop is not None
        member.cancel_heartbeat()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._loop.call_later(timeout / 1000, self._on_expire_heartbeat, group, member)

    def _on_expire_heartbeat(self, group: Group, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(DEAD) or group.members.get(member.member_id) is not member:
            return
        # Members waiting for a rebalance are not expected to heartbeat meanwhile,
        # except new ones, which have the new-member timeout instead.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s in group %s has failed, removing it from the group", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"removing member {member.member_id} on heartbeat expiration")

    def _add_pending_member_expiration(self, group: Group, member_id: str, timeout_ms: int) -> None:
        assert self._loop is not None
        old = group.pending_member_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.pending_member_timers[member_id] = self._loop.call_later(
            timeout_ms / 1000, self._on_expire_pending_member, group, member_id
        )

    def _on_expire_pending_member(self, group: Group, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if not group.is_(DEAD) and group.is_pending_member(member_id):
            log.info("pending member %s in group %s has been removed after session timeout expiration", member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)

    def _remove_member(self, group: Group, member_id: str) -> None:
        """Removes a member (or pending member) and its timers; no rebalance."""
        member = group.remove(member_id)
        if member is not None:
            member.cancel_heartbeat()
            # Nobody answers a removed member's SyncGroup any more.
            member.complete_sync(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def _remove_member_and_update_group(self, group: Group, member: MemberMetadata, reason: str) -> None:
        # A new member may time out while its JoinGroup is pending: answer it, so a
        # client still there rejoins.
        member.complete_join(JoinGroupResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        self._remove_member(group, member_id)
        if group.is_(PREPARING):
            self._try_complete_join(group)

    # ---- LeaveGroup ----

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """``members``: (member_id, group_instance_id, reason). Returns the top-level
        error and one error per member (none when the top-level error is set)."""
        error = self.validate_group_status(group_id, ApiKey.LEAVE_GROUP)
        if error is not None:
            return error, []
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
                log.info("pending member %s has left group %s through LeaveGroup", member_id, group.group_id)
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
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on LeaveGroup; client reason: {reason}")
        log.info("member %s has left group %s through LeaveGroup; client reason: %s", member, group.group_id, reason)

    # ---- offsets ----

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self.validate_group_status(group_id, ApiKey.OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A request from an older generation of a group that is gone.
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            # A group that uses Kafka only to store its offsets.
            log.info("creating simple consumer group %s via manual offset commit", group_id)
            group = self.manager.add_group(Group(group_id, now_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.is_(COMPLETING):
            # The member has the new generation but no assignment yet.
            return dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            self._schedule_heartbeat_expiration(group, group.get(member_id))
        return self.manager.store_offsets(group, offsets)

    @classmethod
    def _validate_offset_commit(cls, group: Group, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return None  # admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = cls._validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a non-empty group
        return None

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets are written to ``__consumer_offsets`` in the
        producer's transaction and take effect when its COMMIT marker is written."""
        error = self.validate_group_status(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(Group(group_id, now_ms()))
        if group.is_(DEAD):
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group_instance_id is not None or member_id != "":
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return dict.fromkeys(offsets, error)
        if generation_id >= 0 and generation_id != group.generation_id:
            return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
        transactions = self.broker.transaction_coordinator
        tp = (OFFSETS_TOPIC, self.partition_for(group_id))
        error = ErrorCode.INVALID_TXN_STATE if transactions is None else transactions.verify_partition(producer_id, producer_epoch, *tp)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        return self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, commit: bool) -> None:
        """The producer's transaction ended in ``offsets_partition`` of ``__consumer_offsets``."""
        self.manager.complete_txn_offsets(producer_id, offsets_partition, commit)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with a transactional commit not yet ended."""
        group = self.manager.get_group(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (``None``: no commit) of ``partitions``, or of every
        partition the group has committed when ``partitions`` is None."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        committed = group.offsets if group is not None and not group.is_(DEAD) else {}
        if partitions is None:
            return ErrorCode.NONE, {tp: committed[tp] for tp in sorted(committed)}
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def on_topic_deleted(self, topic: str) -> int:
        """Drops every group's committed offsets of a deleted topic, with tombstones
        (Kafka's ``handleDeletedPartitions``); returns how many were removed."""
        removed = self.manager.cleanup_group_metadata(
            self.manager.current_groups(), lambda g: [tp for tp in g.offsets if tp[0] == topic]
        )
        if removed:
            log.info("removed %d offsets of deleted topic %s", removed, topic)
        return removed

    # ---- administration ----

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self.validate_group_status(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return error, NO_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, DEAD_GROUP
        if group.is_(STABLE):
            protocol = group.protocol_name or ""
            members = [MemberSummary(m, m.metadata(protocol), m.assignment) for m in group.members.values()]
            return ErrorCode.NONE, GroupSummary(str(group.state), group.protocol_type or "", protocol, members)
        members = [MemberSummary(m) for m in group.members.values()]
        return ErrorCode.NONE, GroupSummary(str(group.state), group.protocol_type or "", "", members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> tuple[ErrorCode, list[GroupOverview]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return ErrorCode.NONE, []
        return ErrorCode.NONE, [
            GroupOverview(g.group_id, g.protocol_type or "", str(g.state))
            for g in self.manager.current_groups()
            if not wanted_states or str(g.state).lower() in wanted_states
        ]

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: removes committed offsets (with tombstones). An Empty group
        loses any; a ``consumer`` group with members only those of topics no member
        subscribes to (the rest: GROUP_SUBSCRIBED_TO_TOPIC); a group of another
        protocol with members none (NON_EMPTY_GROUP)."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_DELETE)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics()
            eligible = []
            for tp in partitions:
                if subscribed is None or tp[0] in subscribed:
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            wanted = set(eligible)
            removed = self.manager.cleanup_group_metadata([group], lambda g: [tp for tp in g.offsets if tp in wanted])
            log.info("deleted %d offsets of group %s", removed, group_id)
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        eligible: list[Group] = []
        for group_id in group_ids:
            if group_id in errors or any(g.group_id == group_id for g in eligible):
                continue
            error = self.validate_group_status(group_id, ApiKey.DELETE_GROUPS)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                self._cancel_timers(group)
                group.transition_to(DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            removed = self.manager.cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            for group in eligible:
                errors[group.group_id] = ErrorCode.NONE
            log.info("deleted groups %s with %d offsets", [g.group_id for g in eligible], removed)
        return errors


def _config_or(config, key: str, default: int) -> int:
    try:
        value = config[key]
    except KeyError:
        return default
    return default if value is None else value
