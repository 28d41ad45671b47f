"""Share groups (KIP-932) against a real broker: ShareGroupHeartbeat and
ShareGroupDescribe on the wire (through logstore's codec), the group-id namespace shared
with classic and consumer groups, the records surviving a restart, and confluent-kafka
2.16's ShareConsumer joining and being assigned, and the APIs refused with
group.share.enable=false.

The broker runs with group.share.enable=true (the default, as Kafka 4.2 serves share
groups) and short share.* timeouts so that a session expires within the test."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from logstore.protocol.messages.group import JoinGroupRequest
from logstore.protocol.messages.group_admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from logstore.protocol.messages.share_group import (
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.waiting import wait_until

SESSION_MS = 3000
INTERVAL_MS = 500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share")),
        {
            "group.share.enable": "true",
            "group.share.min.session.timeout.ms": "2000",
            "group.share.session.timeout.ms": str(SESSION_MS),
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": str(INTERVAL_MS),
            "offsets.topic.num.partitions": "3",
        },
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _beat(bootstrap: str, group: str, member: str, epoch: int, topics=None):
    return wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
        ),
        1,
    )


def _describe(bootstrap: str, group: str):
    (described,) = wire_call(
        bootstrap,
        ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        1,
    ).groups
    return described


def _assigned(response) -> dict:
    assert response.assignment is not None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def test_members_share_the_partition_leave_and_expire(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = _name("share-t"), _name("share-g")
    _create(bootstrap, topic)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())

    joined = _beat(bootstrap, group, a, 0, [topic])
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, a, 1)
    assert joined.heartbeat_interval_ms == INTERVAL_MS
    (topic_id,) = _assigned(joined)
    assert _assigned(joined) == {topic_id: [0]}

    # A second member gets the same partition: every member may be assigned it.
    second = _beat(bootstrap, group, b, 0, [topic])
    assert (second.error_code, second.member_epoch) == (0, 2)
    assert _assigned(second) == {topic_id: [0]}
    steady = _beat(bootstrap, group, a, 1)
    assert (steady.error_code, steady.member_epoch, steady.assignment) == (0, 2, None)
    fenced = _beat(bootstrap, group, a, 7)
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH

    described = _describe(bootstrap, group)
    assert (described.error_code, described.group_state, described.assignor_name) == (
        0,
        "Stable",
        "simple",
    )
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    members = {m.member_id: m for m in described.members}
    assert set(members) == {a, b}
    for m in members.values():
        assert m.member_epoch == 2 and m.subscribed_topic_names == [topic]
        (tp,) = m.assignment.topic_partitions
        assert (tp.topic_id, tp.topic_name, tp.partitions) == (topic_id, topic, [0])

    # ListGroups shows the type; DescribeGroups shows it Dead, as Kafka 4 does.
    listed = wire_call(bootstrap, ListGroupsRequest(types_filter=["share"]), 5).groups
    assert [
        (g.group_type, g.protocol_type, g.group_state) for g in listed if g.group_id == group
    ] == [("share", "share", "Stable")]
    consumer_only = wire_call(bootstrap, ListGroupsRequest(types_filter=["consumer"]), 5).groups
    assert group not in {g.group_id for g in consumer_only}
    (old,) = wire_call(bootstrap, DescribeGroupsRequest(groups=[group]), 5).groups
    assert (old.error_code, old.group_state) == (0, "Dead")
    # One namespace: a consumer-protocol heartbeat to it is refused.
    refused = wire_call(
        bootstrap,
        ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        ),
        1,
    )
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.error_message == f"Group {group} is not a consumer group."
    (not_consumer,) = wire_call(
        bootstrap,
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        1,
    ).groups
    assert (not_consumer.error_code, not_consumer.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group.",
    )
    joining = wire_call(
        bootstrap,
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        ),
        5,
    )
    assert joining.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    (busy,) = wire_call(bootstrap, DeleteGroupsRequest(groups_names=[group]), 2).results
    assert busy.error_code == ErrorCode.NON_EMPTY_GROUP

    left = _beat(bootstrap, group, b, -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (0, b, -1)
    assert {m.member_id for m in _describe(bootstrap, group).members} == {a}

    # Nobody heartbeats any more: the session of the last member expires.
    wait_until(
        lambda: _describe(bootstrap, group).group_state == "Empty",
        timeout=SESSION_MS / 1000 + 10,
        message="the member's session to expire",
    )
    gone = _beat(bootstrap, group, a, 3)
    assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    (deleted,) = wire_call(bootstrap, DeleteGroupsRequest(groups_names=[group]), 2).results
    assert deleted.error_code == ErrorCode.NONE
    missing = _describe(bootstrap, group)
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        f"Group {group} not found.",
    )


def test_group_types_share_one_namespace(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _name("share-ns")
    _create(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"x")
    assert p.flush(15) == 0
    classic = _name("classic")
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": classic, "auto.offset.reset": "earliest"}
    )
    try:
        c.subscribe([topic])
        wait_until(lambda: c.poll(0.2) is not None, timeout=20, message="a classic member")
        refused = _beat(bootstrap, classic, str(uuid.uuid4()), 0, [topic])
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert refused.error_message == f"Group {classic} is not a share group."
        described = _describe(bootstrap, classic)
        assert (described.error_code, described.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {classic} is not a share group.",
        )
    finally:
        c.close()
    bad = _beat(bootstrap, _name("g"), "", 0, [topic])
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "MemberId can't be empty.",
    )


def test_a_share_group_survives_a_restart(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = _name("share-r"), _name("share-rg")
    _create(bootstrap, topic, 2)
    member = str(uuid.uuid4())
    joined = _beat(bootstrap, group, member, 0, [topic])
    assert joined.error_code == 0
    before = _describe(bootstrap, group)
    broker.restart()
    bootstrap = broker.bootstrap
    after = wait_until(
        lambda: (d := _describe(bootstrap, group)).error_code == 0 and d,
        timeout=20,
        message="the group to load",
    )
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch,
        before.assignment_epoch,
    )
    assert [(m.member_id, m.member_epoch) for m in after.members] == [(member, joined.member_epoch)]
    assert after.members[0].assignment == before.members[0].assignment
    # The member carries on at its epoch after the reload.
    again = _beat(bootstrap, group, member, joined.member_epoch)
    assert (again.error_code, again.member_epoch) == (0, joined.member_epoch)
    assert _beat(bootstrap, group, member, -1).error_code == 0


def test_share_consumer_joins_and_is_assigned(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = _name("share-c"), _name("share-cg")
    _create(bootstrap, topic)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])

        def assigned():
            consumer.poll(0.2)
            d = _describe(bootstrap, group)
            members = d.members if d.error_code == 0 else []
            return len(members) == 1 and [
                (tp.topic_name, tp.partitions) for tp in members[0].assignment.topic_partitions
            ] == [(topic, [0])]

        wait_until(assigned, timeout=30, message="the share consumer to be assigned")
        (member,) = _describe(bootstrap, group).members
        assert member.member_epoch >= 1 and member.subscribed_topic_names == [topic]
    finally:
        consumer.close()
    # close() leaves the group.
    wait_until(
        lambda: _describe(bootstrap, group).group_state == "Empty",
        timeout=SESSION_MS / 1000 + 10,
        message="the share consumer to leave",
    )


def test_share_groups_are_off_when_disabled(tmp_path) -> None:
    """group.share.enable=false, as Kafka without its share.version feature: the APIs are
    listed, and answer UNSUPPORTED_VERSION."""
    b = BrokerProcess(
        str(tmp_path), {"offsets.topic.num.partitions": "1", "group.share.enable": "false"}
    )
    b.start()
    try:
        versions = wire_call(b.bootstrap, ApiVersionsRequest(), 3).api_keys
        listed = {k.api_key: (k.min_version, k.max_version) for k in versions}
        assert listed[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
        assert listed[ApiKey.SHARE_GROUP_DESCRIBE] == (1, 1)
        refused = _beat(b.bootstrap, "g", str(uuid.uuid4()), 0, ["t"])
        assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
        described = _describe(b.bootstrap, "g")
        assert described.error_code == ErrorCode.UNSUPPORTED_VERSION
        # The share-group offsets APIs too (90-92).
        from logstore.protocol.messages import share_group_offsets as m

        D, A, X = (
            m.DescribeShareGroupOffsetsRequest,
            m.AlterShareGroupOffsetsRequest,
            m.DeleteShareGroupOffsetsRequest,
        )
        (offsets,) = wire_call(
            b.bootstrap, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id="g")]), 0
        ).groups
        assert offsets.error_code == ErrorCode.UNSUPPORTED_VERSION
        partition = A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)
        altered = wire_call(
            b.bootstrap,
            A(
                group_id="g",
                topics=[
                    A.AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=[partition])
                ],
            ),
            0,
        )
        assert altered.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        deleted = wire_call(b.bootstrap, X(group_id="g", topics=[]), 0)
        assert deleted.error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        assert b.stop() == 0, b.log_text()[-4000:]


def test_a_group_runs_on_its_own_share_configs(broker) -> None:
    from tests.integration.clients import incremental_alter_configs

    bootstrap = broker.bootstrap
    topic, group = _name("share-cfg"), _name("share-cfgg")
    _create(bootstrap, topic)
    # GROUP config resource (type 32), SET (0).
    assert incremental_alter_configs(
        bootstrap, 32, group, ("share.heartbeat.interval.ms", 0, "700")
    ) == (0, None)
    member = str(uuid.uuid4())
    joined = _beat(bootstrap, group, member, 0, [topic])
    assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 700)
    assert _beat(bootstrap, group, member, -1).error_code == 0
