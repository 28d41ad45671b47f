"""The consumer groups of one coordinator on the consumer protocol (KIP-848): the
ConsumerGroupHeartbeat step function and the session and rebalance timers.

Sans-IO: no sockets, no asyncio. Time comes from an injected clock (``monotonic()``
seconds for timers, ``milliseconds()`` wall clock for what is stored); topics come from
:meth:`ConsumerGroupManager.update_topics`; regular expressions are compiled by an
injected function (the broker passes google-re2, whose syntax is RE2/J's) that raises
``ValueError`` for an invalid pattern and returns a full-match predicate.

A heartbeat either fails (an error response, no records, no change) or returns the
records of its changes, already replayed into the group, in the order they must be
persisted. If persisting fails, the caller reloads the group from what was persisted.

Heartbeat, in order (Kafka's consumerGroupHeartbeat):
1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION);
2. epoch -1 or -2: the member leaves (below);
3. find the group (created by a join, else GROUP_ID_NOT_FOUND), refuse a new member of a
   full group (GROUP_MAX_SIZE_REACHED), find or create the member (UNKNOWN_MEMBER_ID,
   FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID) and check its epoch: one above the known
   epoch, or below it unless it is the previous epoch with owned partitions within the
   assignment, is FENCED_MEMBER_EPOCH;
4. update the member's metadata; a changed subscription (names or regex) or subscribed
   topics changing partitions bumps the group epoch. Regexes are not resolved here: the
   heartbeat uses the group's resolutions as they are (a regex not resolved yet matches
   nothing) and marks the group's regexes due for resolution when one is not resolved
   yet, the topics changed since they were resolved, or one was resolved longer than
   group.consumer.regex.refresh.interval.ms ago;
5. when the group epoch is ahead of the assignment epoch, compute the target assignment
   with the preferred server assignor (the one most members name, else the first of
   group.consumer.assignors);
6. reconcile the member (:mod:`.reconciliation`);
7. restart its session timer; start its rebalance timer when it must revoke partitions,
   stop it when it no longer must.
The response carries the member's assignment when the request was full or the assigned
partitions changed.

Regex resolution (Kafka's asynchronous regex refresh) is a step of its own,
:meth:`ConsumerGroupManager.resolve_pending_regexes`, which the caller runs after
answering the heartbeat that made it due: it resolves every regex the group's members
use against the current topics, writes a RegularExpression record for each (its
timestamp is the resolution time), and bumps the group epoch when a regex now matches
other topics, so that the next heartbeats assign them.

The caller routes a group id here only when it is not a classic group with members
(Kafka answers GROUP_ID_NOT_FOUND "Group X is not a consumer group" then).

Leaving: epoch -1 removes the member (its partitions are freed, the group epoch bumps);
epoch -2 from a static member keeps it with epoch -2 and its assigned partitions until it
rejoins with the same instance id or its session times out.

Timers: a member whose session times out is removed as if it left; a member still
holding partitions to revoke ``rebalance_timeout_ms`` after it was asked is removed too.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker_py.coordinator.group.modern.assignor import (
    GroupSpec,
    MemberSpec,
    PartitionAssignor,
    assignors,
)
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.group import (
    ConsumerGroup,
    current_assignment_record,
    member_metadata_record,
)
from broker_py.coordinator.group.modern.heartbeat import (
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResult,
)
from broker_py.coordinator.group.modern.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    is_subset,
)
from broker_py.coordinator.group.modern.reconciliation import reconcile
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    Record,
    RegularExpressionRecord,
    RegularExpressionTombstone,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TopicMetadata,
)
from logstore.protocol.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    KafkaError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)

# From this ConsumerGroupHeartbeat version the client generates its member id.
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1

RegexCompiler = Callable[[str], Callable[[str], bool]]


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def milliseconds(self) -> int: ...


@dataclass(frozen=True)
class TimerResult:
    """A timer that fired and removed a member."""

    kind: str  # "session" or "rebalance"
    group_id: str
    member_id: str
    records: list[Record]


@dataclass
class _Timer:
    deadline: float
    kind: str
    group_id: str
    member_id: str
    # The member epoch the rebalance timer was set for (0 for session timers).
    epoch: int
    cancelled: bool = False


def _blank(value: str | None) -> bool:
    """Java's ``value.trim().isEmpty()`` for a set value."""
    return value is not None and all(c <= " " for c in value)


