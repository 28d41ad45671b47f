"""The ConsumerGroupHeartbeat step function of the consumer protocol, with Kafka's
expectations (GroupMetadataManagerTest): validation, joining, epochs, revocation before
assignment, leaving, static members, timers, regex subscriptions and topics that grow.
Sans-IO: a MockTime drives the timers; regexes are compiled with google-re2."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import re2

from broker_py.coordinator.group.modern.config import ConsumerGroupConfig, ConsumerGroupConfigError
from broker_py.coordinator.group.modern.group import ConsumerGroupState
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.member import MemberState
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentRecord,
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    RegularExpressionRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TopicMetadata,
)
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

FOO = TopicMetadata(uuid.UUID(int=1), "foo", 6)
BAR = TopicMetadata(uuid.UUID(int=2), "bar", 3)


def compile_re2(pattern: str):
    try:
        compiled = re2.compile(pattern)
    except re2.error as e:
        raise ValueError(e.args[0].decode() if isinstance(e.args[0], bytes) else str(e)) from None
    return lambda name: compiled.fullmatch(name) is not None


def make(topics=(FOO, BAR), **config):
    time = MockTime()
    m = ConsumerGroupManager(ConsumerGroupConfig(**config), time, compile_re2)
    m.update_topics(topics)
    return m, time


def join(member_id, topics=("foo", "bar"), **kw):
    fields = dict(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=tuple(topics) if topics is not None else None,
        topic_partitions={},
    )
    fields.update(kw)
    return HeartbeatRequest(**fields)


def beat(member_id, epoch, owned=None, **kw):
    return HeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=epoch, topic_partitions=owned, **kw
    )


def parts(assignment):
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


# --- config ----------------------------------------------------------------------------


def test_config_defaults_and_bounds():
    c = ConsumerGroupConfig()
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_size) == (45000, 5000, 2**31 - 1)
    assert c.assignors == ("uniform", "range") and c.default_assignor == "uniform"
    with pytest.raises(ConsumerGroupConfigError, match="session.timeout"):
        ConsumerGroupConfig(session_timeout_ms=30000)
    with pytest.raises(ConsumerGroupConfigError, match="heartbeat.interval"):
        ConsumerGroupConfig(heartbeat_interval_ms=16000)
    with pytest.raises(ConsumerGroupConfigError, match="less than"):
        ConsumerGroupConfig(
            session_timeout_ms=6000,
            min_session_timeout_ms=6000,
            heartbeat_interval_ms=6000,
            min_heartbeat_interval_ms=1000,
        )
    with pytest.raises(ConsumerGroupConfigError, match="max.size"):
        ConsumerGroupConfig(max_size=0)
    with pytest.raises(ConsumerGroupConfigError, match="unknown assignor"):
        ConsumerGroupConfig(assignors=("sticky",))
    c = ConsumerGroupConfig.from_values(
        {
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
            "group.consumer.heartbeat.interval.ms": "6000",
        }
    )
    assert c.assignors == ("range",) and c.heartbeat_interval_ms == 6000


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "version", "code", "message"),
    [
        (beat("", 1), 1, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (join(" "), 1, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (join("m", group_id=""), 1, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
        (join("m", instance_id=""), 1, ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
        (join("m", rack_id=" "), 1, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
        (
            join("m", rebalance_timeout_ms=-1),
            1,
            ErrorCode.INVALID_REQUEST,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            join("m", topic_partitions=None),
            1,
            ErrorCode.INVALID_REQUEST,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            join("m", topic_partitions={FOO.topic_id: frozenset({0})}),
            1,
            ErrorCode.INVALID_REQUEST,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            join("m", topics=()),
            1,
            ErrorCode.INVALID_REQUEST,
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        (beat("m", -2), 1, ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
        (beat("m", -3), 1, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        (
            join("m", server_assignor="sticky"),
            1,
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
        (
            join("m", topics=None, subscribed_topic_regex="foo("),
            1,
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            "SubscribedTopicRegex `foo(` is not a valid regular expression",
        ),
        (beat("m", 1), 1, ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group g not found."),
        (beat("m", -1), 1, ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group g not found."),
    ],
)
def test_invalid_requests(request_, version, code, message):
    m, _ = make()
    result = m.heartbeat(request_, version)
    assert result.response.error_code == code
    assert result.response.error_message.startswith(message)
    assert result.records == [] and m.groups == {}


def test_version_0_member_id_is_given_by_the_coordinator():
    m, _ = make()
    m.new_member_id = lambda: "generated"
    result = m.heartbeat(join(""), api_version=0)
    assert result.response.error_code == ErrorCode.NONE
    assert result.response.member_id == "generated"


# --- joining ---------------------------------------------------------------------------


def test_member_joins_empty_group():
    m, _ = make(assignors=("range",))
    result = m.heartbeat(join("m1", client_id="c", client_host="/h"))
    r = result.response
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (
        ErrorCode.NONE,
        "m1",
        1,
        5000,
    )
    everything = {FOO.topic_id: frozenset(range(6)), BAR.topic_id: frozenset(range(3))}
    assert r.assignment == everything
    assert result.records == [
        MemberMetadataRecord("g", "m1", None, None, "c", "/h", ("bar", "foo"), None, None, 5000),
        PartitionMetadataRecord("g", (BAR, FOO)),
        GroupEpochRecord("g", 1),
        TargetAssignmentMemberRecord("g", "m1", everything),
        TargetAssignmentMetadataRecord("g", 1),
        CurrentAssignmentRecord("g", "m1", 1, 0, MemberState.STABLE, everything, {}),
    ]
    group = m.groups["g"]
    assert group.state is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)


def test_heartbeat_without_change_writes_nothing():
    m, _ = make()
    first = m.heartbeat(join("m1")).response
    result = m.heartbeat(beat("m1", 1, first.assignment))
    assert result.records == []
    assert result.response.member_epoch == 1
    assert result.response.assignment is None  # not a full request, nothing changed


def test_new_member_waits_for_partitions_to_be_revoked():
    m, _ = make(assignors=("range",))
    a1 = m.heartbeat(join("m1")).response.assignment
    # m2 joins: epoch 2; the target splits foo and bar, but m1 still holds everything.
    r2 = m.heartbeat(join("m2")).response
    assert r2.member_epoch == 2 and r2.assignment == {}
    assert m.groups["g"].members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    assert m.groups["g"].state is ConsumerGroupState.RECONCILING
    # m1 is asked to revoke, still at epoch 1.
    r1 = m.heartbeat(beat("m1", 1, a1)).response
    assert r1.member_epoch == 1
    m1 = m.groups["g"].members["m1"]
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    keep = r1.assignment
    assert parts(keep) == {(FOO.topic_id, p) for p in (0, 1, 2)} | {
        (BAR.topic_id, p) for p in (0, 1)
    }
    # m2 gets nothing while m1 has not revoked.
    assert m.heartbeat(beat("m2", 2, {})).response.assignment is None
    # m1 revokes: it moves to epoch 2.
    r1 = m.heartbeat(beat("m1", 1, keep)).response
    assert r1.member_epoch == 2 and r1.assignment is None
    # m2 now gets the released partitions.
    r2 = m.heartbeat(beat("m2", 2, {})).response
    assert parts(r2.assignment) == {(FOO.topic_id, p) for p in (3, 4, 5)} | {(BAR.topic_id, 2)}
    assert m.groups["g"].state is ConsumerGroupState.STABLE


def test_subscription_change_bumps_the_group_epoch():
    m, _ = make()
    a = m.heartbeat(join("m1")).response.assignment
    result = m.heartbeat(beat("m1", 1, a, subscribed_topic_names=("foo",)))
    assert GroupEpochRecord("g", 2) in result.records
    assert result.response.member_epoch == 1  # bar must be revoked first
    assert parts(result.response.assignment) == {(FOO.topic_id, p) for p in range(6)}
    done = m.heartbeat(beat("m1", 1, result.response.assignment)).response
    assert done.member_epoch == 2


def test_epochs_are_checked():
    m, _ = make()
    a = m.heartbeat(join("m1")).response.assignment
    m.heartbeat(join("m2"))
    assert m.heartbeat(beat("m1", 2, a)).response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert m.heartbeat(beat("m1", 0, a)).response.error_code == ErrorCode.INVALID_REQUEST
    assert m.heartbeat(beat("zz", 1, a)).response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # m1 moves to epoch 2; a heartbeat at epoch 1 with partitions inside its assignment
    # is still accepted (the response with epoch 2 may have been lost)...
    keep = m.heartbeat(beat("m1", 1, a)).response.assignment
    r = m.heartbeat(beat("m1", 1, keep)).response
    assert r.member_epoch == 2
    assert m.heartbeat(beat("m1", 1, keep)).response.error_code == ErrorCode.NONE
    # ...but not with partitions outside it, nor at an older epoch.
    assert m.heartbeat(beat("m1", 1, a)).response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    m.groups["g"].members["m1"] = dataclasses.replace(
        m.groups["g"].members["m1"], previous_member_epoch=1, member_epoch=3
    )
    assert m.heartbeat(beat("m1", 2, {})).response.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_fenced_member_rejoins_with_epoch_0_and_the_same_member_id():
    # Kafka (KAFKA-19233): a member that rejoins with epoch 0 is accepted whatever its
    # state; it owns nothing, so revocations it was asked for are done.
    m, _ = make()
    a1 = m.heartbeat(join("m1")).response.assignment
    m.heartbeat(join("m2"))
    m.heartbeat(beat("m1", 1, a1))
    assert m.groups["g"].members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    r = m.heartbeat(join("m1")).response
    assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, 2)
    assert m.groups["g"].members["m1"].state is MemberState.STABLE
    assert len(parts(r.assignment)) == 5
    # A stable member rejoining gets its whole assignment back at its epoch.
    again = m.heartbeat(join("m1")).response
    assert (again.member_epoch, again.assignment) == (2, r.assignment)


def test_group_max_size():
    m, _ = make(max_size=1)
    m.heartbeat(join("m1"))
    r = m.heartbeat(join("m2")).response
    assert r.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The consumer group has reached its maximum capacity of 1 members."
    assert m.heartbeat(join("m1")).response.error_code == ErrorCode.NONE  # a rejoin is fine


def test_server_assignor_named_by_the_members_wins():
    m, _ = make()
    m.heartbeat(join("m1", server_assignor="range"))
    m.heartbeat(join("m2", server_assignor="range"))
    assert m.assignor_name("g") == "range" and m.assignor_name("other") == "uniform"
    target = m.groups["g"].target_assignment
    # range: co-partitioned numbering per topic.
    assert target["m1"] == {FOO.topic_id: frozenset({0, 1, 2}), BAR.topic_id: frozenset({0, 1})}
    assert target["m2"] == {FOO.topic_id: frozenset({3, 4, 5}), BAR.topic_id: frozenset({2})}


# --- leaving ---------------------------------------------------------------------------


def test_member_leaves():
    m, _ = make()
    m.heartbeat(join("m1"))
    result = m.heartbeat(beat("m1", -1))
    assert (result.response.member_id, result.response.member_epoch) == ("m1", -1)
    assert result.records == [
        CurrentAssignmentTombstone("g", "m1"),
        TargetAssignmentMemberTombstone("g", "m1"),
        MemberMetadataTombstone("g", "m1"),
        PartitionMetadataRecord("g", ()),
        GroupEpochRecord("g", 2),
    ]
    group = m.groups["g"]
    assert group.state is ConsumerGroupState.EMPTY and group.partition_owner == {}
    assert m.heartbeat(beat("m1", -1)).response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert m.next_deadline() is None


def test_leaving_member_frees_its_partitions_for_the_others():
    m, _ = make()
    a1 = m.heartbeat(join("m1")).response.assignment
    m.heartbeat(join("m2"))
    m.heartbeat(beat("m1", -1))
    r2 = m.heartbeat(beat("m2", 2, {})).response
    assert r2.member_epoch == 3 and parts(r2.assignment) == parts(a1)


def test_static_member_leaves_and_comes_back():
    m, _ = make()
    a = m.heartbeat(join("m1", instance_id="i1")).response.assignment
    r = m.heartbeat(beat("m1", -2, instance_id="i1"))
    assert r.response.member_epoch == -2 and len(r.records) == 1
    group = m.groups["g"]
    assert group.group_epoch == 1 and parts(group.members["m1"].assigned_partitions) == parts(a)
    # Another instance id may join meanwhile, but not this one under another member id
    # before it was released... it was released (-2): the new member takes its place.
    result = m.heartbeat(join("m1b", instance_id="i1"))
    assert result.response.member_epoch == 1 and parts(result.response.assignment) == parts(a)
    assert set(group.members) == {"m1b"} and group.group_epoch == 1
    assert group.static_members == {"i1": "m1b"}
    # The new incarnation holds the instance id: a third one is refused.
    r = m.heartbeat(join("m1c", instance_id="i1")).response
    assert r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    r = m.heartbeat(beat("m1", 1, {}, instance_id="i1")).response
    assert r.error_code == ErrorCode.FENCED_INSTANCE_ID
    r = m.heartbeat(beat("m1b", 1, {}, instance_id="i9")).response
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert r.error_message == "Instance id i9 is unknown."


def test_static_member_that_does_not_return_is_removed_after_its_session():
    m, time = make()
    m.heartbeat(join("m1", instance_id="i1"))
    m.heartbeat(beat("m1", -2, instance_id="i1"))
    time.advance(44.9)
    assert m.expire() == []
    time.advance(0.2)
    [fired] = m.expire()
    assert (fired.kind, fired.member_id) == ("session", "m1")
    assert m.groups["g"].members == {} and m.groups["g"].static_members == {}


# --- timers ----------------------------------------------------------------------------


def test_session_timeout_fences_a_silent_member():
    m, time = make()
    m.heartbeat(join("m1"))
    m.heartbeat(join("m2"))
    assert m.next_deadline() == pytest.approx(time.monotonic() + 45)
    time.advance(30)
    m.heartbeat(beat("m2", 2, {}))
    time.advance(15)
    [fired] = m.expire()
    assert (fired.kind, fired.member_id) == ("session", "m1")
    assert GroupEpochRecord("g", 3) in fired.records
    assert set(m.groups["g"].members) == {"m2"}
    assert m.heartbeat(beat("m1", 1, {})).response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    m, time = make()
    a1 = m.heartbeat(join("m1", rebalance_timeout_ms=3000)).response.assignment
    m.heartbeat(join("m2"))
    m.heartbeat(beat("m1", 1, a1))  # asked to revoke
    assert m.timer_deadline("rebalance", "g", "m1") == pytest.approx(time.monotonic() + 3)
    time.advance(2)
    m.heartbeat(beat("m1", 1, a1))  # still owns them: keeps waiting, same deadline
    time.advance(1)
    [fired] = m.expire()
    assert (fired.kind, fired.member_id) == ("rebalance", "m1")
    assert set(m.groups["g"].members) == {"m2"}


def test_rebalance_timer_stops_once_revoked():
    m, time = make()
    a1 = m.heartbeat(join("m1", rebalance_timeout_ms=3000)).response.assignment
    m.heartbeat(join("m2"))
    keep = m.heartbeat(beat("m1", 1, a1)).response.assignment
    m.heartbeat(beat("m1", 1, keep))
    assert m.timer_deadline("rebalance", "g", "m1") is None
    time.advance(4)
    assert m.expire() == []


# --- topics and regexes ----------------------------------------------------------------


def _join_by_regex(m, member_id, regex):
    """A member joining by regex alone: nothing until the regex is resolved, then the
    matched topics at the next group epoch."""
    r = m.heartbeat(join(member_id, topics=None, subscribed_topic_regex=regex)).response
    assert r.member_epoch == 1 and r.assignment == {}
    assert m.regex_refresh_due("g")
    assert m.resolve_pending_regexes("g")
    return m.heartbeat(beat(member_id, 1, {})).response


def test_regex_subscription_follows_new_topics():
    m, _ = make()
    r = _join_by_regex(m, "m1", "fo.*")
    assert r.member_epoch == 2 and r.assignment == {FOO.topic_id: frozenset(range(6))}
    assert m.groups["g"].resolved_regexes["fo.*"].topics == {"foo"}
    fox = TopicMetadata(uuid.UUID(int=3), "fox", 2)
    m.update_topics([FOO, BAR, fox])
    # The heartbeat after the topics changed only marks the regex due.
    r = m.heartbeat(beat("m1", 2, r.assignment)).response
    assert r.member_epoch == 2 and m.regex_refresh_due("g")
    records = m.resolve_pending_regexes("g")
    assert any(
        isinstance(x, RegularExpressionRecord) and x.topics == ("foo", "fox") for x in records
    )
    assert m.groups["g"].group_epoch == 3 and not m.regex_refresh_due("g")
    r = m.heartbeat(beat("m1", 2, r.assignment)).response
    assert r.member_epoch == 3
    assert r.assignment[fox.topic_id] == frozenset({0, 1})


def test_new_regex_is_resolved_after_the_heartbeat():
    """Kafka's sequence: a member joining with topic names and a regex nobody in the
    group uses gets the named topics first; the regex's topics come once it is resolved."""
    m, _ = make()
    first = m.heartbeat(join("m1", topics=("bar",), subscribed_topic_regex="fo.*"))
    assert first.response.assignment == {BAR.topic_id: frozenset(range(3))}
    assert not any(isinstance(x, RegularExpressionRecord) for x in first.records)
    assert m.groups["g"].group_epoch == 1 and "fo.*" not in m.groups["g"].resolved_regexes
    # Heartbeats before the resolution change nothing.
    again = m.heartbeat(beat("m1", 1, first.response.assignment))
    assert again.records == [] and again.response.member_epoch == 1
    records = m.resolve_pending_regexes("g")
    assert [type(x).__name__ for x in records] == [
        "RegularExpressionRecord",
        "PartitionMetadataRecord",
        "GroupEpochRecord",
    ]
    assert m.resolve_pending_regexes("g") == []
    r = m.heartbeat(beat("m1", 1, first.response.assignment)).response
    assert r.member_epoch == 2
    assert r.assignment == {BAR.topic_id: frozenset(range(3)), FOO.topic_id: frozenset(range(6))}


