"""A consumer group on the consumer protocol: the state its records build.

Every change goes through :meth:`ConsumerGroup.replay`, whether the records were just
produced by a heartbeat or read back from ``__consumer_offsets`` after a failover, so
both paths reach the same state.

Invariants kept by replay (a record breaking one raises :class:`IllegalStateError`):
- a partition is held (assigned or pending revocation) by at most one member;
  ``partition_owner`` maps each held partition to its holder and the holder's epoch;
- ``static_members`` maps each instance id to the one member carrying it;
- a member's metadata is deleted only after its current assignment was.

Group state, derived: DEAD once deleted; EMPTY without members; ASSIGNING while the
group epoch is ahead of the assignment epoch; RECONCILING while a member is not STABLE
at the assignment epoch; STABLE otherwise.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from broker_py.coordinator.group.modern.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentRecord,
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    Record,
    RegularExpressionRecord,
    RegularExpressionTombstone,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
    TopicMetadata,
)
from logstore.protocol.errors import (
    IllegalGenerationError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)


class IllegalStateError(Exception):
    """A record that contradicts the group's state (a bug or a corrupt log)."""


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    timestamp_ms: int


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # Topic name -> metadata, for the topics members subscribe to that exist.
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.partition_owner: dict[tuple[uuid.UUID, int], tuple[str, int]] = {}
        self.deleted = False

    # --- derived views ---------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition, or -1 when none does."""
        owner = self.partition_owner.get((topic_id, partition))
        return -1 if owner is None else owner[1]

    def subscribed_topic_names(
        self, members: dict[str, ConsumerGroupMember] | None = None
    ) -> set[str]:
        """Every topic a member subscribes to, by name or through a resolved regex."""
        names: set[str] = set()
        for member in (self.members if members is None else members).values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
                if resolved is not None:
                    names.update(resolved.topics)
        return names

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names.update(resolved.topics)
        return names

    def regexes_in_use(self, members: dict[str, ConsumerGroupMember] | None = None) -> set[str]:
        return {
            m.subscribed_topic_regex
            for m in (self.members if members is None else members).values()
            if m.subscribed_topic_regex
        }

    def preferred_server_assignor(self, members: dict[str, ConsumerGroupMember]) -> str | None:
        """The server assignor most members name (ties: the smallest name), if any."""
        counts = Counter(m.server_assignor for m in members.values() if m.server_assignor)
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    # --- offsets fenced by member epoch -------------------------------------------------

    def validate_offset_commit(
        self,
        member_id: str,
        member_epoch: int,
        *,
        transactional: bool = False,
        instance_id: str | None = None,
        api_version: int = 9,
    ) -> None:
        """Kafka's checks of an OffsetCommit (or TxnOffsetCommit) against the group:
        a negative epoch commits only into an empty group (admin clients, consumers
        without group management); a TxnOffsetCommit naming no member is accepted;
        otherwise the member must exist (UNKNOWN_MEMBER_ID), commit with OffsetCommit
        v9+ (UNSUPPORTED_VERSION) and at its current epoch (STALE_MEMBER_EPOCH); a
        classic member commits with any version, its generation being its epoch
        (ILLEGAL_GENERATION)."""
        if member_epoch < 0 and not self.members:
            return
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of group {self.group_id}."
            )
        if not transactional and not member.uses_classic_protocol and api_version < 9:
            raise UnsupportedVersionError(
                "OffsetCommit version 9 or above must be used by members using the modern "
                "group protocol"
            )
        _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's checks of an OffsetFetch naming a member (v9+): none named with a
        negative epoch is accepted (admin clients); else UNKNOWN_MEMBER_ID or
        STALE_MEMBER_EPOCH."""
        if member_id is None and member_epoch < 0:
            return
        member = None if member_id is None else self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of group {self.group_id}."
            )
        _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)

    # --- replay --------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        match record:
            case GroupEpochRecord(epoch=epoch):
                self.group_epoch = epoch
                self.deleted = False
            case GroupEpochTombstone():
                if self.members:
                    raise IllegalStateError(
                        f"group {self.group_id} deleted with {len(self.members)} members"
                    )
                self.deleted = True
            case PartitionMetadataRecord(topics=topics):
                self.subscription_metadata = {t.name: t for t in topics}
            case PartitionMetadataTombstone():
                self.subscription_metadata = {}
            case MemberMetadataRecord():
                self._replay_member_metadata(record)
            case MemberMetadataTombstone(member_id=member_id):
                old = self.members.get(member_id)
                if old is None:
                    return
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                    raise IllegalStateError(
                        f"member {member_id} deleted before its current assignment"
                    )
                del self.members[member_id]
                if old.instance_id is not None:
                    self.static_members.pop(old.instance_id, None)
            case TargetAssignmentMetadataRecord(assignment_epoch=epoch):
                self.assignment_epoch = epoch
            case TargetAssignmentMetadataTombstone():
                self.assignment_epoch = 0
            case TargetAssignmentMemberRecord(member_id=member_id, partitions=partitions):
                self.target_assignment[member_id] = dict(partitions)
            case TargetAssignmentMemberTombstone(member_id=member_id):
                self.target_assignment.pop(member_id, None)
            case CurrentAssignmentRecord():
                self._replay_current_assignment(record)
            case CurrentAssignmentTombstone(member_id=member_id):
                old = self.members.get(member_id)
                if old is None:
                    return
                self._release(old)
                self.members[member_id] = dataclasses.replace(
                    old,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    state=MemberState.STABLE,
                    assigned_partitions={},
                    partitions_pending_revocation={},
                )
            case RegularExpressionRecord(regex=regex, topics=topics, timestamp_ms=ts):
                self.resolved_regexes[regex] = ResolvedRegex(frozenset(topics), ts)
            case RegularExpressionTombstone(regex=regex):
                self.resolved_regexes.pop(regex, None)

    def _replay_member_metadata(self, record: MemberMetadataRecord) -> None:
        old = self.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
        new = dataclasses.replace(
            old,
            instance_id=record.instance_id,
            rack_id=record.rack_id,
            client_id=record.client_id,
            client_host=record.client_host,
            subscribed_topic_names=record.subscribed_topic_names,
            subscribed_topic_regex=record.subscribed_topic_regex,
            server_assignor=record.server_assignor,
            rebalance_timeout_ms=record.rebalance_timeout_ms,
            classic_member_metadata=record.classic_member_metadata,
        )
        if old.instance_id is not None and old.instance_id != new.instance_id:
            self.static_members.pop(old.instance_id, None)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self.members[record.member_id] = new

    def _replay_current_assignment(self, record: CurrentAssignmentRecord) -> None:
        old = self.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
        new = dataclasses.replace(
            old,
            member_epoch=record.member_epoch,
            previous_member_epoch=record.previous_member_epoch,
            state=record.state,
            assigned_partitions=dict(record.assigned_partitions),
            partitions_pending_revocation=dict(record.partitions_pending_revocation),
        )
        self._release(old)
        for tp in sorted(new.owned_partitions()):
            holder = self.partition_owner.get(tp)
            if holder is not None:
                raise IllegalStateError(
                    f"partition {tp[0]}-{tp[1]} given to {new.member_id} while {holder[0]} holds it"
                )
            self.partition_owner[tp] = (new.member_id, new.member_epoch)
        self.members[record.member_id] = new

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            if self.partition_owner.get(tp, ("",))[0] == member.member_id:
                del self.partition_owner[tp]

    # --- records that recreate the group -----------------------------------------------

    def snapshot_records(self) -> Iterator[Record]:
        """Records that, replayed on a new group, rebuild this one (for compaction)."""
        gid = self.group_id
        for member in self.members.values():
            yield member_metadata_record(gid, member)
        yield GroupEpochRecord(gid, self.group_epoch)
        yield PartitionMetadataRecord(
            gid, tuple(sorted(self.subscription_metadata.values(), key=lambda t: t.name))
        )
        for regex, resolved in self.resolved_regexes.items():
            yield RegularExpressionRecord(
                gid, regex, tuple(sorted(resolved.topics)), resolved.timestamp_ms
            )
        for member_id, partitions in self.target_assignment.items():
            yield TargetAssignmentMemberRecord(gid, member_id, partitions)
        yield TargetAssignmentMetadataRecord(gid, self.assignment_epoch)
        for member in self.members.values():
            yield current_assignment_record(gid, member)

    def tombstones(self) -> list[Record]:
        """Records that delete the group (it must have no members)."""
        gid = self.group_id
        out: list[Record] = [
            TargetAssignmentMemberTombstone(gid, m) for m in self.target_assignment
        ]
        out.append(TargetAssignmentMetadataTombstone(gid))
        out.extend(RegularExpressionTombstone(gid, r) for r in self.resolved_regexes)
        out.append(PartitionMetadataTombstone(gid))
        out.append(GroupEpochTombstone(gid))
        return out


def _check_member_epoch(received: int, expected: int, classic: bool = False) -> None:
    """A classic member's generation must be its member epoch (ILLEGAL_GENERATION); a
    consumer member's epoch must be its member epoch (STALE_MEMBER_EPOCH)."""
    if received != expected and classic:
        raise IllegalGenerationError(
            f"The received generation id {received} does not match the expected member "
            f"epoch {expected}."
        )
    if received != expected:
        raise StaleMemberEpochError(
            f"The received member epoch {received} does not match the expected member "
            f"epoch {expected}."
        )


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> MemberMetadataRecord:
    return MemberMetadataRecord(
        group_id=group_id,
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        server_assignor=member.server_assignor,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        classic_member_metadata=member.classic_member_metadata,
    )


def current_assignment_record(
    group_id: str, member: ConsumerGroupMember
) -> CurrentAssignmentRecord:
    return CurrentAssignmentRecord(
        group_id=group_id,
        member_id=member.member_id,
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=member.state,
        assigned_partitions=dict(member.assigned_partitions),
        partitions_pending_revocation=dict(member.partitions_pending_revocation),
    )