class ConsumerGroupManager:
    def __init__(
        self,
        config: ConsumerGroupConfig,
        clock: Clock,
        compile_regex: RegexCompiler,
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config
        self.clock = clock
        self.compile_regex = compile_regex
        self.new_member_id = new_member_id
        self.groups: dict[str, ConsumerGroup] = {}
        # Topic name -> metadata, as the metadata cache knows them.
        self.topics: dict[str, TopicMetadata] = {}
        self._topics_version = 0
        # Regexes resolved at a topics version: (group, regex) -> version.
        self._resolved_at: dict[tuple[str, str], int] = {}
        # Groups whose regexes are due for resolution (resolve_pending_regexes).
        self._regex_refresh_due: set[str] = set()
        # The topics version each group's subscribed topics were last checked at.
        self._checked_at: dict[str, int] = {}
        self._assignors: dict[str, PartitionAssignor] = {
            name: a for name, a in assignors().items() if name in config.assignors
        }
        self._timers: dict[tuple[str, str, str], _Timer] = {}
        self._heap: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()

    # --- topics --------------------------------------------------------------------

    def update_topics(self, topics: Iterable[TopicMetadata]) -> None:
        """The topics that exist now. Groups notice on their members' next heartbeats:
        regexes are resolved again and changed partition counts bump the group epoch."""
        new = {t.name: t for t in topics}
        if new != self.topics:
            self.topics = new
            self._topics_version += 1

    # --- heartbeat -----------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, api_version: int = 1) -> HeartbeatResult:
        try:
            self._validate(request, api_version)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._join_or_heartbeat(request, api_version)
        except KafkaError as e:
            return HeartbeatResult(
                HeartbeatResponse(error_code=e.errno, error_message=str(e) or None)
            )

    def _validate(self, r: HeartbeatRequest, api_version: int) -> None:
        if (
            api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
            or r.member_epoch > 0
            or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
        ) and _blank(r.member_id):
            raise InvalidRequestError("MemberId can't be empty.")
        if _blank(r.group_id):
            raise InvalidRequestError("GroupId can't be empty.")
        if _blank(r.instance_id):
            raise InvalidRequestError("InstanceId can't be empty.")
        if _blank(r.rack_id):
            raise InvalidRequestError("RackId can't be empty.")
        if r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if r.topic_partitions is None or any(r.topic_partitions.values()):
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if not r.subscribed_topic_names and not r.subscribed_topic_regex:
                raise InvalidRequestError(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if r.server_assignor is not None and r.server_assignor not in self._assignors:
            raise UnsupportedAssignorError(
                f"ServerAssignor {r.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self._assignors)}."
            )
        if r.subscribed_topic_regex:
            try:
                self.compile_regex(r.subscribed_topic_regex)
            except ValueError as e:
                raise InvalidRegularExpressionError(
                    f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {e}."
                ) from None

    def _join_or_heartbeat(self, r: HeartbeatRequest, api_version: int) -> HeartbeatResult:
        group = self.groups.get(r.group_id)
        if group is None or group.deleted:
            if r.member_epoch != 0:
                raise GroupIdNotFoundError(f"Consumer group {r.group_id} not found.")
            group = ConsumerGroup(r.group_id)
        member_id = r.member_id
        if api_version < CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION and r.member_epoch == 0:
            member_id = member_id or self.new_member_id()

        records: list[Record] = []
        member, replaced = self._find_member(group, r, member_id)
        if (
            member.member_id not in group.members
            and replaced is None
            and len(group.members) >= self.config.max_size
        ):
            raise GroupMaxSizeReachedError(
                "The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members."
            )
        if replaced is not None:
            records.extend(_remove_member_records(group.group_id, replaced.member_id))
            target = group.target_assignment.get(replaced.member_id, {})
            records.append(TargetAssignmentMemberRecord(group.group_id, member.member_id, target))
            records.append(current_assignment_record(group.group_id, member))

        updated = dataclasses.replace(
            member,
            instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                r.rebalance_timeout_ms
                if r.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                r.server_assignor if r.server_assignor is not None else member.server_assignor
            ),
            subscribed_topic_names=(
                tuple(sorted(set(r.subscribed_topic_names)))
                if r.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (r.subscribed_topic_regex or None)
                if r.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=r.client_id,
            client_host=r.client_host,
            classic_member_metadata=r.classic_member_metadata,
        )
        is_new = replaced is None and member.member_id not in group.members
        bump = is_new
        if is_new or replaced is not None or updated.metadata_key() != member.metadata_key():
            records.append(member_metadata_record(group.group_id, updated))
            bump = bump or (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )

        members_after = dict(group.members)
        if replaced is not None:
            del members_after[replaced.member_id]
        members_after[updated.member_id] = updated

        # Regexes and subscribed topics are looked at again only when a subscription
        # or the topics changed since the group last did.
        look_again = bump or self._checked_at.get(group.group_id) != self._topics_version
        if look_again:
            regexes, regex_records = self._resolved_regexes(group, members_after)
            records.extend(regex_records)
            bump = bump or bool(regex_records)
            metadata = self._subscription_metadata(group, members_after, regexes)
        else:
            regexes = {r: v.topics for r, v in group.resolved_regexes.items()}
            metadata = group.subscription_metadata
        refresh_due = self._regex_refresh_needed(group, members_after, look_again)
        if metadata != group.subscription_metadata:
            records.append(
                PartitionMetadataRecord(
                    group.group_id, tuple(sorted(metadata.values(), key=lambda t: t.name))
                )
            )
            bump = True

        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(GroupEpochRecord(group.group_id, group_epoch))

        target_epoch = group.assignment_epoch
        targets: Mapping[str, Assignment] = group.target_assignment
        if group_epoch > group.assignment_epoch:
            targets, target_records = self._target_assignment(
                group, members_after, metadata, regexes, group_epoch, replaced, updated
            )
            records.extend(target_records)
            target_epoch = group_epoch
        elif replaced is not None:
            targets = dict(targets)
            targets[updated.member_id] = targets.get(replaced.member_id, {})

        def partition_epoch(topic_id: uuid.UUID, partition: int) -> int:
            owner = group.partition_owner.get((topic_id, partition))
            if owner is None or (replaced is not None and owner[0] == replaced.member_id):
                return -1
            return owner[1]

        subscribed_ids = frozenset(
            metadata[name].topic_id for name in _member_topics(updated, regexes) if name in metadata
        )
        reconciled = reconcile(
            updated,
            target_epoch,
            targets.get(updated.member_id, {}),
            subscribed_ids,
            r.topic_partitions,
            partition_epoch,
        )
        if reconciled.assignment_key() != updated.assignment_key() or (
            replaced is None and member.member_id not in group.members
        ):
            records.append(current_assignment_record(group.group_id, reconciled))

        # Everything decided: apply.
        self.groups[group.group_id] = group
        self._checked_at[group.group_id] = self._topics_version
        for record in records:
            group.replay(record)
        if refresh_due:
            self._regex_refresh_due.add(group.group_id)
        now = self.clock.monotonic()
        if replaced is not None:
            self._cancel(group.group_id, replaced.member_id)
        self._schedule(
            "session",
            group.group_id,
            reconciled.member_id,
            now + self.config.session_timeout_ms / 1000,
        )
        if reconciled.assignment_key() != updated.assignment_key():
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule(
                    "rebalance",
                    group.group_id,
                    reconciled.member_id,
                    now + max(0, reconciled.rebalance_timeout_ms) / 1000,
                    reconciled.member_epoch,
                )
            else:
                self._cancel_kind("rebalance", group.group_id, reconciled.member_id)

        changed = dict(reconciled.assigned_partitions) != dict(member.assigned_partitions)
        return HeartbeatResult(
            HeartbeatResponse(
                member_id=reconciled.member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                assignment=(
                    dict(reconciled.assigned_partitions) if r.is_full() or changed else None
                ),
            ),
            records,
        )

    def _find_member(
        self, group: ConsumerGroup, r: HeartbeatRequest, member_id: str
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The member the heartbeat is from (new if it joins) and the static member it
        replaces, if any."""
        if r.instance_id is None:
            if r.member_epoch == 0:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}."
                )
            _check_epoch(member, r)
            return member, None
        existing = group.static_member(r.instance_id)
        if r.member_epoch == 0:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"Static member {member_id} with instance id {r.instance_id} cannot join "
                    f"the group because the instance id is owned by {existing.member_id} member."
                )
            # The new incarnation takes the old one's place, partitions and target.
            new = dataclasses.replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            return new, existing
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {r.instance_id} was fenced by "
                f"member {existing.member_id}."
            )
        _check_epoch(existing, r)
        return existing, None

    def _resolved_regexes(
        self, group: ConsumerGroup, members: dict[str, ConsumerGroupMember]
    ) -> tuple[dict[str, frozenset[str]], list[Record]]:
        """The topics each regex in use matches as the group resolved it (a regex not
        resolved yet is absent), and the tombstones of the regexes no longer in use."""
        in_use = group.regexes_in_use(members)
        resolved = {r: v.topics for r, v in group.resolved_regexes.items() if r in in_use}
        records: list[Record] = []
        for regex in sorted(set(group.resolved_regexes) - in_use):
            records.append(RegularExpressionTombstone(group.group_id, regex))
            self._resolved_at.pop((group.group_id, regex), None)
        return resolved, records

    def _regex_refresh_needed(
        self, group: ConsumerGroup, members: dict[str, ConsumerGroupMember], look_again: bool
    ) -> bool:
        """Whether a resolution is older than the refresh interval or, when a subscription
        or the topics changed (``look_again``), whether a regex in use is not resolved or
        was resolved before the topics last changed."""
        oldest = self.clock.milliseconds() - self.config.regex_refresh_interval_ms
        if any(v.timestamp_ms < oldest for v in group.resolved_regexes.values()):
            return True
        if not look_again:
            return False
        return any(
            regex not in group.resolved_regexes
            or self._resolved_at.get((group.group_id, regex)) != self._topics_version
            for regex in group.regexes_in_use(members)
        )

    def regex_refresh_due(self, group_id: str) -> bool:
        """Whether :meth:`resolve_pending_regexes` has work for the group."""
        return group_id in self._regex_refresh_due

    def resolve_pending_regexes(self, group_id: str) -> list[Record]:
        """Resolves the regexes of a group a heartbeat marked due against the current
        topics: a RegularExpression record for each regex in use, and the subscription
        metadata and a group epoch bump when the topics a regex matches changed. The
        records are already replayed into the group; none when nothing was due."""
        if group_id not in self._regex_refresh_due:
            return []
        self._regex_refresh_due.discard(group_id)
        group = self.groups.get(group_id)
        if group is None or group.deleted:
            return []
        records: list[Record] = []
        resolved: dict[str, frozenset[str]] = {}
        changed = False
        now_ms = self.clock.milliseconds()
        for regex in sorted(group.regexes_in_use()):
            matches = self.compile_regex(regex)
            topics = frozenset(name for name in self.topics if matches(name))
            known = group.resolved_regexes.get(regex)
            changed = changed or known is None or known.topics != topics
            self._resolved_at[(group_id, regex)] = self._topics_version
            resolved[regex] = topics
            records.append(RegularExpressionRecord(group_id, regex, tuple(sorted(topics)), now_ms))
        metadata = self._subscription_metadata(group, dict(group.members), resolved)
        if metadata != group.subscription_metadata:
            records.append(
                PartitionMetadataRecord(
                    group_id, tuple(sorted(metadata.values(), key=lambda t: t.name))
                )
            )
            changed = True
        if changed:
            records.append(GroupEpochRecord(group_id, group.group_epoch + 1))
        for record in records:
            group.replay(record)
        return records

    def _subscription_metadata(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerGroupMember],
        regexes: Mapping[str, frozenset[str]],
    ) -> dict[str, TopicMetadata]:
        names: set[str] = set()
        for m in members.values():
            names.update(_member_topics(m, regexes))
        return {n: self.topics[n] for n in sorted(names) if n in self.topics}

    def assignor_name(self, group_id: str) -> str:
        """The server assignor the group's next target assignment uses (ConsumerGroupDescribe's
        AssignorName): the one most members name, else the first configured."""
        group = self.groups.get(group_id)
        members = {} if group is None else group.members
        preferred = None if group is None else group.preferred_server_assignor(members)
        return preferred or self.config.default_assignor

    def _assignor(
        self, group: ConsumerGroup, members: dict[str, ConsumerGroupMember]
    ) -> PartitionAssignor:
        preferred = group.preferred_server_assignor(members)
        return self._assignors[preferred or self.config.default_assignor]

    def _target_assignment(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerGroupMember],
        metadata: Mapping[str, TopicMetadata],
        regexes: Mapping[str, frozenset[str]],
        epoch: int,
        replaced: ConsumerGroupMember | None,
        updated: ConsumerGroupMember,
    ) -> tuple[dict[str, Assignment], list[Record]]:
        current = dict(group.target_assignment)
        if replaced is not None:
            current[updated.member_id] = current.pop(replaced.member_id, {})
        spec = GroupSpec(
            members={
                mid: MemberSpec(
                    subscribed_topic_ids=frozenset(
                        metadata[n].topic_id for n in _member_topics(m, regexes) if n in metadata
                    ),
                    assignment=current.get(mid, {}),
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                )
                for mid, m in members.items()
            },
            partitions={t.topic_id: t.num_partitions for t in metadata.values()},
        )
        new = self._assignor(group, members).assign(spec)
        records: list[Record] = []
        targets: dict[str, Assignment] = {}
        for mid in sorted(members):
            target = new.get(mid, {})
            targets[mid] = target
            if mid not in group.target_assignment or dict(group.target_assignment[mid]) != target:
                records.append(TargetAssignmentMemberRecord(group.group_id, mid, target))
        records.append(TargetAssignmentMetadataRecord(group.group_id, epoch))
        return targets, records

    # --- leaving and fencing -------------------------------------------------------

    def _leave(self, r: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(r.group_id)
        if group is None or group.deleted:
            raise GroupIdNotFoundError(f"Consumer group {r.group_id} not found.")
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {r.member_id} is not a member of group {group.group_id}."
                )
        else:
            static = group.static_member(r.instance_id)
            if static is None:
                raise UnknownMemberIdError(f"Instance id {r.instance_id} is unknown.")
            if static.member_id != r.member_id:
                raise FencedInstanceIdError(
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced "
                    f"by member {static.member_id}."
                )
            member = static
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                leaving = dataclasses.replace(
                    member,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    partitions_pending_revocation={},
                )
                record = current_assignment_record(group.group_id, leaving)
                group.replay(record)
                self._cancel_kind("rebalance", group.group_id, member.member_id)
                return HeartbeatResult(
                    HeartbeatResponse(
                        member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    ),
                    [record],
                )
        records = self._fence(group, member)
        return HeartbeatResult(
            HeartbeatResponse(member_id=r.member_id, member_epoch=r.member_epoch), records
        )

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[Record]:
        """Removes the member; returns the records, already applied."""
        records: list[Record] = list(_remove_member_records(group.group_id, member.member_id))
        members_after = {k: v for k, v in group.members.items() if k != member.member_id}
        in_use = group.regexes_in_use(members_after)
        regexes = {r: v.topics for r, v in group.resolved_regexes.items() if r in in_use}
        for regex in sorted(set(group.resolved_regexes) - in_use):
            records.append(RegularExpressionTombstone(group.group_id, regex))
            self._resolved_at.pop((group.group_id, regex), None)
        metadata = self._subscription_metadata(group, members_after, regexes)
        if metadata != group.subscription_metadata:
            records.append(
                PartitionMetadataRecord(
                    group.group_id, tuple(sorted(metadata.values(), key=lambda t: t.name))
                )
            )
        records.append(GroupEpochRecord(group.group_id, group.group_epoch + 1))
        for record in records:
            group.replay(record)
        self._cancel(group.group_id, member.member_id)
        return records

    def delete_group(self, group_id: str) -> list[Record]:
        """Deletes an empty group; returns the tombstones, already applied."""
        group = self.groups.get(group_id)
        if group is None or group.deleted:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        if group.members:
            raise NonEmptyGroupError(f"Consumer group {group_id} is not empty.")
        records = group.tombstones()
        for record in records:
            group.replay(record)
        del self.groups[group_id]
        self._checked_at.pop(group_id, None)
        for key in [k for k in self._resolved_at if k[0] == group_id]:
            del self._resolved_at[key]
        self._regex_refresh_due.discard(group_id)
        return records

    # --- loading -------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Applies a record read back from the log (loading after a failover)."""
        group = self.groups.get(record.group_id)
        if group is None:
            group = self.groups[record.group_id] = ConsumerGroup(record.group_id)
        group.replay(record)
        if group.deleted:
            del self.groups[record.group_id]

    def on_loaded(self, group_id: str) -> None:
        """Starts the timers of a group just loaded: every member gets a full session
        (a classic member its own session timeout), and consumer-protocol members
        revoking partitions a full rebalance timeout."""
        group = self.groups.get(group_id)
        if group is None:
            return
        now = self.clock.monotonic()
        for member in group.members.values():
            classic = member.classic_member_metadata
            session_ms = (
                self.config.session_timeout_ms if classic is None else classic.session_timeout_ms
            )
            self._schedule("session", group_id, member.member_id, now + session_ms / 1000)
            if classic is None and member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule(
                    "rebalance",
                    group_id,
                    member.member_id,
                    now + max(0, member.rebalance_timeout_ms) / 1000,
                    member.member_epoch,
                )

    # --- timers --------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`expire` next has something to do (monotonic seconds)."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def expire(self) -> list[TimerResult]:
        """Runs the timers due by the clock's now: members whose session or rebalance
        timed out are removed."""
        now = self.clock.monotonic()
        out: list[TimerResult] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            timer.cancelled = True
            self._timers.pop((timer.kind, timer.group_id, timer.member_id), None)
            group = self.groups.get(timer.group_id)
            member = None if group is None else group.members.get(timer.member_id)
            if group is None or member is None:
                continue
            if timer.kind == "rebalance" and member.member_epoch != timer.epoch:
                continue
            out.append(
                TimerResult(timer.kind, timer.group_id, timer.member_id, self._fence(group, member))
            )
        return out

    def _schedule(
        self, kind: str, group_id: str, member_id: str, deadline: float, epoch: int = 0
    ) -> None:
        key = (kind, group_id, member_id)
        old = self._timers.get(key)
        if old is not None:
            old.cancelled = True
        timer = _Timer(deadline, kind, group_id, member_id, epoch)
        self._timers[key] = timer
        heapq.heappush(self._heap, (deadline, next(self._seq), timer))

    def _cancel_kind(self, kind: str, group_id: str, member_id: str) -> None:
        timer = self._timers.pop((kind, group_id, member_id), None)
        if timer is not None:
            timer.cancelled = True

    def _cancel(self, group_id: str, member_id: str) -> None:
        self._cancel_kind("session", group_id, member_id)
        self._cancel_kind("rebalance", group_id, member_id)

    def schedule_timer(
        self, kind: str, group_id: str, member_id: str, delay_ms: int, if_absent: bool = False
    ) -> None:
        """Starts (or restarts) a timer that removes the member when it fires; with
        ``if_absent`` a running one is kept. Used for the timers of classic members
        ("session" with their own timeout, "join", "sync")."""
        if if_absent and (kind, group_id, member_id) in self._timers:
            return
        self._schedule(kind, group_id, member_id, self.clock.monotonic() + max(0, delay_ms) / 1000)

    def cancel_timer(self, kind: str, group_id: str, member_id: str) -> None:
        self._cancel_kind(kind, group_id, member_id)

    def forget_group(self, group_id: str) -> None:
        """Drops a group that stopped being a consumer group (converted to a classic
        group): its state and every timer of its members."""
        self.groups.pop(group_id, None)
        self._checked_at.pop(group_id, None)
        for key in [k for k in self._resolved_at if k[0] == group_id]:
            del self._resolved_at[key]
        self._regex_refresh_due.discard(group_id)
        for timer_key in [k for k in self._timers if k[1] == group_id]:
            self._timers.pop(timer_key).cancelled = True

    def timer_deadline(self, kind: str, group_id: str, member_id: str) -> float | None:
        timer = self._timers.get((kind, group_id, member_id))
        return None if timer is None else timer.deadline


def _member_topics(member: ConsumerGroupMember, regexes: Mapping[str, frozenset[str]]) -> set[str]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names.update(regexes.get(member.subscribed_topic_regex, frozenset()))
    return names


def _remove_member_records(group_id: str, member_id: str) -> list[Record]:
    return [
        CurrentAssignmentTombstone(group_id, member_id),
        TargetAssignmentMemberTombstone(group_id, member_id),
        MemberMetadataTombstone(group_id, member_id),
    ]


def _check_epoch(member: ConsumerGroupMember, r: HeartbeatRequest) -> None:
    """FENCED_MEMBER_EPOCH unless the request's epoch is the member's, or its previous
    one with owned partitions within the assignment (the response bumping the epoch was
    lost)."""
    if r.member_epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({r.member_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}). "
            "The member must abandon all its partitions and rejoin."
        )
    if r.member_epoch < member.member_epoch and (
        r.member_epoch != member.previous_member_epoch
        or r.topic_partitions is None
        or not is_subset(r.topic_partitions, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({r.member_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}). "
            "The member must abandon all its partitions and rejoin."
        )
