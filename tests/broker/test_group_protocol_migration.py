"""Moving a group between the classic and consumer protocols (Kafka 4's online upgrade and
downgrade) and classic members served inside a consumer group, sans-IO with a MockTime:
the ConsumerProtocol bytes, group.consumer.migration.policy, the conversions both ways,
JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic members with Kafka's errors, their
timers, and their offset commits."""

from __future__ import annotations

import uuid

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from broker_py.coordinator.group.modern.classic_member import (
    ClassicGroupView,
    ClassicMemberView,
    MalformedConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.member import MemberState
from broker_py.coordinator.group.modern.migration import (
    ClassicJoinRequest,
    GroupMigration,
    LeavingMember,
)
from broker_py.coordinator.group.modern.migration_policy import (
    MigrationPolicy,
    MigrationPolicyError,
)
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    TargetAssignmentMetadataRecord,
    TopicMetadata,
)
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import IllegalGenerationError, StaleMemberEpochError

FOO = TopicMetadata(uuid.UUID(int=1), "foo", 4)
SESSION_MS = 10_000
REBALANCE_MS = 20_000


def compile_re2(pattern):
    compiled = re2.compile(pattern)
    return lambda name: compiled.fullmatch(name) is not None


def make(policy=MigrationPolicy.BIDIRECTIONAL, **config):
    time = MockTime()
    manager = ConsumerGroupManager(ConsumerGroupConfig(**config), time, compile_re2)
    manager.update_topics([FOO])
    ids = iter(f"new-{i}" for i in range(1000))
    return GroupMigration(manager, policy, new_member_id=lambda: next(ids)), time


def classic_member(member_id, partitions, protocol="range", owned=None, version=1):
    sub = encode_subscription(["foo"], version=version, owned=owned)
    return ClassicMemberView(
        member_id=member_id,
        instance_id=None,
        client_id="c",
        client_host="/h",
        rebalance_timeout_ms=REBALANCE_MS,
        session_timeout_ms=SESSION_MS,
        protocols=((protocol, sub),),
        assignment=encode_assignment({"foo": partitions}, version) if partitions else b"",
    )


def classic_group(*members, generation=5, protocol="range"):
    return ClassicGroupView(
        group_id="g",
        generation_id=generation,
        protocol_type="consumer",
        protocol_name=protocol,
        state="Stable",
        leader_id=members[0].member_id if members else None,
        members=tuple(members),
    )


def consumer_join(member_id="cm"):
    return HeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=REBALANCE_MS,
        subscribed_topic_names=("foo",),
        topic_partitions={},
    )


def classic_join(member_id, owned=None, protocol="range", **kw):
    sub = encode_subscription(["foo"], version=1, owned=owned)
    fields = dict(
        group_id="g",
        member_id=member_id,
        protocol_type="consumer",
        protocols=((protocol, sub),),
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
    )
    fields.update(kw)
    return ClassicJoinRequest(**fields)


def owners(group):
    return {tp: owner[0] for tp, owner in group.partition_owner.items()}


def upgraded():
    """A classic group of a (0, 1) and b (2, 3) at generation 5, upgraded by cm joining."""
    mig, time = make()
    result = mig.upgrade(
        classic_group(classic_member("a", [0, 1]), classic_member("b", [2, 3])), consumer_join()
    )
    assert result.response.error_code is ErrorCode.NONE
    return mig, time, result


# --- the ConsumerProtocol bytes --------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version):
    data = encode_subscription(
        ["foo", "bar"], version=version, owned={"foo": [1, 0]}, generation_id=7, rack_id="r1"
    )
    sub = decode_subscription(data)
    assert sub.version == version
    assert sub.topics == ("foo", "bar")
    assert sub.owned_partitions == ({"foo": frozenset({0, 1})} if version >= 1 else {})
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)


def test_newer_subscription_versions_read_as_the_highest_known():
    data = encode_subscription(["foo"], version=3, rack_id="r") + b"more fields"
    data = b"\x00\x07" + data[2:]
    sub = decode_subscription(data)
    assert sub.version == 3 and sub.topics == ("foo",) and sub.rack_id == "r"


