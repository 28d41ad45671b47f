"""The ShareGroupHeartbeat step function (KIP-932) with Kafka 4.1's rules
(GroupMetadataManager.shareGroupHeartbeat): validation, joining, every member assigned
the partitions of a one-partition topic, epochs and fencing, leaving, session expiry, the
group size limit, topics that grow, and the records replaying to the same group.
Sans-IO: a MockTime drives the sessions. Also the share-group records' bytes (the
SimpleAssignor's own tests: test_share_simple_assignor.py)."""

from __future__ import annotations

import uuid

import pytest

from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share import record_serde
from broker_py.coordinator.group.modern.share.group import ShareGroup, ShareGroupState
from broker_py.coordinator.group.modern.share.manager import (
    ShareGroupManager,
    ShareHeartbeatRequest,
)
from broker_py.coordinator.group.modern.share.records import (
    ShareCurrentAssignmentRecord,
    ShareCurrentAssignmentTombstone,
    ShareGroupEpochRecord,
    ShareMemberMetadataRecord,
    ShareMemberMetadataTombstone,
    ShareTargetAssignmentMemberRecord,
    ShareTargetAssignmentMemberTombstone,
    ShareTargetAssignmentMetadataRecord,
)
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

ONE = TopicMetadata(uuid.UUID(int=1), "one", 1)
SIX = TopicMetadata(uuid.UUID(int=2), "six", 6)
SESSION_MS = 45000
INTERVAL_MS = 5000


def manager(max_size: int = 200) -> tuple[ShareGroupManager, MockTime]:
    time = MockTime()
    m = ShareGroupManager(time, max_size)
    m.update_topics([ONE, SIX])
    return m, time


def beat(m: ShareGroupManager, member: str, epoch: int, topics=None, group: str = "g"):
    return m.heartbeat(
        ShareHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            subscribed_topic_names=topics,
            client_id="c",
            client_host="/127.0.0.1",
        ),
        SESSION_MS,
        INTERVAL_MS,
    )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ShareHeartbeatRequest("", "m", 0, None, ("one",)), "GroupId can't be empty."),
        (ShareHeartbeatRequest("g", " ", 0, None, ("one",)), "MemberId can't be empty."),
        (ShareHeartbeatRequest("g", "m", 0, " ", ("one",)), "RackId can't be empty."),
        (
            ShareHeartbeatRequest("g", "m", 0, None, ()),
            "SubscribedTopicNames must be set in first request.",
        ),
        (ShareHeartbeatRequest("g", "m", -2, None, ("one",)), "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(request_: ShareHeartbeatRequest, message: str) -> None:
    m, _ = manager()
    result = m.heartbeat(request_, SESSION_MS, INTERVAL_MS)
    assert result.response.error_code == ErrorCode.INVALID_REQUEST
    assert result.response.error_message == message
    assert result.records == [] and m.groups == {}


def test_join_gets_every_partition_and_the_records() -> None:
    m, _ = manager()
    result = beat(m, "m1", 0, ("one",))
    r = result.response
    assert r.error_code == ErrorCode.NONE and r.member_id == "m1" and r.member_epoch == 1
    assert r.heartbeat_interval_ms == INTERVAL_MS
    assert r.assignment == {ONE.topic_id: frozenset({0})}
    kinds = [type(rec) for rec in result.records]
    assert kinds == [
        ShareMemberMetadataRecord,
        ShareGroupEpochRecord,
        ShareTargetAssignmentMemberRecord,
        ShareTargetAssignmentMetadataRecord,
        ShareCurrentAssignmentRecord,
    ]
    group = m.group("g")
    assert group is not None and group.state is ShareGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)


def test_a_second_member_gets_the_same_partition_and_the_first_moves_up() -> None:
    m, _ = manager()
    beat(m, "m1", 0, ("one",))
    second = beat(m, "m2", 0, ("one",)).response
    assert second.member_epoch == 2 and second.assignment == {ONE.topic_id: frozenset({0})}
    # The first member moves to the new epoch at its next heartbeat, keeping partition 0:
    # its assignment did not change, so none is sent.
    first = beat(m, "m1", 1).response
    assert first.error_code == ErrorCode.NONE and first.member_epoch == 2
    assert first.assignment is None
    group = m.group("g")
    assert group is not None
    assert all(mem.assigned_partitions == {ONE.topic_id: {0}} for mem in group.members.values())


def test_partitions_of_a_bigger_topic_are_spread_and_all_covered() -> None:
    m, _ = manager()
    for i in range(3):
        beat(m, f"m{i}", 0, ("six",))
    for i in range(3):
        beat(m, f"m{i}", m.groups["g"].members[f"m{i}"].member_epoch)
    group = m.groups["g"]
    held = [set(mem.assigned_partitions.get(SIX.topic_id, ())) for mem in group.members.values()]
    # Six partitions over three members: two each, every partition to one member.
    assert sorted(len(h) for h in held) == [2, 2, 2]
    assert set().union(*held) == set(range(6))


