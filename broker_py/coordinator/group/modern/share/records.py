"""The records a share group's state is made of, as typed values (not bytes).

Each mirrors one of Kafka 4.1's ``__consumer_offsets`` record types for share groups;
the key fields come first. A share group's state is exactly the replay of these records
in order (:meth:`~.group.ShareGroup.replay`).

    record                            Kafka key type (key version)          key fields
    ShareMemberMetadataRecord         ShareGroupMemberMetadata (10)         group_id, member_id
    ShareGroupEpochRecord             ShareGroupMetadata (11)               group_id
    ShareTargetAssignmentMetadataRecord ShareGroupTargetAssignmentMetadata (12) group_id
    ShareTargetAssignmentMemberRecord ShareGroupTargetAssignmentMember (13) group_id, member_id
    ShareCurrentAssignmentRecord      ShareGroupCurrentMemberAssignment (14) group_id, member_id
    ShareStatePartitionsRecord        ShareGroupStatePartitionMetadata (15) group_id

A ``*Tombstone`` deletes the record with the same key (a null value in Kafka).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from broker_py.coordinator.group.modern.member import Assignment

# Topic id -> (topic name, partitions): Kafka's TopicPartitionsInfo.
TopicPartitionsInfo = Mapping[uuid.UUID, tuple[str, frozenset[int]]]


@dataclass(frozen=True)
class ShareGroupEpochRecord:
    group_id: str
    epoch: int
    # A hash of the subscribed topics' ids and partition counts when the epoch was set;
    # a different hash later means the topics changed and the epoch bumps.
    metadata_hash: int = 0


@dataclass(frozen=True)
class ShareGroupEpochTombstone:
    group_id: str


@dataclass(frozen=True)
class ShareMemberMetadataRecord:
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    # Sorted, without duplicates.
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareMemberMetadataTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareTargetAssignmentMetadataRecord:
    group_id: str
    assignment_epoch: int


@dataclass(frozen=True)
class ShareTargetAssignmentMetadataTombstone:
    group_id: str


@dataclass(frozen=True)
class ShareTargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class ShareTargetAssignmentMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareCurrentAssignmentRecord:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    # Kafka's MemberState byte; a share member is always STABLE (0).
    state: int
    assigned_partitions: Assignment


@dataclass(frozen=True)
class ShareCurrentAssignmentTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareStatePartitionsRecord:
    """Which partitions have share-partition state for the group (Kafka's
    ShareGroupStatePartitionMetadata): being initialized, initialized, and topics whose
    state is being deleted. A topic id is in at most one of ``initialized`` and
    ``deleting``; a partition in at most one of ``initializing`` and ``initialized``."""

    group_id: str
    initializing: TopicPartitionsInfo
    initialized: TopicPartitionsInfo
    # Topic id -> topic name.
    deleting: Mapping[uuid.UUID, str]


@dataclass(frozen=True)
class ShareStatePartitionsTombstone:
    group_id: str


ShareRecord = (
    ShareGroupEpochRecord
    | ShareGroupEpochTombstone
    | ShareMemberMetadataRecord
    | ShareMemberMetadataTombstone
    | ShareTargetAssignmentMetadataRecord
    | ShareTargetAssignmentMetadataTombstone
    | ShareTargetAssignmentMemberRecord
    | ShareTargetAssignmentMemberTombstone
    | ShareCurrentAssignmentRecord
    | ShareCurrentAssignmentTombstone
    | ShareStatePartitionsRecord
    | ShareStatePartitionsTombstone
)

# For isinstance: every share-group record class.
SHARE_RECORD_CLASSES = (
    ShareGroupEpochRecord,
    ShareGroupEpochTombstone,
    ShareMemberMetadataRecord,
    ShareMemberMetadataTombstone,
    ShareTargetAssignmentMetadataRecord,
    ShareTargetAssignmentMetadataTombstone,
    ShareTargetAssignmentMemberRecord,
    ShareTargetAssignmentMemberTombstone,
    ShareCurrentAssignmentRecord,
    ShareCurrentAssignmentTombstone,
    ShareStatePartitionsRecord,
    ShareStatePartitionsTombstone,
)