@pytest.mark.parametrize("version", [0, 1, 3])
def test_assignment_round_trip(version):
    data = encode_assignment({"foo": [3, 1], "bar": [0]}, version)
    decoded = decode_assignment(data)
    assert decoded.version == version
    assert decoded.partitions == {"foo": frozenset({1, 3}), "bar": frozenset({0})}
    assert decoded.user_data is None


@given(st.binary(max_size=64))
def test_garbage_never_raises_anything_else(data):
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except MalformedConsumerProtocolError:
            pass


def test_huge_counts_are_refused_without_allocating():
    with pytest.raises(MalformedConsumerProtocolError):
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")
    with pytest.raises(MalformedConsumerProtocolError):
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff")


# --- group.consumer.migration.policy ---------------------------------------------------


def test_policy_values():
    assert MigrationPolicy.parse("bidirectional").upgrade_enabled
    assert MigrationPolicy.parse("BIDIRECTIONAL").downgrade_enabled
    assert MigrationPolicy.parse(" Upgrade ") is MigrationPolicy.UPGRADE
    assert not MigrationPolicy.UPGRADE.downgrade_enabled
    assert not MigrationPolicy.DOWNGRADE.upgrade_enabled
    assert MigrationPolicy.DOWNGRADE.downgrade_enabled
    assert not MigrationPolicy.DISABLED.upgrade_enabled
    assert not MigrationPolicy.DISABLED.downgrade_enabled
    with pytest.raises(MigrationPolicyError) as e:
        MigrationPolicy.parse("sideways")
    assert str(e.value) == (
        "Invalid value sideways for configuration group.consumer.migration.policy: String "
        "must be one of (case insensitive): bidirectional, upgrade, downgrade, disabled"
    )


# --- upgrade ---------------------------------------------------------------------------


def test_upgrade_keeps_members_and_assignments_and_the_joiner_waits():
    mig, _, result = upgraded()
    group = mig.manager.groups["g"]
    records = result.records
    # The new group's records first: members, epoch, targets, target epoch, assignments.
    kinds = [type(r).__name__ for r in records[:7]]
    assert kinds == [
        "MemberMetadataRecord",
        "MemberMetadataRecord",
        "GroupEpochRecord",
        "TargetAssignmentMemberRecord",
        "TargetAssignmentMemberRecord",
        "TargetAssignmentMetadataRecord",
        "CurrentAssignmentRecord",
    ]
    assert records[2] == GroupEpochRecord("g", 5)
    a, b = group.members["a"], group.members["b"]
    assert a.uses_classic_protocol and b.uses_classic_protocol
    assert a.classic_member_metadata.session_timeout_ms == SESSION_MS
    assert a.assigned_partitions == {FOO.topic_id: frozenset({0, 1})}
    assert b.assigned_partitions == {FOO.topic_id: frozenset({2, 3})}
    assert a.member_epoch == 5 and a.state is MemberState.STABLE
    # The joiner bumped the epoch; its target partitions are still held by a and b.
    assert group.group_epoch == 6
    cm = group.members["cm"]
    assert not cm.uses_classic_protocol
    assert cm.assigned_partitions == {}
    assert result.response.member_epoch == 6
    # The classic group's members' sessions run with their own timeout.
    assert mig.manager.timer_deadline("session", "g", "a") == pytest.approx(
        mig.manager.clock.monotonic() + SESSION_MS / 1000
    )


def test_upgrade_records_replay_to_the_same_group():
    mig, time, result = upgraded()
    other = ConsumerGroupManager(ConsumerGroupConfig(), time, compile_re2)
    for record in result.records:
        other.replay(record)
    assert other.groups["g"].members == mig.manager.groups["g"].members
    assert other.groups["g"].group_epoch == 6


