"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (and their share-group counterparts,
KIP-932) under an authorizer, on the wire: READ
on the group for a heartbeat, DESCRIBE on every topic subscribed by name, a regex that
matches only the topics the client may DESCRIBE, DESCRIBE on the group and on its
assigned topics for a describe. Requests on the PLAINTEXT listener come as
``User:ANONYMOUS`` (granted READ on the ``<prefix>-g`` groups and DESCRIBE on the
``<prefix>-visible`` topics); the super user ``admin`` on the SASL listener sets things up
and runs a member subscribed to a topic ANONYMOUS may not see."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.share_group import (
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
P = f"cga{uuid.uuid4().hex[:6]}"
VISIBLE, SECRET = f"{P}-visible", f"{P}-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("cga")))
    b.sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
            "offsets.topic.num.partitions": "1",
            "group.share.enable": "true",
        }
    )
    b.start()
    admin = AdminClient(_admin_config(b))
    for future in admin.create_topics([NewTopic(VISIBLE, 2, 1), NewTopic(SECRET, 1, 1)]).values():
        future.result(15)
    grants = [
        AclBinding(
            ResourceType.GROUP,
            f"{P}-g",
            ResourcePatternType.PREFIXED,
            "User:ANONYMOUS",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            VISIBLE,
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(grants).values():
        assert future.result(15) is None
    yield b
    b.stop()


def _admin_config(b: BrokerProcess) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }


def _join(b: BrokerProcess, group: str, names=None, regex=None):
    body = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=uuid.uuid4().hex,
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        topic_partitions=[],
    )
    return wire_call(b.bootstrap, body, 1)


def _describe(b: BrokerProcess, group: str):
    body = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)
    (described,) = wire_call(b.bootstrap, body, 1).groups
    return described


def test_heartbeat_and_describe_are_authorized(broker):
    denied = _join(broker, "not-granted", names=[VISIBLE])
    assert denied.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    hidden = _join(broker, f"{P}-g1", names=[VISIBLE, SECRET])
    assert hidden.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    # The regex matches both topics' names, but only the one ANONYMOUS may see.
    joined = _join(broker, f"{P}-g1", regex=f"{P}-.*")
    assert joined.error_code == 0, joined.error_message
    # The regex is resolved after the join's response: its topics come on a later one.
    beats = [joined]

    def regex_resolved():
        body = ConsumerGroupHeartbeatRequest(
            group_id=f"{P}-g1", member_id=joined.member_id, member_epoch=beats[-1].member_epoch
        )
        beats.append(wire_call(broker.bootstrap, body, 1))
        assert beats[-1].error_code == 0, beats[-1].error_message
        return beats[-1].assignment is not None and beats[-1].assignment.topic_partitions

    wait_until(regex_resolved, timeout=15, interval=0.2, message="regex resolved")
    joined = beats[-1]
    metadata = wire_call(
        broker.bootstrap,
        MetadataRequest(topics=None, allow_auto_topic_creation=False),
        12,
    )
    ids = {t.name: t.topic_id for t in metadata.topics}
    assert set(ids) == {VISIBLE}
    assigned = {
        (tp.topic_id, p) for tp in joined.assignment.topic_partitions for p in tp.partitions
    }
    assert assigned == {(ids[VISIBLE], 0), (ids[VISIBLE], 1)}

    described = _describe(broker, f"{P}-g1")
    assert described.error_code == 0
    (member,) = described.members
    assert [tp.topic_name for tp in member.assignment.topic_partitions] == [VISIBLE]
    assert described.authorized_operations not in (0, -2147483648)
    assert _describe(broker, "not-granted").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

    # A group whose members hold a topic ANONYMOUS may not describe.
    admin_member = Consumer(
        {**_admin_config(broker), "group.id": f"{P}-g2", "group.protocol": "consumer"}
    )
    admin_member.subscribe([SECRET])
    try:

        def secret_assigned():
            admin_member.poll(0.1)
            return admin_member.assignment()

        wait_until(secret_assigned, timeout=30, message="the admin member's assignment")
        refused = _describe(broker, f"{P}-g2")
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert refused.error_message == (
            "The described group uses topics that the client is not authorized to describe."
        )
        assert refused.members == []
    finally:
        admin_member.close()


