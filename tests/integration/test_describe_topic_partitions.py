"""DescribeTopicPartitions (KIP-966) against a real broker: pages of at most the
request's partition limit in topic-name order, the cursor, errors for missing and
illegal names, and ACLs. The broker has an authorizer, a PLAINTEXT listener where the
requests below come as ``User:ANONYMOUS`` (allowed to DESCRIBE only what the test
grants), and a SASL_PLAINTEXT listener where the super user ``admin`` sets things up
through confluent-kafka."""

from __future__ import annotations

import uuid

import pytest
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
from logstore.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest as Request,
)
from logstore.protocol.messages.metadata import MetadataRequest
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
PREFIX = f"dtp{uuid.uuid4().hex[:6]}"
# name -> partitions; ANONYMOUS may DESCRIBE the PREFIX-prefixed ones, not SECRET.
TOPICS = {f"{PREFIX}-a": 3, f"{PREFIX}-b": 1, f"{PREFIX}-c": 4}
SECRET = "hidden-topic"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("dtp")))
    sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
        }
    )
    b.start()
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    topics = {**TOPICS, SECRET: 2}
    for future in admin.create_topics(
        [NewTopic(name, n, 1) for name, n in topics.items()]
    ).values():
        future.result(15)
    grant = AclBinding(
        ResourceType.TOPIC,
        PREFIX,
        ResourcePatternType.PREFIXED,
        "User:ANONYMOUS",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([grant]).values():
        assert future.result(15) is None

    def visible() -> bool:
        body = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        names = {t.name for t in wire_call(b.bootstrap, body, 12).topics}
        return names == set(TOPICS)

    wait_until(visible, message="the granted topics in ANONYMOUS's metadata")
    yield b
    b.stop()


def describe(b: BrokerProcess, topics=(), limit: int = 2000, cursor=None):
    body = Request(
        topics=[Request.TopicRequest(name=n) for n in topics],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else Request.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    return wire_call(b.bootstrap, body, 0)


def pairs(response) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in response.topics for p in t.partitions]


def test_every_topic_in_pages_of_the_limit(broker):
    whole = describe(broker)
    assert whole.next_cursor is None
    expected = [(name, p) for name in sorted(TOPICS) for p in range(TOPICS[name])]
    assert pairs(whole) == expected
    for topic in whole.topics:
        assert topic.error_code == 0 and topic.topic_id != uuid.UUID(int=0)
        assert not topic.is_internal
        assert topic.topic_authorized_operations != -2147483648  # always filled in
        for p in topic.partitions:
            assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (0, 0, [0], [0])
            assert p.offline_replicas == [] and p.eligible_leader_replicas is None

    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = describe(broker, limit=3, cursor=cursor)
        assert len(pairs(page)) <= 3
        seen += pairs(page)
        pages += 1
        if page.next_cursor is None:
            break
        cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)
        assert pages < 10
    assert seen == expected
    assert pages == 3  # a: 0-2 | b: 0, c: 0-1 | c: 2-3


def test_a_page_ending_on_a_topic_boundary_points_at_the_next_topic(broker):
    a, b, _ = sorted(TOPICS)
    page = describe(broker, limit=4)  # a's 3 partitions and b's 1
    assert pairs(page) == [(a, 0), (a, 1), (a, 2), (b, 0)]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == (sorted(TOPICS)[2], 0)


def test_named_topics_missing_illegal_and_refused(broker):
    a, b, c = sorted(TOPICS)
    missing, bad = f"{PREFIX}-missing", f"{PREFIX}-bad/name"
    response = describe(broker, topics=[c, bad, missing, SECRET, a])
    by_name = {t.name: t for t in response.topics}
    assert set(by_name) == {a, c, missing, bad, SECRET}
    # In name order, the refused one last (its existence is not disclosed).
    assert [t.name for t in response.topics] == [a, bad, c, missing, SECRET]
    assert by_name[missing].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name[bad].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert by_name[SECRET].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert by_name[SECRET].topic_id == uuid.UUID(int=0) and by_name[SECRET].partitions == []
    assert len(by_name[c].partitions) == 4 and by_name[c].error_code == 0


def test_a_cursor_inside_the_named_topics(broker):
    a, b, c = sorted(TOPICS)
    response = describe(broker, topics=[a, c], cursor=(c, 2))
    assert pairs(response) == [(c, 2), (c, 3)]
    assert response.next_cursor is None


def test_a_cursor_naming_a_topic_not_listed_is_invalid_request(broker):
    a, b, c = sorted(TOPICS)
    response = describe(broker, topics=[a], cursor=(b, 0))
    assert [(t.name, t.error_code) for t in response.topics] == [(a, ErrorCode.INVALID_REQUEST)]