def test_regex_already_resolved_in_the_group_is_used_at_once():
    m, _ = make()
    _join_by_regex(m, "m1", "fo.*")
    r = m.heartbeat(join("m2", topics=None, subscribed_topic_regex="fo.*")).response
    assert r.member_epoch == 3 and not m.regex_refresh_due("g")
    assert m.groups["g"].target_assignment["m2"]


def test_regex_is_resolved_again_after_the_refresh_interval():
    m, time = make(regex_refresh_interval_ms=60000)
    r = _join_by_regex(m, "m1", "fo.*")
    time.advance(30)
    m.heartbeat(beat("m1", 2, r.assignment))
    assert not m.regex_refresh_due("g")
    time.advance(31)
    m.heartbeat(beat("m1", 2, r.assignment))
    assert m.regex_refresh_due("g")
    (record,) = m.resolve_pending_regexes("g")
    # Same topics: a new resolution time, no new group epoch.
    assert isinstance(record, RegularExpressionRecord) and record.topics == ("foo",)
    assert m.groups["g"].group_epoch == 2


def test_regex_is_a_full_match_in_re2_syntax():
    m, _ = make(topics=(FOO, BAR, TopicMetadata(uuid.UUID(int=3), "food", 1)))
    r = _join_by_regex(m, "m1", "foo")
    assert set(r.assignment) == {FOO.topic_id}