def test_epochs_are_checked() -> None:
    m, _ = manager()
    beat(m, "m1", 0, ("one",))
    greater = beat(m, "m1", 5).response
    assert greater.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert greater.error_message == (
        "The share group member has a greater member epoch (5) than the one known by the "
        "group coordinator (1). The member must abandon all its partitions and rejoin."
    )
    beat(m, "m2", 0, ("one",))
    beat(m, "m1", 1)  # moves to epoch 2
    smaller = beat(m, "m1", 1).response
    assert smaller.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "smaller member epoch (1)" in (smaller.error_message or "")
    unknown = beat(m, "nobody", 2).response
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert unknown.error_message == "Member nobody is not a member of group g."
    missing = beat(m, "m1", 1, group="other").response
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing.error_message == "Share group other not found."


def test_leave_bumps_the_epoch_and_tombstones_the_member() -> None:
    m, _ = manager()
    beat(m, "m1", 0, ("one",))
    beat(m, "m2", 0, ("one",))
    result = beat(m, "m2", -1)
    assert result.response.member_epoch == -1 and result.response.member_id == "m2"
    assert [type(r) for r in result.records] == [
        ShareCurrentAssignmentTombstone,
        ShareTargetAssignmentMemberTombstone,
        ShareMemberMetadataTombstone,
        ShareGroupEpochRecord,
    ]
    group = m.groups["g"]
    assert set(group.members) == {"m1"} and group.group_epoch == 3
    assert beat(m, "m2", -1).response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    beat(m, "m1", -1)
    assert m.groups["g"].state is ShareGroupState.EMPTY


def test_session_expiry_removes_the_member() -> None:
    m, time = manager()
    beat(m, "m1", 0, ("one",))
    time.advance(20)
    beat(m, "m2", 0, ("one",))
    assert m.next_deadline() == pytest.approx(time.monotonic() - 20 + SESSION_MS / 1000)
    time.advance(SESSION_MS / 1000 - 20 + 0.001)
    expired = m.expire()
    assert [(e.group_id, e.member_id) for e in expired] == [("g", "m1")]
    assert set(m.groups["g"].members) == {"m2"}
    # The other session runs on.
    assert m.expire() == []
    time.advance(20)
    assert [e.member_id for e in m.expire()] == ["m2"]


def test_group_size_limit() -> None:
    m, _ = manager(max_size=2)
    beat(m, "m1", 0, ("one",))
    beat(m, "m2", 0, ("one",))
    third = beat(m, "m3", 0, ("one",)).response
    assert third.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert third.error_message == "The share group has reached its maximum capacity of 2 members."


def test_a_topic_that_grows_bumps_the_epoch_and_is_assigned() -> None:
    m, _ = manager()
    beat(m, "m1", 0, ("one",))
    m.update_topics([TopicMetadata(ONE.topic_id, "one", 3), SIX])
    r = beat(m, "m1", 1).response
    assert r.member_epoch == 2 and r.assignment == {ONE.topic_id: frozenset({0, 1, 2})}


def test_records_replay_to_the_same_group_through_their_bytes() -> None:
    m, _ = manager()
    records = []
    for member, epoch, topics in [("m1", 0, ("one",)), ("m2", 0, ("one", "six")), ("m1", 1, None)]:
        records.extend(beat(m, member, epoch, topics).records)
    records.extend(beat(m, "m2", -1).records)
    rebuilt = ShareGroup("g")
    for record in records:
        key, value = record_serde.serialize(record)
        again = record_serde.deserialize(key, value)
        assert again == record
        assert again is not None
        rebuilt.replay(again)
    live = m.groups["g"]
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (
        live.group_epoch,
        live.assignment_epoch,
    )
    assert rebuilt.members == live.members and rebuilt.target_assignment == live.target_assignment


def test_record_bytes_as_kafka_lays_them_out() -> None:
    key, value = record_serde.serialize(ShareGroupEpochRecord("g", 3))
    # int16 type 11, int16-length group id; value version 0, epoch, no tagged fields.
    assert key == b"\x00\x0b\x00\x01g"
    assert value == b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00"
    key, value = record_serde.serialize(
        ShareMemberMetadataRecord("g", "m", None, "c", "/h", ("t",))
    )
    assert key == b"\x00\x0a\x00\x01g\x00\x01m"
    assert value == b"\x00\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x02\x02t" + b"\x00"
    # A consumer-group key type is not a share record.
    assert record_serde.deserialize(b"\x00\x03\x00\x01g", None) is None
