"""Moving a group between the classic and consumer protocols on the live coordinators
(issue 34 item 4): the rules of :mod:`broker_py.coordinator.group.modern.migration` wired
to the classic :class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`
and the :class:`~broker_py.coordinator.group.consumer_group_coordinator.ConsumerGroupCoordinator`.

- Upgrade: a ConsumerGroupHeartbeat joining a classic group with members. The classic
  members' waiting JoinGroup and SyncGroup get REBALANCE_IN_PROGRESS, their timers stop,
  and the classic group is left without members, holding the offsets (the consumer
  coordinator's offsets holder). One append: the classic group's metadata tombstone,
  then the consumer group's records. The members learn of the change on their next
  Heartbeat (REBALANCE_IN_PROGRESS) and rejoin into the consumer group.
- Classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) naming a consumer group
  are answered by the sans-IO rules; JoinGroup and LeaveGroup records are appended, the
  JoinGroup answered once they are written.
- Downgrade: when the last consumer-protocol member leaves or expires, the classic group
  takes the members back (state Stable, their sessions restarted), its metadata record is
  appended after the consumer group's tombstones in the same append, and it rebalances.

Committed offsets are keyed by group id in the classic group that holds them; nothing
here writes or removes one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_py.coordinator.group.group_metadata import (
    EMPTY,
    STABLE,
    Group,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from broker_py.coordinator.group.group_metadata_records import encode_group_metadata_key
from broker_py.coordinator.group.modern.classic_member import ClassicGroupView, ClassicMemberView
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker_py.coordinator.group.modern.migration import (
    ClassicJoinRequest,
    Downgrade,
    GroupMigration,
    LeavingMember,
)
from broker_py.coordinator.group.modern.migration_policy import MigrationPolicy
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
    from broker_py.coordinator.group.group_coordinator import GroupCoordinator
    from broker_py.coordinator.group.join_group import JoinGroupParams
    from broker_py.coordinator.group.sync_group import SyncGroupParams

log = logging.getLogger(__name__)

Tail = list[tuple[bytes, bytes | None]]


def classic_view(group: Group) -> ClassicGroupView:
    """The classic group as plain values (what an upgrade reads)."""
    return ClassicGroupView(
        group_id=group.group_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        state=str(group.state),
        leader_id=group.leader_id,
        members=tuple(
            ClassicMemberView(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocols=tuple((name, bytes(md)) for name, md in m.protocols),
                assignment=bytes(m.assignment),
            )
            for m in group.members.values()
        ),
    )


class ProtocolMigration:
    def __init__(
        self,
        classic: GroupCoordinator,
        consumer: ConsumerGroupCoordinator,
        policy: MigrationPolicy,
        classic_max_size: int,
    ) -> None:
        self.classic = classic
        self.consumer = consumer
        # The consumer coordinator's rules (its heartbeats and timers downgrade too).
        self.rules: GroupMigration = consumer.rules
        self.rules.policy = policy
        self.rules.classic_max_size = classic_max_size
        consumer.migration = self

    # ---- upgrade ----

    def upgrade(
        self, group: Group, request: HeartbeatRequest, api_version: int
    ) -> HeartbeatResponse | asyncio.Future[HeartbeatResponse]:
        """A ConsumerGroupHeartbeat to a classic group with members."""
        self.consumer.refresh_topics()
        result = self.rules.upgrade(classic_view(group), request, api_version)
        if result.response.error_code != ErrorCode.NONE:
            log.info("group %s: not upgraded: %s", group.group_id, result.response.error_message)
            return result.response
        log.info(
            "group %s: converted from classic (generation %d, %d members) to consumer",
            group.group_id,
            group.generation_id,
            len(group.members),
        )
        self._detach_classic_members(group)
        return self.consumer.persist_for_response(
            group.group_id,
            result.records,
            result.response,
            lambda error: HeartbeatResponse(error_code=error, error_message=error.description),
            head=[(encode_group_metadata_key(group.group_id), None)],
        )

    def _detach_classic_members(self, group: Group) -> None:
        """The classic group keeps its offsets only: members, timers, waiting requests
        and its generation go."""
        self.classic._cancel_timers(group)
        for member in list(group.members.values()):
            member.complete_join(JoinGroupResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            member.complete_sync(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.cancel_heartbeat()
            group.remove(member.member_id)
        group.pending_members.clear()
        group.state = EMPTY
        group.generation_id = 0
        group.protocol_type = group.protocol_name = group.leader_id = None
        group.current_state_timestamp = None

    # ---- downgrade ----

    def install_downgrade(self, down: Downgrade) -> Tail:
        """Puts the members back into the classic group (which holds the offsets), starts
        their sessions and a rebalance; returns the classic record to append after the
        consumer group's tombstones."""
        view = down.group
        group = self.consumer.offsets_holder(view.group_id)
        self.classic._cancel_timers(group)
        now = self.classic.time.milliseconds()
        group.generation_id = view.generation_id
        group.protocol_type = view.protocol_type
        group.protocol_name = view.protocol_name
        group.leader_id = None
        assignments: dict[str, bytes] = {}
        for m in view.members:
            member = MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                view.protocol_type or "",
                list(m.protocols),
            )
            member.assignment = m.assignment
            assignments[m.member_id] = m.assignment
            group.add(member)
        group.state = STABLE
        group.current_state_timestamp = now
        record = (
            encode_group_metadata_key(view.group_id),
            self.classic.manager.group_metadata_value(group, assignments),
        )
        for member in group.members.values():
            self.classic._schedule_heartbeat_expiration(group, member)
        log.info(
            "group %s: converted from consumer back to classic (generation %d, %d members)",
            view.group_id,
            view.generation_id,
            len(view.members),
        )
        self.classic._prepare_rebalance(
            group, f"Downgrade group {view.group_id} from consumer to classic."
        )
        return [record]

    # ---- classic requests to a consumer group ----

    def serves(self, group_id: str, joining: bool = False) -> bool:
        """Whether classic requests for the group go to the consumer group: any request
        while it exists, a JoinGroup while it has members (an empty one gives its id to
        a classic group)."""
        group = self.consumer.group(group_id)
        return group is not None and (bool(group.members) or not joining)

    def join(self, params: JoinGroupParams) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        self.consumer.refresh_topics()
        result = self.rules.join(
            ClassicJoinRequest(
                group_id=params.group_id,
                member_id=params.member_id,
                protocol_type=params.protocol_type,
                protocols=tuple((name, bytes(md)) for name, md in params.protocols),
                session_timeout_ms=params.session_timeout_ms,
                rebalance_timeout_ms=params.rebalance_timeout_ms,
                instance_id=params.group_instance_id,
                client_id=params.client_id,
                client_host=params.client_host,
                api_version=4 if params.require_known_member_id else 0,
            )
        )
        r = result.response
        answer = JoinGroupResult(
            member_id=r.member_id,
            error=r.error_code,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
        )
        if not result.records:
            self.consumer.arm()
            return answer
        records, tail = result.records, []
        if result.downgrade is not None:
            # A static classic member replaced the last consumer-protocol member.
            records = records + result.downgrade.records
            tail = self.install_downgrade(result.downgrade)
        return self.consumer.persist_for_response(
            params.group_id,
            records,
            answer,
            lambda error: JoinGroupResult(r.member_id, error),
            tail=tail,
        )

    def sync(self, params: SyncGroupParams) -> SyncGroupResult:
        self.consumer.refresh_topics()
        r = self.rules.sync(
            params.group_id,
            params.member_id,
            params.group_instance_id,
            params.generation_id,
            params.protocol_type,
            params.protocol_name,
        )
        self.consumer.arm()
        return SyncGroupResult(r.error_code, r.protocol_type, r.protocol_name, r.assignment)

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error, _ = self.rules.classic_heartbeat(group_id, member_id, instance_id, generation_id)
        self.consumer.arm()
        return error

    def leave(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        result = self.rules.leave(
            group_id, [LeavingMember(member_id, instance) for member_id, instance, _ in members]
        )
        if result.records:
            self.consumer.persist(group_id, result.records)
        self.consumer.arm()
        return ErrorCode.NONE, [m.error_code for m in result.members]