def test_topic_growing_is_assigned():
    m, _ = make()
    a = m.heartbeat(join("m1")).response.assignment
    m.update_topics([dataclasses.replace(FOO, num_partitions=8), BAR])
    r = m.heartbeat(beat("m1", 1, a)).response
    assert r.member_epoch == 2 and r.assignment[FOO.topic_id] == frozenset(range(8))


def test_deleted_topic_is_revoked():
    m, _ = make()
    a = m.heartbeat(join("m1")).response.assignment
    m.update_topics([FOO])
    r = m.heartbeat(beat("m1", 1, a)).response
    assert set(r.assignment) == {FOO.topic_id}
    r = m.heartbeat(beat("m1", r.member_epoch, r.assignment)).response
    assert r.member_epoch == 2
    assert m.groups["g"].partition_owner.keys() == {(FOO.topic_id, p) for p in range(6)}


# --- persistence -----------------------------------------------------------------------


def test_replaying_the_records_rebuilds_the_group():
    m, time = make()
    records = []
    a1 = m.heartbeat(join("m1", instance_id="i1")).response.assignment
    for req in [join("m2"), beat("m1", 1, a1), join("m3", topics=("foo",))]:
        result = m.heartbeat(req)
        records += result.records
    records = []
    for group_record in m.groups["g"].snapshot_records():
        records.append(group_record)
    loaded, _ = make()
    for record in records:
        loaded.replay(record)
    loaded.on_loaded("g")
    a, b = m.groups["g"], loaded.groups["g"]
    assert (a.group_epoch, a.assignment_epoch) == (b.group_epoch, b.assignment_epoch)
    assert a.members == b.members and a.target_assignment == b.target_assignment
    assert a.partition_owner == b.partition_owner and a.static_members == b.static_members
    assert loaded.timer_deadline("session", "g", "m2") == pytest.approx(time.monotonic() + 45)