@pytest.mark.parametrize(
    ("policy", "group", "text"),
    [
        (
            MigrationPolicy.DISABLED,
            classic_group(classic_member("a", [0])),
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled.",
        ),
        (
            MigrationPolicy.DOWNGRADE,
            classic_group(classic_member("a", [0])),
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled.",
        ),
        (
            MigrationPolicy.UPGRADE,
            ClassicGroupView("g", 1, "connect", "v1", "Stable", "a", (classic_member("a", []),)),
            "Cannot upgrade classic group g to consumer group because the group does not use "
            "the consumer embedded protocol.",
        ),
        (
            MigrationPolicy.BIDIRECTIONAL,
            classic_group(
                ClassicMemberView("a", None, "c", "/h", 1, 1, (("range", b"\x00"),), b""),
            ),
            "Cannot upgrade classic group g to consumer group because the embedded consumer "
            "protocol is malformed.",
        ),
        (
            MigrationPolicy.BIDIRECTIONAL,
            classic_group(
                ClassicMemberView(
                    "a",
                    None,
                    "c",
                    "/h",
                    1,
                    1,
                    (("custom", encode_subscription(["foo"])),),
                    encode_assignment({"foo": [0]}, 0)[:-4] + b"\x00\x00\x00\x01x",
                ),
                protocol="custom",
            ),
            "Cannot upgrade classic group g to consumer group because an unsupported custom "
            "assignor is in use. Please refer to the documentation or switch to a default "
            "assignor before re-attempting the upgrade.",
        ),
    ],
)
def test_upgrade_refused(policy, group, text):
    mig, _ = make(policy)
    result = mig.upgrade(group, consumer_join())
    assert result.response.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert result.response.error_message == text
    assert result.records == [] and "g" not in mig.manager.groups


def test_upgrade_refused_above_the_consumer_group_size():
    mig, _ = make(max_size=1)
    group = classic_group(classic_member("a", [0]), classic_member("b", [1]))
    result = mig.upgrade(group, consumer_join())
    assert result.response.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert "exceeds the consumer group maximum size" in result.response.error_message


def test_upgrade_needs_a_joining_heartbeat():
    mig, _ = make()
    request = HeartbeatRequest("g", "cm", 3, topic_partitions={})
    result = mig.upgrade(classic_group(classic_member("a", [0])), request)
    assert result.response.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert result.response.error_message == "Group g is not a consumer group."


def test_a_failed_joining_heartbeat_leaves_the_classic_group():
    mig, _ = make()
    request = HeartbeatRequest("g", "cm", 0, rebalance_timeout_ms=1, topic_partitions={})
    result = mig.upgrade(classic_group(classic_member("a", [0])), request)
    assert result.response.error_code is ErrorCode.INVALID_REQUEST
    assert result.records == [] and "g" not in mig.manager.groups


# --- classic members inside the consumer group ----------------------------------------


def test_classic_members_rejoin_revoke_and_the_joiner_gets_its_share():
    mig, _, _ = upgraded()
    group = mig.manager.groups["g"]
    # Behind the group epoch: told to rejoin.
    assert mig.classic_heartbeat("g", "a", None, 5) == (ErrorCode.REBALANCE_IN_PROGRESS, None)
    # A cooperative member rejoins still owning its partitions: it must revoke first.
    join = mig.join(classic_join("a", owned={"foo": [0, 1]}, protocol="cooperative-sticky"))
    assert join.response.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    join = mig.join(classic_join("a", owned={"foo": [0, 1]}))
    assert join.response.error_code is ErrorCode.NONE
    assert join.response.protocol_type == "consumer" and join.response.protocol_name == "range"
    a = group.members["a"]
    kept = a.assigned_partitions.get(FOO.topic_id, frozenset())
    if a.state is MemberState.UNREVOKED_PARTITIONS:
        assert join.response.generation_id == 5
        sync = mig.sync("g", "a", None, 5, "consumer", "range")
        assert sync.error_code is ErrorCode.NONE
        assert decode_assignment(sync.assignment).partitions == ({"foo": kept} if kept else {})
        # It revoked and rejoins owning only what it kept.
        join = mig.join(classic_join("a", owned={"foo": sorted(kept)}))
    assert group.members["a"].member_epoch == 6
    assert join.response.generation_id == 6
    # b, eager, revoked everything before rejoining.
    assert mig.classic_heartbeat("g", "b", None, 5)[0] is ErrorCode.REBALANCE_IN_PROGRESS
    join_b = mig.join(classic_join("b", owned=None))
    assert join_b.response.generation_id == 6
    sync_b = mig.sync("g", "b", None, 6, "consumer", "range")
    assert sync_b.error_code is ErrorCode.NONE
    # The consumer member now gets the partitions released to it.
    cm = mig.heartbeat(HeartbeatRequest("g", "cm", 6, topic_partitions={}))
    assert cm.response.error_code is ErrorCode.NONE
    held = owners(group)
    assert set(held) == {(FOO.topic_id, p) for p in range(4)}
    assert set(held.values()) == {"a", "b", "cm"}


