"""The records a consumer group's state is made of, as typed values (not bytes).

Each mirrors one of Kafka 4's ``__consumer_offsets`` record types for groups on the
consumer protocol; the key fields come first. The coordinator's state is exactly the
replay of these records in order (:meth:`ConsumerGroup.replay`), so a caller that
persists them and replays them after a failover rebuilds the same group.

    record                        Kafka key type (key version)   key fields
    GroupEpochRecord              ConsumerGroupMetadata (3)      group_id
    PartitionMetadataRecord       ConsumerGroupPartitionMetadata (4)  group_id
    MemberMetadataRecord          ConsumerGroupMemberMetadata (5)     group_id, member_id
    TargetAssignmentMetadataRecord ConsumerGroupTargetAssignmentMetadata (6) group_id
    TargetAssignmentMemberRecord  ConsumerGroupTargetAssignmentMember (7) group_id, member_id
    CurrentAssignmentRecord       ConsumerGroupCurrentMemberAssignment (8) group_id, member_id
    RegularExpressionRecord       ConsumerGroupRegularExpression (16)     group_id, regex

A ``*Tombstone`` deletes the record with the same key (a null value in Kafka).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker_py.coordinator.group.modern.member import Assignment, MemberState


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True)
class GroupEpochRecord:
    group_id: str
    epoch: int


@dataclass(frozen=True)
class GroupEpochTombstone:
    group_id: str


@dataclass(frozen=True)
class PartitionMetadataRecord:
    group_id: str
    # Sorted by topic name.
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class PartitionMetadataTombstone:
    group_id: str


@dataclass(frozen=True)
class ClassicProtocol:
    """One protocol a classic member offered in its JoinGroup (name and metadata)."""

    name: str
    metadata: bytes


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member on the classic protocol inside a consumer group adds to its metadata."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True)
class MemberMetadataRecord:
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    # Set for a member on the classic protocol; None for one on the consumer protocol.
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class MemberMetadataTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class TargetAssignmentMetadataRecord:
    group_id: str
    assignment_epoch: int


@dataclass(frozen=True)
class TargetAssignmentMetadataTombstone:
    group_id: str


@dataclass(frozen=True)
class TargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class TargetAssignmentMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class CurrentAssignmentRecord:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


@dataclass(frozen=True)
class CurrentAssignmentTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class RegularExpressionRecord:
    group_id: str
    regex: str
    # Sorted topic names the expression matched.
    topics: tuple[str, ...]
    # Wall-clock milliseconds of the resolution.
    timestamp_ms: int
    # The version of the metadata the expression was resolved against (Kafka's metadata
    # image offset); 0 where none is kept.
    version: int = 0


@dataclass(frozen=True)
class RegularExpressionTombstone:
    group_id: str
    regex: str


Record = (
    GroupEpochRecord
    | GroupEpochTombstone
    | PartitionMetadataRecord
    | PartitionMetadataTombstone
    | MemberMetadataRecord
    | MemberMetadataTombstone
    | TargetAssignmentMetadataRecord
    | TargetAssignmentMetadataTombstone
    | TargetAssignmentMemberRecord
    | TargetAssignmentMemberTombstone
    | CurrentAssignmentRecord
    | CurrentAssignmentTombstone
    | RegularExpressionRecord
    | RegularExpressionTombstone
)