def test_delete_group():
    m, _ = make()
    m.heartbeat(join("m1"))
    assert m.heartbeat(beat("m1", -1)).response.error_code == ErrorCode.NONE
    tombstones = m.delete_group("g")
    assert tombstones[-1].__class__.__name__ == "GroupEpochTombstone"
    assert m.groups == {}
    r = m.heartbeat(join("m1")).response
    assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, 1)


def test_broker_config_keys():
    from broker_py.config.kafka_config import BrokerConfig, ConfigError

    c = BrokerConfig()
    values = {k: c[k] for k in DEFAULT_KEYS}
    assert ConsumerGroupConfig.from_values(values) == ConsumerGroupConfig()
    for bad in (
        {"group.consumer.session.timeout.ms": "70000"},
        {"group.consumer.heartbeat.interval.ms": "1000"},
        {"group.consumer.max.size": "0"},
        {"group.consumer.assignors": "sticky"},
        {
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "45000",
            "group.consumer.max.heartbeat.interval.ms": "50000",
        },
    ):
        with pytest.raises(ConfigError):
            BrokerConfig(bad)


DEFAULT_KEYS = [
    "group.consumer.session.timeout.ms",
    "group.consumer.min.session.timeout.ms",
    "group.consumer.max.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.size",
    "group.consumer.assignors",
]


