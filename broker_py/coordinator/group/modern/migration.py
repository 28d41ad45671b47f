"""Moving a group between the classic and the consumer protocols while it has members, and
serving classic members inside a consumer group (Kafka 4's GroupMetadataManager rules).
Sans-IO, over a :class:`ConsumerGroupManager`: every step returns the records to persist
(already replayed into the manager) and the response; the caller writes them in one append.

Upgrade (:meth:`GroupMigration.upgrade`): a ConsumerGroupHeartbeat joining (epoch 0) a
classic group with members. Refused with GROUP_ID_NOT_FOUND unless the policy allows
upgrades, the group's protocol type is ``consumer``, it has at most
group.consumer.max.size members, and every member's assignment is a ConsumerProtocol
assignment without user data (a custom assignor's would be lost). Each classic member
becomes a member at the group's generation, STABLE, carrying its classic metadata
(session timeout, protocols), its subscription and its assignment as both current and
target; the group epoch and assignment epoch are the generation. The records are the new
group's (member metadata, group epoch, targets, target epoch, current assignments) then
the joining member's heartbeat; the caller puts the classic group's tombstone first.

Classic members inside a consumer group:
- JoinGroup (:meth:`GroupMigration.join`): GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL
  (no protocol every classic member supports), MEMBER_ID_REQUIRED (v4+, dynamic, no id);
  then the member goes through the heartbeat pipeline with its subscription, the
  partitions it says it owns and its classic metadata, at its current epoch; the response's
  generation is its member epoch, the protocol its first one, no leader.
  Timers: session (its session timeout), sync (its rebalance timeout); join cancelled.
- SyncGroup: the member must exist, be classic (UNKNOWN_MEMBER_ID), sync at its epoch
  (ILLEGAL_GENERATION), with the protocol type and name of its join
  (INCONSISTENT_GROUP_PROTOCOL), and not behind the group epoch unless revoking
  (REBALANCE_IN_PROGRESS, join timer started); the answer is its assigned partitions
  (not those pending revocation) as a ConsumerProtocol assignment at its subscription's
  version.
- Heartbeat: the same checks, the session timer restarted; REBALANCE_IN_PROGRESS (and the
  join timer started if absent) when the member is behind the group epoch, must revoke,
  or waits on partitions that are now free.
- LeaveGroup: each member named (by id, or by instance id for static members) is removed
  as a consumer member leaving would be.
- A join, sync or session timer firing removes the member.

Downgrade (after a consumer-protocol member leaves or is fenced, in :meth:`heartbeat` and
:meth:`expire`, or is replaced by a classic static member with its instance id, in
:meth:`join`, whose answer then carries the classic group's generation): when the
members left are all classic, there is at least one, the policy allows downgrades and
they fit in group.max.size, the consumer group is deleted (its tombstones) and a classic
group returned in its place: generation = group epoch, protocol type ``consumer``, the
protocol the members vote for, each member's target assignment encoded at its
subscription's version. The caller writes the classic group record after the tombstones
and starts a rebalance.

Committed offsets are keyed by group id alone and are not part of any of these records.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker_py.coordinator.group.modern.classic_member import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroupView,
    ClassicMemberView,
    MalformedConsumerProtocolError,
    classic_metadata,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
    to_topic_ids,
    to_topic_names,
)
from broker_py.coordinator.group.modern.group import (
    ConsumerGroup,
    current_assignment_record,
    member_metadata_record,
)
from broker_py.coordinator.group.modern.heartbeat import (
    HeartbeatRequest,
    HeartbeatResponse,
)
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager, TimerResult
from broker_py.coordinator.group.modern.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from broker_py.coordinator.group.modern.migration_policy import MigrationPolicy
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    MemberMetadataTombstone,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownServerError,
)

# JoinGroup from this version hands a dynamic member without an id one, to rejoin with.
MEMBER_ID_REQUIRED_VERSION = 4

_CLASSIC_STABLE = "Stable"


@dataclass(frozen=True)
class ClassicJoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    # (name, ConsumerProtocol subscription) in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = MEMBER_ID_REQUIRED_VERSION


@dataclass(frozen=True)
class ClassicJoinResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class ClassicSyncResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    instance_id: str | None = None


@dataclass(frozen=True)
class LeftMember:
    member_id: str
    instance_id: str | None
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class Downgrade:
    """A consumer group turned back into a classic group: ``records`` delete the consumer
    group (already applied; the manager no longer has it), ``group`` is the classic group
    to install, record and rebalance."""

    records: list[Record]
    group: ClassicGroupView


@dataclass
class StepResult:
    """Records to persist in order (already applied), and a downgrade that follows them."""

    records: list[Record] = field(default_factory=list)
    downgrade: Downgrade | None = None


@dataclass
class ClassicJoinResult(StepResult):
    response: ClassicJoinResponse = field(default_factory=ClassicJoinResponse)


@dataclass
class ConsumerHeartbeatResult(StepResult):
    response: HeartbeatResponse = field(default_factory=HeartbeatResponse)


@dataclass
class LeaveResult(StepResult):
    members: list[LeftMember] = field(default_factory=list)


@dataclass
class ExpireResult(StepResult):
    timers: list[TimerResult] = field(default_factory=list)
    downgrades: list[Downgrade] = field(default_factory=list)


def _error(e: KafkaError) -> tuple[ErrorCode, str | None]:
    return e.errno, (str(e) or None)


class GroupMigration:
    def __init__(
        self,
        manager: ConsumerGroupManager,
        policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL,
        classic_max_size: int = (1 << 31) - 1,
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.manager = manager
        self.policy = policy
        self.classic_max_size = classic_max_size
        self.new_member_id = new_member_id

    # --- upgrade -----------------------------------------------------------------------

    def validate_online_upgrade(self, classic: ClassicGroupView) -> None:
        gid = classic.group_id
        if not self.policy.upgrade_enabled:
            raise GroupIdNotFoundError(
                f"Cannot upgrade classic group {gid} to consumer group because online "
                "upgrade is disabled."
            )
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise GroupIdNotFoundError(
                f"Cannot upgrade classic group {gid} to consumer group because the group "
                "does not use the consumer embedded protocol."
            )
        if len(classic.members) > self.manager.config.max_size:
            raise GroupIdNotFoundError(
                f"Cannot upgrade classic group {gid} to consumer group because the group "
                "size exceeds the consumer group maximum size."
            )

    def conversion_records(self, classic: ClassicGroupView) -> list[Record]:
        """The records of the consumer group a classic group becomes (Kafka's
        fromClassicGroup then createConsumerGroupRecords)."""
        gid, generation = classic.group_id, classic.generation_id
        topics = self.manager.topics
        members: list[ConsumerGroupMember] = []
        for m in classic.members:
            try:
                if m.assignment:
                    decoded = decode_assignment(m.assignment)
                    if decoded.user_data:
                        raise GroupIdNotFoundError(
                            f"Cannot upgrade classic group {gid} to consumer group because an "
                            "unsupported custom assignor is in use. Please refer to the "
                            "documentation or switch to a default assignor before "
                            "re-attempting the upgrade."
                        )
                    assigned = to_topic_ids(decoded.partitions, topics)
                else:
                    assigned = {}
                metadata = dict(m.protocols).get(classic.protocol_name or "")
                if metadata is None:
                    raise MalformedConsumerProtocolError(
                        f"member {m.member_id} has no metadata for {classic.protocol_name}"
                    )
                subscription = decode_subscription(metadata)
            except MalformedConsumerProtocolError:
                raise GroupIdNotFoundError(
                    f"Cannot upgrade classic group {gid} to consumer group because the "
                    "embedded consumer protocol is malformed."
                ) from None
            members.append(
                ConsumerGroupMember(
                    member_id=m.member_id,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    instance_id=m.instance_id,
                    rack_id=subscription.rack_id or None,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                    assigned_partitions=assigned,
                    classic_member_metadata=classic_metadata(m.session_timeout_ms, m.protocols),
                )
            )
        records: list[Record] = [member_metadata_record(gid, m) for m in members]
        records.append(GroupEpochRecord(gid, generation))
        records.extend(
            TargetAssignmentMemberRecord(gid, m.member_id, m.assigned_partitions) for m in members
        )
        records.append(TargetAssignmentMetadataRecord(gid, generation))
        records.extend(current_assignment_record(gid, m) for m in members)
        return records

    def upgrade(
        self, classic: ClassicGroupView, request: HeartbeatRequest, api_version: int = 1
    ) -> ConsumerHeartbeatResult:
        """A ConsumerGroupHeartbeat to a classic group with members. On an error the
        classic group is left as it was and nothing is to be written."""
        gid = classic.group_id
        try:
            if request.member_epoch != 0:
                raise GroupIdNotFoundError(f"Group {gid} is not a consumer group.")
            self.validate_online_upgrade(classic)
            conversion = self.conversion_records(classic)
        except KafkaError as e:
            code, message = _error(e)
            return ConsumerHeartbeatResult(
                response=HeartbeatResponse(error_code=code, error_message=message)
            )
        self.manager.forget_group(gid)
        for record in conversion:
            self.manager.replay(record)
        result = self.manager.heartbeat(request, api_version)
        if result.response.error_code is not ErrorCode.NONE:
            self.manager.forget_group(gid)
            return ConsumerHeartbeatResult(response=result.response)
        for m in classic.members:
            self.manager.schedule_timer("session", gid, m.member_id, m.session_timeout_ms)
        return ConsumerHeartbeatResult(conversion + result.records, response=result.response)

    # --- the consumer protocol's heartbeat, with the downgrade ---------------------------

    def heartbeat(self, request: HeartbeatRequest, api_version: int = 1) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat to a consumer group; a member leaving for good may leave
        only classic members behind, and the group is then downgraded."""
        group = self.manager.groups.get(request.group_id)
        leaving = (
            group.members.get(request.member_id)
            if group is not None and request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
            else None
        )
        result = self.manager.heartbeat(request, api_version)
        out = ConsumerHeartbeatResult(result.records, response=result.response)
        if (
            leaving is not None
            and not leaving.uses_classic_protocol
            and result.response.error_code is ErrorCode.NONE
        ):
            out.downgrade = self.maybe_downgrade(request.group_id)
        return out

    # --- downgrade ---------------------------------------------------------------------

    def maybe_downgrade(self, group_id: str) -> Downgrade | None:
        """Converts the group to a classic group if every member left uses the classic
        protocol (called after a consumer-protocol member was removed)."""
        group = self.manager.groups.get(group_id)
        if group is None or not group.members:
            return None
        if not all(m.uses_classic_protocol for m in group.members.values()):
            return None
        if not self.policy.downgrade_enabled:
            return None
        if len(group.members) > self.classic_max_size:
            return None
        try:
            view = self._classic_view(group)
        except MalformedConsumerProtocolError:
            return None
        records: list[Record] = []
        for member_id in group.members:
            records.append(CurrentAssignmentTombstone(group_id, member_id))
            records.append(TargetAssignmentMemberTombstone(group_id, member_id))
            records.append(MemberMetadataTombstone(group_id, member_id))
        for record in records:
            group.replay(record)
        tail = group.tombstones()
        for record in tail:
            group.replay(record)
        self.manager.forget_group(group_id)
        return Downgrade(records + tail, view)

    def _classic_view(self, group: ConsumerGroup) -> ClassicGroupView:
        members = list(group.members.values())
        protocol = select_protocol(members)
        if protocol is None:
            raise MalformedConsumerProtocolError("no protocol every member supports")
        views = []
        for m in members:
            assert m.classic_member_metadata is not None
            protocols = tuple(
                (p.name, p.metadata) for p in m.classic_member_metadata.supported_protocols
            )
            target = group.target_assignment.get(m.member_id, {})
            assignment = encode_assignment(
                to_topic_names(target, self.manager.topics),
                subscription_version(dict(protocols)[protocol]),
            )
            views.append(
                ClassicMemberView(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.classic_member_metadata.session_timeout_ms,
                    protocols=protocols,
                    assignment=assignment,
                )
            )
        return ClassicGroupView(
            group_id=group.group_id,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol,
            state=_CLASSIC_STABLE,
            leader_id=members[0].member_id,
            members=tuple(views),
        )

    # --- timers ------------------------------------------------------------------------

    def expire(self) -> ExpireResult:
        """The manager's due timers; a group that lost its last consumer-protocol member
        to them is downgraded."""
        consumer_members: dict[str, set[str]] = {}
        for gid, group in self.manager.groups.items():
            if any(m.uses_classic_protocol for m in group.members.values()):
                consumer_members[gid] = {
                    mid for mid, m in group.members.items() if not m.uses_classic_protocol
                }
        timers = self.manager.expire()
        out = ExpireResult(timers=timers)
        touched: list[str] = []
        for t in timers:
            out.records.extend(t.records)
            if t.member_id in consumer_members.get(t.group_id, ()) and t.group_id not in touched:
                touched.append(t.group_id)
        for gid in touched:
            downgrade = self.maybe_downgrade(gid)
            if downgrade is not None:
                out.downgrades.append(downgrade)
        return out

    # --- classic members in a consumer group ----------------------------------------------

    def join(self, r: ClassicJoinRequest) -> ClassicJoinResult:
        """JoinGroup from a classic member to a consumer group with members."""
        try:
            return self._join(r)
        except KafkaError as e:
            code, message = _error(e)
            return ClassicJoinResult(
                response=ClassicJoinResponse(
                    error_code=code, error_message=message, member_id=r.member_id
                )
            )

    def _join(self, r: ClassicJoinRequest) -> ClassicJoinResult:
        group = self._group(r.group_id)
        member_id = r.member_id or self.new_member_id()
        if len(group.members) >= self.manager.config.max_size and (
            not r.member_id or r.member_id not in group.members
        ):
            raise GroupMaxSizeReachedError(
                "The consumer group has reached its maximum capacity of "
                f"{self.manager.config.max_size} members."
            )
        if not supports_classic_protocols(group, r.protocol_type, (n for n, _ in r.protocols)):
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s protocols are not supported."
            )
        if (
            r.api_version >= MEMBER_ID_REQUIRED_VERSION
            and r.instance_id is None
            and not r.member_id
        ):
            return ClassicJoinResult(
                response=ClassicJoinResponse(
                    error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id
                )
            )
        try:
            subscription = decode_subscription(r.protocols[0][1])
        except (MalformedConsumerProtocolError, IndexError):
            raise UnknownServerError(
                "Malformed embedded consumer protocol in subscription deserialization."
            ) from None

        records: list[Record] = []
        existing = self._existing_member(group, r, member_id)
        replaced_consumer_member = False
        if existing is None and r.instance_id is not None:
            static = group.static_member(r.instance_id)
            if static is not None:
                replaced_consumer_member = not static.uses_classic_protocol
                # A static member rejoining with a new id takes the old one's place:
                # the old incarnation leaves temporarily, the new one replaces it.
                left = self.manager.heartbeat(
                    HeartbeatRequest(
                        r.group_id,
                        static.member_id,
                        LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        instance_id=r.instance_id,
                    )
                )
                if left.response.error_code is not ErrorCode.NONE:
                    return ClassicJoinResult(
                        response=ClassicJoinResponse(
                            error_code=left.response.error_code,
                            error_message=left.response.error_message,
                            member_id=member_id,
                        )
                    )
                records.extend(left.records)
        request = HeartbeatRequest(
            group_id=r.group_id,
            member_id=member_id,
            member_epoch=0 if existing is None else existing.member_epoch,
            instance_id=r.instance_id,
            rack_id=subscription.rack_id or None,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics,
            topic_partitions=(
                {}
                if existing is None
                else to_topic_ids(subscription.owned_partitions, self.manager.topics)
            ),
            client_id=r.client_id,
            client_host=r.client_host,
            classic_member_metadata=classic_metadata(r.session_timeout_ms, r.protocols),
        )
        result = self.manager.heartbeat(request)
        if result.response.error_code is not ErrorCode.NONE:
            return ClassicJoinResult(
                records,
                response=ClassicJoinResponse(
                    error_code=result.response.error_code,
                    error_message=result.response.error_message,
                    member_id=member_id,
                ),
            )
        records.extend(result.records)
        member = self.manager.groups[r.group_id].members[member_id]
        gid = r.group_id
        self.manager.cancel_timer("join", gid, member_id)
        self.manager.cancel_timer("rebalance", gid, member_id)
        self.manager.schedule_timer("session", gid, member_id, r.session_timeout_ms)
        self.manager.schedule_timer("sync", gid, member_id, r.rebalance_timeout_ms)
        generation = member.member_epoch
        # The last consumer-protocol member was a static member this classic member
        # replaced: the group goes back to the classic protocol.
        downgrade = self.maybe_downgrade(gid) if replaced_consumer_member else None
        if downgrade is not None:
            generation = downgrade.group.generation_id
        return ClassicJoinResult(
            records,
            downgrade,
            response=ClassicJoinResponse(
                member_id=member_id,
                generation_id=generation,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=r.protocols[0][0],
            ),
        )

    def _existing_member(
        self, group: ConsumerGroup, r: ClassicJoinRequest, member_id: str
    ) -> ConsumerGroupMember | None:
        if r.instance_id is None:
            return group.members.get(member_id)
        static = group.static_member(r.instance_id)
        if static is None:
            return None
        if static.member_id == member_id:
            return static
        if r.member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {r.instance_id} was fenced by "
                f"member {static.member_id}."
            )
        return None

    def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ClassicSyncResponse:
        try:
            group = self._group(group_id)
            member = self._classic_member(group, member_id, instance_id)
            _check_generation(member, generation_id)
            name = _protocol_name(member)
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise InconsistentGroupProtocolError(
                    f"The protocol type {protocol_type} from member {member.member_id} request "
                    f"is not equal to the group protocol type {CONSUMER_PROTOCOL_TYPE}."
                )
            if protocol_name is not None and protocol_name != name:
                raise InconsistentGroupProtocolError(
                    f"The protocol name {protocol_name} from member {member.member_id} request "
                    f"is not equal to the protocol name {name} returned in the join response."
                )
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._join_timer(group_id, member)
                raise RebalanceInProgressError(
                    f"A new rebalance is triggered in group {group_id} and member "
                    f"{member.member_id} should rejoin to catch up."
                )
        except KafkaError as e:
            code, message = _error(e)
            return ClassicSyncResponse(error_code=code, error_message=message)
        self.manager.cancel_timer("sync", group_id, member.member_id)
        self._session_timer(group_id, member)
        classic = member.classic_member_metadata
        assert classic is not None
        try:
            version = subscription_version(classic.supported_protocols[0].metadata)
        except MalformedConsumerProtocolError:
            return ClassicSyncResponse(
                error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                error_message="Malformed embedded consumer protocol in version deserialization.",
            )
        return ClassicSyncResponse(
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignment=encode_assignment(
                to_topic_names(member.assigned_partitions, self.manager.topics), version
            ),
        )

    def classic_heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> tuple[ErrorCode, str | None]:
        """Heartbeat from a classic member: (error code, message)."""
        try:
            group = self._group(group_id)
            member = self._classic_member(group, member_id, instance_id)
            _check_generation(member, generation_id)
        except KafkaError as e:
            return _error(e)
        self._session_timer(group_id, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not waiting_on_unreleased_partition(group, member)
            )
        ):
            self._join_timer(group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        return ErrorCode.NONE, None

    def leave(self, group_id: str, members: Iterable[LeavingMember]) -> LeaveResult:
        """LeaveGroup naming members of a consumer group."""
        out = LeaveResult()
        for who in members:
            try:
                group = self._group(group_id)
                if who.instance_id is None:
                    member = group.members.get(who.member_id)
                    if member is None:
                        raise UnknownMemberIdError(
                            f"Member {who.member_id} is not a member of group {group_id}."
                        )
                else:
                    static = group.static_member(who.instance_id)
                    if static is None:
                        raise UnknownMemberIdError(f"Instance id {who.instance_id} is unknown.")
                    if who.member_id and static.member_id != who.member_id:
                        raise FencedInstanceIdError(
                            f"Static member {who.member_id} with instance id {who.instance_id} "
                            f"was fenced by member {static.member_id}."
                        )
                    member = static
                _require_classic(member)
                left = self.manager.heartbeat(
                    HeartbeatRequest(
                        group_id,
                        member.member_id,
                        LEAVE_GROUP_MEMBER_EPOCH,
                        instance_id=member.instance_id,
                    )
                )
                if left.response.error_code is not ErrorCode.NONE:
                    out.members.append(
                        LeftMember(
                            member.member_id,
                            who.instance_id,
                            left.response.error_code,
                            left.response.error_message,
                        )
                    )
                    continue
                out.records.extend(left.records)
                out.members.append(LeftMember(member.member_id, who.instance_id))
            except KafkaError as e:
                code, message = _error(e)
                out.members.append(LeftMember(who.member_id, who.instance_id, code, message))
        return out

    # --- helpers -----------------------------------------------------------------------

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.manager.groups.get(group_id)
        if group is None or group.deleted:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        return group

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}."
                )
        else:
            static = group.static_member(instance_id)
            if static is None:
                raise UnknownMemberIdError(
                    f"Member with instance id {instance_id} is not a member of group "
                    f"{group.group_id}."
                )
            if static.member_id != member_id:
                raise FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {static.member_id}."
                )
            member = static
        _require_classic(member)
        return member

    def _session_timer(self, group_id: str, member: ConsumerGroupMember) -> None:
        assert member.classic_member_metadata is not None
        self.manager.schedule_timer(
            "session",
            group_id,
            member.member_id,
            member.classic_member_metadata.session_timeout_ms,
        )

    def _join_timer(self, group_id: str, member: ConsumerGroupMember) -> None:
        self.manager.schedule_timer(
            "join", group_id, member.member_id, member.rebalance_timeout_ms, if_absent=True
        )