def test_sync_and_heartbeat_errors():
    mig, _, _ = upgraded()
    assert mig.sync("g", "zz", None, 5, None, None).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    bad = mig.sync("g", "a", None, 4, None, None)
    assert bad.error_code is ErrorCode.ILLEGAL_GENERATION
    assert bad.error_message == (
        "The request generation id 4 is not equal to the member epoch 5 of member a."
    )
    bad = mig.sync("g", "a", None, 5, "connect", None)
    assert bad.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    bad = mig.sync("g", "a", None, 5, "consumer", "roundrobin")
    assert bad.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    bad = mig.sync("g", "a", None, 5, "consumer", "range")
    assert bad.error_code is ErrorCode.REBALANCE_IN_PROGRESS
    # A consumer-protocol member is not served through the classic APIs.
    code, message = mig.classic_heartbeat("g", "cm", None, 6)
    assert code is ErrorCode.UNKNOWN_MEMBER_ID
    assert message == "Member cm does not use the classic protocol."
    assert mig.classic_heartbeat("nope", "a", None, 5)[0] is ErrorCode.GROUP_ID_NOT_FOUND


def test_join_errors():
    mig, _, _ = upgraded()
    required = mig.join(classic_join(""))
    assert required.response.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert required.response.member_id == "new-0"
    assert required.records == []
    wrong_type = mig.join(classic_join("x", protocol_type="connect"))
    assert wrong_type.response.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert wrong_type.response.error_message == "Member x's protocols are not supported."
    full, _ = make(max_size=3)
    full.upgrade(
        classic_group(classic_member("a", [0, 1]), classic_member("b", [2, 3])), consumer_join()
    )
    over = full.join(classic_join("x"))
    assert over.response.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_new_classic_member_joins_the_consumer_group():
    mig, _, _ = upgraded()
    required = mig.join(classic_join(""))
    joined = mig.join(classic_join(required.response.member_id))
    assert joined.response.error_code is ErrorCode.NONE
    member = mig.manager.groups["g"].members["new-0"]
    assert member.uses_classic_protocol
    assert mig.manager.groups["g"].group_epoch == 7
    assert any(isinstance(r, MemberMetadataRecord) for r in joined.records)
    # It must sync within its rebalance timeout.
    assert mig.manager.timer_deadline("sync", "g", "new-0") is not None


