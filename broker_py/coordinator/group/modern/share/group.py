"""A share group (KIP-932): the state its records build.

Every change goes through :meth:`ShareGroup.replay`, whether the records were just made
by a heartbeat or read back from ``__consumer_offsets`` after a failover.

Unlike a consumer group, a partition may be assigned to several members at once (the
share partition hands each record to one of them), so there is no revocation: a member
moves straight to the target assignment and the target epoch on its next heartbeat.

Group state, derived as Kafka's ShareGroupState: Dead once deleted, Empty without
members, Stable otherwise.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.share.records import (
    ShareCurrentAssignmentRecord,
    ShareCurrentAssignmentTombstone,
    ShareGroupEpochRecord,
    ShareGroupEpochTombstone,
    ShareMemberMetadataRecord,
    ShareMemberMetadataTombstone,
    ShareRecord,
    ShareStatePartitionsRecord,
    ShareStatePartitionsTombstone,
    ShareTargetAssignmentMemberRecord,
    ShareTargetAssignmentMemberTombstone,
    ShareTargetAssignmentMetadataRecord,
    ShareTargetAssignmentMetadataTombstone,
)

# The protocol type and group type ListGroups shows for share groups.
SHARE_PROTOCOL_TYPE = "share"
SHARE_GROUP_TYPE = "share"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    # Sorted, without duplicates.
    subscribed_topic_names: tuple[str, ...] = ()
    assigned_partitions: Assignment = field(default_factory=dict)

    def metadata_record(self, group_id: str) -> ShareMemberMetadataRecord:
        return ShareMemberMetadataRecord(
            group_id,
            self.member_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
        )

    def assignment_record(self, group_id: str) -> ShareCurrentAssignmentRecord:
        return ShareCurrentAssignmentRecord(
            group_id,
            self.member_id,
            self.member_epoch,
            self.previous_member_epoch,
            0,
            self.assigned_partitions,
        )


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # The partitions with share-partition state (the last record of type 15).
        self.state_partitions: ShareStatePartitionsRecord | None = None
        self.deleted = False

    @property
    def state(self) -> ShareGroupState:
        if self.deleted:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(
        self, members: dict[str, ShareGroupMember] | None = None
    ) -> set[str]:
        names: set[str] = set()
        for member in (self.members if members is None else members).values():
            names.update(member.subscribed_topic_names)
        return names

    def replay(self, record: ShareRecord) -> None:
        gid = self.group_id
        match record:
            case ShareGroupEpochRecord(epoch=epoch, metadata_hash=metadata_hash):
                self.group_epoch = epoch
                self.metadata_hash = metadata_hash
                self.deleted = False
            case ShareGroupEpochTombstone():
                self.deleted = True
                self.members.clear()
                self.target_assignment.clear()
            case ShareMemberMetadataRecord():
                old = self.members.get(record.member_id) or ShareGroupMember(record.member_id)
                self.members[record.member_id] = dataclasses.replace(
                    old,
                    rack_id=record.rack_id,
                    client_id=record.client_id,
                    client_host=record.client_host,
                    subscribed_topic_names=record.subscribed_topic_names,
                )
            case ShareMemberMetadataTombstone(member_id=member_id):
                self.members.pop(member_id, None)
            case ShareTargetAssignmentMetadataRecord(assignment_epoch=epoch):
                self.assignment_epoch = epoch
            case ShareTargetAssignmentMetadataTombstone():
                self.assignment_epoch = 0
            case ShareTargetAssignmentMemberRecord(member_id=member_id, partitions=partitions):
                self.target_assignment[member_id] = dict(partitions)
            case ShareTargetAssignmentMemberTombstone(member_id=member_id):
                self.target_assignment.pop(member_id, None)
            case ShareCurrentAssignmentRecord():
                old = self.members.get(record.member_id) or ShareGroupMember(record.member_id)
                self.members[record.member_id] = dataclasses.replace(
                    old,
                    member_epoch=record.member_epoch,
                    previous_member_epoch=record.previous_member_epoch,
                    assigned_partitions=dict(record.assigned_partitions),
                )
            case ShareCurrentAssignmentTombstone(member_id=member_id):
                leaving = self.members.get(member_id)
                if leaving is not None:
                    self.members[member_id] = dataclasses.replace(
                        leaving, member_epoch=-1, previous_member_epoch=-1, assigned_partitions={}
                    )
            case ShareStatePartitionsRecord():
                self.state_partitions = record
            case ShareStatePartitionsTombstone():
                self.state_partitions = None
            case _:
                raise TypeError(f"share group {gid}: not a share-group record: {record!r}")

    def snapshot_records(self) -> Iterator[ShareRecord]:
        """Records that, replayed on a new group, rebuild this one."""
        gid = self.group_id
        for member in self.members.values():
            yield member.metadata_record(gid)
        yield ShareGroupEpochRecord(gid, self.group_epoch, self.metadata_hash)
        for member_id, partitions in self.target_assignment.items():
            yield ShareTargetAssignmentMemberRecord(gid, member_id, partitions)
        yield ShareTargetAssignmentMetadataRecord(gid, self.assignment_epoch)
        for member in self.members.values():
            yield member.assignment_record(gid)
        if self.state_partitions is not None:
            yield self.state_partitions

    def tombstones(self) -> list[ShareRecord]:
        """Records that delete the group (it must have no members)."""
        gid = self.group_id
        out: list[ShareRecord] = [
            ShareTargetAssignmentMemberTombstone(gid, m) for m in self.target_assignment
        ]
        out.append(ShareTargetAssignmentMetadataTombstone(gid))
        if self.state_partitions is not None:
            out.append(ShareStatePartitionsTombstone(gid))
        out.append(ShareGroupEpochTombstone(gid))
        return out