def _require_classic(member: ConsumerGroupMember) -> None:
    if not member.uses_classic_protocol:
        raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise IllegalGenerationError(
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}."
        )


def _protocol_name(member: ConsumerGroupMember) -> str:
    assert member.classic_member_metadata is not None
    return member.classic_member_metadata.supported_protocols[0].name


def classic_protocol_counts(group: ConsumerGroup) -> tuple[int, Counter[str]]:
    """How many members use the classic protocol, and how many of them offer each protocol."""
    counts: Counter[str] = Counter()
    n = 0
    for m in group.members.values():
        if m.classic_member_metadata is not None:
            n += 1
            counts.update({p.name for p in m.classic_member_metadata.supported_protocols})
    return n, counts


def supports_classic_protocols(
    group: ConsumerGroup, protocol_type: str, protocols: Iterable[str]
) -> bool:
    """Whether a classic member offering ``protocols`` may join (Kafka's
    supportsClassicProtocols): type ``consumer``, and in a group with members, some
    protocol every classic member offers."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    names = set(protocols)
    if not group.members:
        return bool(names)
    n, counts = classic_protocol_counts(group)
    return any(counts.get(name, 0) == n for name in names)


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a member in UNRELEASED_PARTITIONS still waits for a target partition that
    another member holds."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    target = group.target_assignment.get(member.member_id, {})
    for topic_id, parts in target.items():
        have = member.assigned_partitions.get(topic_id, frozenset())
        for p in parts - have:
            if group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False


def select_protocol(members: Iterable[ConsumerGroupMember]) -> str | None:
    """The protocol every member offers that most members prefer; ties go to the first
    member's order (a classic group's leader is its first member)."""
    prefs = [
        [p.name for p in m.classic_member_metadata.supported_protocols]
        for m in members
        if m.classic_member_metadata is not None
    ]
    if not prefs:
        return None
    candidates = set(prefs[0]).intersection(*map(set, prefs[1:]))
    if not candidates:
        return None
    votes = Counter(next(n for n in p if n in candidates) for p in prefs)
    rank = {name: i for i, name in enumerate(prefs[0])}
    return max(votes, key=lambda name: (votes[name], -rank.get(name, len(rank))))