def test_classic_leave_removes_members_and_reports_each():
    mig, _, _ = upgraded()
    result = mig.leave("g", [LeavingMember("a"), LeavingMember("zz"), LeavingMember("cm")])
    assert [(m.member_id, m.error_code) for m in result.members] == [
        ("a", ErrorCode.NONE),
        ("zz", ErrorCode.UNKNOWN_MEMBER_ID),
        ("cm", ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    assert "a" not in mig.manager.groups["g"].members
    assert result.downgrade is None


def test_classic_member_commits_with_its_generation():
    mig, _, _ = upgraded()
    group = mig.manager.groups["g"]
    group.validate_offset_commit("a", 5, api_version=2)
    with pytest.raises(IllegalGenerationError) as e:
        group.validate_offset_commit("a", 4, api_version=8)
    assert str(e.value) == (
        "The received generation id 4 does not match the expected member epoch 5."
    )
    with pytest.raises(StaleMemberEpochError):
        group.validate_offset_commit("cm", 1, api_version=9)


# --- downgrade -------------------------------------------------------------------------


def test_last_consumer_member_leaving_downgrades():
    mig, _, _ = upgraded()
    group = mig.manager.groups["g"]
    targets = {m: dict(group.target_assignment[m]) for m in ("a", "b")}
    result = mig.heartbeat(HeartbeatRequest("g", "cm", -1))
    assert result.response.error_code is ErrorCode.NONE
    down = result.downgrade
    assert down is not None
    assert "g" not in mig.manager.groups
    assert isinstance(down.records[-1], GroupEpochTombstone)
    classic = down.group
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    assert classic.generation_id == 7  # the group epoch after cm left: epochs only grow
    assert [m.member_id for m in classic.members] == ["a", "b"]
    for m in classic.members:
        assert m.session_timeout_ms == SESSION_MS
        target = targets[m.member_id]
        names = decode_assignment(m.assignment).partitions
        assert names == ({"foo": target[FOO.topic_id]} if target else {})
    # No timer of the old consumer group is left to fire.
    assert mig.manager.next_deadline() is None


def test_downgrade_disabled_keeps_the_consumer_group():
    mig, _ = make(MigrationPolicy.UPGRADE)
    mig.upgrade(classic_group(classic_member("a", [0, 1])), consumer_join())
    result = mig.heartbeat(HeartbeatRequest("g", "cm", -1))
    assert result.downgrade is None
    assert set(mig.manager.groups["g"].members) == {"a"}


def test_downgrade_above_the_classic_group_size_is_not_done():
    mig, _ = make()
    mig.classic_max_size = 1
    mig.upgrade(
        classic_group(classic_member("a", [0, 1]), classic_member("b", [2, 3])), consumer_join()
    )
    assert mig.heartbeat(HeartbeatRequest("g", "cm", -1)).downgrade is None


def classic_round(mig, member_id):
    """What a cooperative classic client does: heartbeat; when told to rejoin, join with
    what it owns, sync, drop what the assignment no longer has, and again (bounded)."""
    group = mig.manager.groups["g"]
    for _ in range(4):
        member = group.members[member_id]
        code, _ = mig.classic_heartbeat("g", member_id, None, member.member_epoch)
        if code is ErrorCode.NONE:
            return
        assert code is ErrorCode.REBALANCE_IN_PROGRESS
        owned = sorted(member.assigned_partitions.get(FOO.topic_id, ()))
        join = mig.join(classic_join(member_id, owned={"foo": owned}))
        assert join.response.error_code is ErrorCode.NONE
        sync = mig.sync("g", member_id, None, join.response.generation_id, "consumer", "range")
        assert sync.error_code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)


def test_session_expiry_of_the_last_consumer_member_downgrades():
    mig, time, _ = upgraded()
    # Classic members keep heartbeating; the consumer member goes silent.
    for _ in range(8):
        time.advance(9)
        classic_round(mig, "a")
        classic_round(mig, "b")
        result = mig.expire()
        if result.downgrades:
            break
    assert [t.member_id for t in result.timers if t.kind == "session"] == ["cm"]
    assert len(result.downgrades) == 1
    assert [m.member_id for m in result.downgrades[0].group.members] == ["a", "b"]


def test_classic_member_session_and_join_timers():
    mig, time, _ = upgraded()
    # a is told to rejoin: the join timer (its rebalance timeout) starts.
    assert mig.classic_heartbeat("g", "a", None, 5)[0] is ErrorCode.REBALANCE_IN_PROGRESS
    assert mig.manager.timer_deadline("join", "g", "a") == pytest.approx(
        time.monotonic() + REBALANCE_MS / 1000
    )
    # b stops heartbeating: its session (10 s, not the consumer default) expires.
    time.advance(SESSION_MS / 1000 - 1)
    mig.classic_heartbeat("g", "a", None, 5)
    time.advance(2)
    result = mig.expire()
    assert [(t.kind, t.member_id) for t in result.timers] == [("session", "b")]
    assert result.downgrades == []  # cm (consumer protocol) is still there
    # a heartbeats but never rejoins: its join timer removes it.
    fired = []
    for _ in range(5):
        time.advance(5)
        if "a" in mig.manager.groups["g"].members:
            mig.classic_heartbeat("g", "a", None, 5)
        fired += [(t.kind, t.member_id) for t in mig.expire().timers]
    assert fired == [("join", "a")]


def test_records_of_a_round_trip_replay():
    """Upgrade then downgrade: replaying every consumer-group record leaves no group."""
    mig, time, up = upgraded()
    down = mig.heartbeat(HeartbeatRequest("g", "cm", -1))
    other = ConsumerGroupManager(ConsumerGroupConfig(), time, compile_re2)
    for record in up.records + down.records + down.downgrade.records:
        other.replay(record)
    assert "g" not in other.groups
    assert any(isinstance(r, TargetAssignmentMetadataRecord) for r in up.records)
    assert any(isinstance(r, CurrentAssignmentRecord) for r in up.records)


def test_an_empty_rack_in_the_subscription_is_no_rack():
    """librdkafka writes rack_id "" in subscription v3 when client.rack is unset."""
    mig, _, _ = upgraded()
    sub = encode_subscription(["foo"], version=3, rack_id="")
    joined = mig.join(classic_join("x", protocols=(("range", sub),)))
    assert joined.response.error_code is ErrorCode.NONE
    assert mig.manager.groups["g"].members["x"].rack_id is None


def test_a_loaded_group_gives_classic_members_their_own_session():
    """After a failover the records rebuild the classic members, metadata included; each
    gets a session of its own timeout."""
    mig, time, result = upgraded()
    other = ConsumerGroupManager(ConsumerGroupConfig(), time, compile_re2)
    for record in result.records:
        other.replay(record)
    other.on_loaded("g")
    now = time.monotonic()
    assert other.groups["g"].members["a"].classic_member_metadata.session_timeout_ms == SESSION_MS
    assert other.timer_deadline("session", "g", "a") == pytest.approx(now + SESSION_MS / 1000)
    assert other.timer_deadline("session", "g", "cm") == pytest.approx(now + 45)


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades():
    """A static consumer restarted with group.protocol=classic and its instance id."""
    mig, _ = make()
    static_join = HeartbeatRequest(
        group_id="g",
        member_id="cm",
        member_epoch=0,
        instance_id="i1",
        rebalance_timeout_ms=REBALANCE_MS,
        subscribed_topic_names=("foo",),
        topic_partitions={},
    )
    mig.upgrade(
        classic_group(classic_member("a", [0, 1]), classic_member("b", [2, 3])), static_join
    )
    group = mig.manager.groups["g"]
    epoch = group.members["cm"].member_epoch
    assert mig.heartbeat(HeartbeatRequest("g", "cm", -2, instance_id="i1")).downgrade is None
    joined = mig.join(classic_join("", instance_id="i1"))
    assert joined.response.error_code is ErrorCode.NONE
    down = joined.downgrade
    assert down is not None and "g" not in mig.manager.groups
    assert joined.response.generation_id == down.group.generation_id >= epoch
    members = {m.member_id: m for m in down.group.members}
    assert set(members) == {"a", "b", joined.response.member_id}
    assert members[joined.response.member_id].instance_id == "i1"


def test_a_classic_static_member_with_a_known_id_of_another_is_fenced():
    mig, _, _ = upgraded()
    mig.join(classic_join("x", instance_id="i2"))
    fenced = mig.join(classic_join("y", instance_id="i2"))
    assert fenced.response.error_code is ErrorCode.FENCED_INSTANCE_ID