def test_share_group_heartbeat_and_describe_are_authorized(broker):
    def beat(group: str, names: list[str]):
        body = ShareGroupHeartbeatRequest(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, subscribed_topic_names=names
        )
        return wire_call(broker.bootstrap, body, 1)

    def describe(group: str):
        body = ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)
        (described,) = wire_call(broker.bootstrap, body, 1).groups
        return described

    assert beat("not-granted", [VISIBLE]).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    hidden = beat(f"{P}-gs", [VISIBLE, SECRET])
    assert hidden.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    joined = beat(f"{P}-gs", [VISIBLE])
    assert joined.error_code == 0, joined.error_message
    assert [sorted(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0, 1]]

    assert describe("not-granted").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described = describe(f"{P}-gs")
    assert described.error_code == 0 and len(described.members) == 1
    # READ on the group implies DESCRIBE; the bit field holds both (3 READ, 8 DESCRIBE).
    assert described.authorized_operations & (1 << 3) and described.authorized_operations & (1 << 8)


def test_share_fetch_is_authorized(broker):
    """ShareFetch: READ on the group for the request, READ on each topic for its
    partitions (ANONYMOUS may only DESCRIBE the visible topic)."""
    from logstore.protocol.messages.share_fetch import ShareFetchRequest as R

    topics = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=VISIBLE)])
    topic_id = wire_call(broker.bootstrap, topics, 12).topics[0].topic_id

    def fetch(group: str):
        body = R(
            group_id=group,
            member_id=uuid.uuid4().hex,
            share_session_epoch=0,
            max_wait_ms=0,
            min_bytes=1,
            max_records=10,
            batch_size=10,
            topics=[
                R.FetchTopic(topic_id=topic_id, partitions=[R.FetchPartition(partition_index=0)])
            ],
            forgotten_topics_data=[],
        )
        return wire_call(broker.bootstrap, body, 1)

    assert fetch("not-granted").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    answer = fetch(f"{P}-gf")
    assert answer.error_code == 0
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_share_group_offsets_are_authorized(broker):
    """DescribeShareGroupOffsets: DESCRIBE on the group, DESCRIBE on each topic;
    AlterShareGroupOffsets: READ on the group and on each topic; DeleteShareGroupOffsets:
    DELETE on the group (ANONYMOUS has READ on the group, DESCRIBE on the visible topic)."""
    from logstore.protocol.messages.share_group_offsets import (
        AlterShareGroupOffsetsRequest as A,
    )
    from logstore.protocol.messages.share_group_offsets import (
        DeleteShareGroupOffsetsRequest as X,
    )
    from logstore.protocol.messages.share_group_offsets import (
        DescribeShareGroupOffsetsRequest as D,
    )

    def describe(group: str):
        topics = [
            D.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=[0])
            for t in (VISIBLE, SECRET)
        ]
        body = D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)])
        (described,) = wire_call(broker.bootstrap, body, 0).groups
        return described

    def alter(group: str):
        partitions = [A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)]
        body = A(
            group_id=group,
            topics=[
                A.AlterShareGroupOffsetsRequestTopic(topic_name=VISIBLE, partitions=partitions)
            ],
        )
        answer = wire_call(broker.bootstrap, body, 0)
        return [p.error_code for t in answer.responses for p in t.partitions]

    assert describe("not-granted").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described = describe(f"{P}-go")
    assert described.error_code == 0
    errors = {t.topic_name: [p.error_code for p in t.partitions] for t in described.topics}
    assert errors == {VISIBLE: [0], SECRET: [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
    assert alter("not-granted") == [ErrorCode.GROUP_AUTHORIZATION_FAILED]
    assert alter(f"{P}-go") == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]  # DESCRIBE only
    deleted = wire_call(
        broker.bootstrap,
        X(group_id=f"{P}-go", topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name=VISIBLE)]),
        0,
    )
    assert deleted.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
