"""The share groups of one coordinator (KIP-932): the ShareGroupHeartbeat step function
and the session timers, as Kafka 4.1's GroupMetadataManager.shareGroupHeartbeat.

Sans-IO: time comes from an injected clock (``monotonic()`` seconds); topics from
:meth:`ShareGroupManager.update_topics`. A heartbeat either fails (an error response,
no records, no change) or returns the records of its changes, already replayed into the
group, in the order they must be persisted.

Heartbeat, in order:
1. validate (INVALID_REQUEST: empty group id, member id or rack id; no subscription in
   the first request; an epoch below -1);
2. epoch -1: the member leaves (GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID): its records are
   tombstoned and the group epoch bumps;
3. find the group (a join creates it; else GROUP_ID_NOT_FOUND), find or create the member
   (UNKNOWN_MEMBER_ID for an unknown member not joining; GROUP_MAX_SIZE_REACHED when a
   new member would exceed group.share.max.size) and check its epoch: any other epoch
   than the member's own is FENCED_MEMBER_EPOCH (a join, epoch 0, is always accepted);
4. update the member's metadata (rack, subscription, client id and host); a new member,
   a changed subscription or changed subscribed topics (ids and partition counts, kept as
   a hash in the group epoch record) bump the group epoch;
5. when the group epoch is ahead of the assignment epoch, compute the target assignment
   with :mod:`.simple_assignor`;
6. the member takes its target assignment and the assignment epoch at once (no
   revocation: a partition may be assigned to several members);
7. restart its session timer.
The response carries the member's assignment when it joined or the assignment changed.

The caller routes a group id here only when no classic or consumer group holds it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker_py.coordinator.group.modern.heartbeat import HeartbeatResponse
from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share import simple_assignor
from broker_py.coordinator.group.modern.share.group import ShareGroup, ShareGroupMember
from broker_py.coordinator.group.modern.share.records import (
    ShareCurrentAssignmentTombstone,
    ShareGroupEpochRecord,
    ShareMemberMetadataTombstone,
    ShareRecord,
    ShareTargetAssignmentMemberRecord,
    ShareTargetAssignmentMemberTombstone,
    ShareTargetAssignmentMetadataRecord,
)
from logstore.protocol.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    KafkaError,
    NonEmptyGroupError,
    UnknownMemberIdError,
)

LEAVE_GROUP_MEMBER_EPOCH = -1

# Kafka's group.share.max.size default.
DEFAULT_MAX_SIZE = 200


class Clock(Protocol):
    def monotonic(self) -> float: ...


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    # None: unchanged since the previous heartbeat.
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    response: HeartbeatResponse
    # Already applied to the group; the caller persists them in order.
    records: list[ShareRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ShareTimerResult:
    """A session that timed out and removed its member."""

    group_id: str
    member_id: str
    records: list[ShareRecord]


def _blank(value: str | None) -> bool:
    """Java's ``value.trim().isEmpty()`` for a set value."""
    return value is not None and all(c <= " " for c in value)


def metadata_hash(topics: Iterable[TopicMetadata]) -> int:
    """A signed 64-bit hash of the subscribed topics' names, ids and partition counts."""
    digest = hashlib.sha256()
    for t in sorted(topics, key=lambda t: t.name):
        digest.update(f"{t.name}\0{t.topic_id}\0{t.num_partitions}\n".encode())
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