# --- offsets fenced by member epoch ----------------------------------------------------


def test_offset_commit_and_fetch_are_fenced_by_member_epoch():
    from logstore.protocol.errors import (
        StaleMemberEpochError,
        UnknownMemberIdError,
        UnsupportedVersionError,
    )

    m, _ = make()
    m.heartbeat(join("m1"))
    group = m.groups["g"]
    group.validate_offset_commit("m1", 1)
    group.validate_offset_fetch("m1", 1)
    group.validate_offset_fetch(None, -1)  # an admin client
    group.validate_offset_commit("", -1, transactional=True)  # TxnOffsetCommit, no member
    with pytest.raises(StaleMemberEpochError, match="received member epoch 0 does not match"):
        group.validate_offset_commit("m1", 0)
    with pytest.raises(StaleMemberEpochError):
        group.validate_offset_fetch("m1", 2)
    with pytest.raises(UnknownMemberIdError):
        group.validate_offset_commit("zz", 1)
    with pytest.raises(UnknownMemberIdError):
        group.validate_offset_commit("", -1)  # the group is not empty
    with pytest.raises(UnsupportedVersionError):
        group.validate_offset_commit("m1", 1, api_version=8)
    m.heartbeat(beat("m1", -1))
    group.validate_offset_commit("", -1)  # empty group: anyone may commit