class ShareGroupManager:
    def __init__(self, clock: Clock, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.clock = clock
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}
        # Topic name -> metadata, as the metadata cache knows them.
        self.topics: dict[str, TopicMetadata] = {}
        # (group id, member id) -> monotonic deadline of the member's session.
        self._sessions: dict[tuple[str, str], float] = {}

    def update_topics(self, topics: Iterable[TopicMetadata]) -> None:
        """The topics that exist now; groups notice on their members' next heartbeats."""
        self.topics = {t.name: t for t in topics}

    def group(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.deleted else group

    # --- heartbeat -----------------------------------------------------------------

    def heartbeat(
        self,
        request: ShareHeartbeatRequest,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
    ) -> ShareHeartbeatResult:
        """``session_timeout_ms`` and ``heartbeat_interval_ms``: the group's
        share.session.timeout.ms and share.heartbeat.interval.ms in force."""
        try:
            _validate(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._join_or_heartbeat(request, session_timeout_ms, heartbeat_interval_ms)
        except KafkaError as e:
            return ShareHeartbeatResult(
                HeartbeatResponse(error_code=e.errno, error_message=str(e) or None)
            )

    def _join_or_heartbeat(
        self, r: ShareHeartbeatRequest, session_timeout_ms: int, interval_ms: int
    ) -> ShareHeartbeatResult:
        group = self.group(r.group_id)
        if group is None:
            if r.member_epoch != 0:
                raise GroupIdNotFoundError(f"Share group {r.group_id} not found.")
            group = ShareGroup(r.group_id)
        member = group.members.get(r.member_id)
        is_new = member is None
        if member is None:
            if r.member_epoch != 0:
                raise UnknownMemberIdError(
                    f"Member {r.member_id} is not a member of group {r.group_id}."
                )
            if len(group.members) >= self.max_size:
                raise GroupMaxSizeReachedError(
                    f"The share group has reached its maximum capacity of {self.max_size} members."
                )
            member = ShareGroupMember(r.member_id)
        elif r.member_epoch != 0:
            _check_epoch(member, r.member_epoch)

        updated = dataclasses.replace(
            member,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            subscribed_topic_names=(
                tuple(sorted(set(r.subscribed_topic_names)))
                if r.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            client_id=r.client_id,
            client_host=r.client_host,
        )
        records: list[ShareRecord] = []
        if is_new or updated.metadata_record(group.group_id) != member.metadata_record(
            group.group_id
        ):
            records.append(updated.metadata_record(group.group_id))
        bump = is_new or updated.subscribed_topic_names != member.subscribed_topic_names

        members_after = dict(group.members)
        members_after[updated.member_id] = updated
        metadata = self._subscription_metadata(group.subscribed_topic_names(members_after))
        hashed = metadata_hash(metadata.values())
        group_epoch = group.group_epoch
        if bump or hashed != group.metadata_hash:
            group_epoch += 1
            records.append(ShareGroupEpochRecord(group.group_id, group_epoch, hashed))

        target_epoch = group.assignment_epoch
        targets: Mapping[str, Assignment] = group.target_assignment
        if group_epoch > group.assignment_epoch:
            targets, target_records = self._target_assignment(
                group, members_after, metadata, group_epoch
            )
            records.extend(target_records)
            target_epoch = group_epoch

        target = dict(targets.get(updated.member_id, {}))
        reconciled = updated
        if updated.member_epoch != target_epoch or dict(updated.assigned_partitions) != target:
            reconciled = dataclasses.replace(
                updated,
                member_epoch=target_epoch,
                previous_member_epoch=updated.member_epoch,
                assigned_partitions=target,
            )
            records.append(reconciled.assignment_record(group.group_id))

        self.groups[group.group_id] = group
        for record in records:
            group.replay(record)
        self._sessions[(group.group_id, r.member_id)] = (
            self.clock.monotonic() + max(0, session_timeout_ms) / 1000
        )
        send_assignment = r.member_epoch == 0 or dict(member.assigned_partitions) != target
        return ShareHeartbeatResult(
            HeartbeatResponse(
                member_id=reconciled.member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=interval_ms,
                assignment={t: frozenset(p) for t, p in target.items()}
                if send_assignment
                else None,
            ),
            records,
        )

    def _subscription_metadata(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        return {n: self.topics[n] for n in sorted(names) if n in self.topics}

    def _target_assignment(
        self,
        group: ShareGroup,
        members: Mapping[str, ShareGroupMember],
        metadata: Mapping[str, TopicMetadata],
        epoch: int,
    ) -> tuple[dict[str, Assignment], list[ShareRecord]]:
        new = simple_assignor.assign(
            {
                mid: frozenset(
                    metadata[n].topic_id for n in m.subscribed_topic_names if n in metadata
                )
                for mid, m in members.items()
            },
            {t.topic_id: t.num_partitions for t in metadata.values()},
            group.target_assignment,
        )
        records: list[ShareRecord] = []
        for mid in sorted(members):
            target = new.get(mid, {})
            if mid not in group.target_assignment or dict(group.target_assignment[mid]) != target:
                records.append(ShareTargetAssignmentMemberRecord(group.group_id, mid, target))
        records.append(ShareTargetAssignmentMetadataRecord(group.group_id, epoch))
        return dict(new), records

    # --- leaving and fencing -------------------------------------------------------

    def _leave(self, r: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.group(r.group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Share group {r.group_id} not found.")
        member = group.members.get(r.member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {r.member_id} is not a member of group {r.group_id}."
            )
        records = self._fence(group, member)
        return ShareHeartbeatResult(
            HeartbeatResponse(member_id=r.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH),
            records,
        )

    def _fence(self, group: ShareGroup, member: ShareGroupMember) -> list[ShareRecord]:
        """Removes the member; returns the records, already applied."""
        gid = group.group_id
        members_after = {k: v for k, v in group.members.items() if k != member.member_id}
        metadata = self._subscription_metadata(group.subscribed_topic_names(members_after))
        records: list[ShareRecord] = [
            ShareCurrentAssignmentTombstone(gid, member.member_id),
            ShareTargetAssignmentMemberTombstone(gid, member.member_id),
            ShareMemberMetadataTombstone(gid, member.member_id),
            ShareGroupEpochRecord(gid, group.group_epoch + 1, metadata_hash(metadata.values())),
        ]
        for record in records:
            group.replay(record)
        self._sessions.pop((gid, member.member_id), None)
        return records

    def delete_group(self, group_id: str) -> list[ShareRecord]:
        """Deletes an empty group; returns the tombstones, already applied."""
        group = self.group(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Share group {group_id} not found.")
        if group.members:
            raise NonEmptyGroupError(f"Share group {group_id} is not empty.")
        records = group.tombstones()
        for record in records:
            group.replay(record)
        del self.groups[group_id]
        return records

    # --- loading -------------------------------------------------------------------

    def replay(self, record: ShareRecord) -> None:
        """Applies a record read back from the log (loading after a failover)."""
        group = self.groups.get(record.group_id)
        if group is None:
            group = self.groups[record.group_id] = ShareGroup(record.group_id)
        group.replay(record)
        if group.deleted:
            del self.groups[record.group_id]

    def on_loaded(self, group_id: str, session_timeout_ms: int) -> None:
        """Every member of a group just loaded gets a full session."""
        group = self.group(group_id)
        if group is None:
            return
        deadline = self.clock.monotonic() + max(0, session_timeout_ms) / 1000
        for member_id in group.members:
            self._sessions[(group_id, member_id)] = deadline

    def forget_group(self, group_id: str) -> None:
        """Drops a group this coordinator no longer serves, with its sessions."""
        self.groups.pop(group_id, None)
        for key in [k for k in self._sessions if k[0] == group_id]:
            del self._sessions[key]

    # --- timers --------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return min(self._sessions.values(), default=None)

    def session_deadline(self, group_id: str, member_id: str) -> float | None:
        return self._sessions.get((group_id, member_id))

    def expire(self) -> list[ShareTimerResult]:
        """Removes the members whose session timed out by the clock's now."""
        now = self.clock.monotonic()
        out: list[ShareTimerResult] = []
        for key, deadline in sorted(self._sessions.items(), key=lambda kv: kv[1]):
            if deadline > now:
                continue
            self._sessions.pop(key, None)
            group = self.group(key[0])
            member = None if group is None else group.members.get(key[1])
            if group is None or member is None:
                continue
            out.append(ShareTimerResult(key[0], key[1], self._fence(group, member)))
        return out


def _validate(r: ShareHeartbeatRequest) -> None:
    if _blank(r.group_id) or not r.group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if _blank(r.member_id) or not r.member_id:
        raise InvalidRequestError("MemberId can't be empty.")
    if _blank(r.rack_id):
        raise InvalidRequestError("RackId can't be empty.")
    if r.member_epoch == 0:
        if not r.subscribed_topic_names:
            raise InvalidRequestError("SubscribedTopicNames must be set in first request.")
    elif r.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise InvalidRequestError("MemberEpoch is invalid.")


def _check_epoch(member: ShareGroupMember, received: int) -> None:
    if received > member.member_epoch:
        raise FencedMemberEpochError(
            f"The share group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    if received < member.member_epoch:
        raise FencedMemberEpochError(
            f"The share group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
