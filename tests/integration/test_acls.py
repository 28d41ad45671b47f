"""ACLs: a broker with ``authorizer.class.name`` and a SASL_PLAINTEXT listener, where
``admin`` is a super user and ``alice`` may do only what ACLs grant her. Driven by
confluent-kafka's and kafka-python's admin clients, producers and consumers, and kcat;
and a broker without an authorizer, which answers the ACL APIs SECURITY_DISABLED."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from logstore.protocol.messages.acls import DeleteAclsRequest, DescribeAclsRequest
from tests.integration.clients import kcat, topic_name, wire_call
from tests.integration.conftest import BrokerProcess

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("acls")))
    b.overrides.update(
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        }
    )
    b.start()
    yield b
    b.stop()


def _conf(b: BrokerProcess, user: str) -> dict:
    return {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _admin(b: BrokerProcess, user: str = "admin") -> AdminClient:
    return AdminClient(_conf(b, user))


def _grant(b: BrokerProcess, *bindings: AclBinding) -> None:
    a = _admin(b)  # kept until the futures end: a destroyed client fails them
    for f in a.create_acls(list(bindings)).values():
        assert f.result(15) is None


def _allow(
    rtype, name, op, pattern=ResourcePatternType.LITERAL, principal="User:alice"
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def _produce(
    b: BrokerProcess, user: str, topic: str, extra: dict | None = None
) -> KafkaError | None:
    """The delivery error of one message, or None once it is stored."""
    reports: list = []
    p = Producer({**_conf(b, user), "message.timeout.ms": 10000, **(extra or {})})
    p.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    p.flush(20)
    assert reports, "no delivery report"
    return reports[0]


def _consume(
    b: BrokerProcess, user: str, topic: str, group: str, count: int
) -> tuple[list[bytes], list[KafkaError]]:
    errors: list[KafkaError] = []
    c = Consumer(
        {
            **_conf(b, user),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "error_cb": errors.append,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            errors.append(m.error())
            if m.error().code() in (
                KafkaError.GROUP_AUTHORIZATION_FAILED,
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
            ):
                break
            continue
        got.append(m.value())
    c.close()
    return got, errors


def test_without_an_authorizer_the_acl_apis_are_disabled(broker):
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as e:
        a.create_acls([binding])[binding].result(15)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error (it returns no bindings): the wire shows it.
    any_ = dict(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    for version in (0, 1, 2, 3):
        described = wire_call(broker.bootstrap, DescribeAclsRequest(**any_), version)
        assert described.error_code == KafkaError.SECURITY_DISABLED and described.resources == []
        deleted = wire_call(
            broker.bootstrap,
            DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**any_)]),
            version,
        )
        assert [r.error_code for r in deleted.filter_results] == [KafkaError.SECURITY_DISABLED]


def test_produce_and_consume_need_the_acls_confluent_kafka(acl_broker):
    topic, other, group = topic_name("acl"), topic_name("acl-other"), topic_name("acl-g")
    a = _admin(acl_broker)
    for f in a.create_topics([NewTopic(topic, 1), NewTopic(other, 1)]).values():
        f.result(15)
    # Nothing granted yet: alice may not write, and may not even see the topic.
    assert _produce(acl_broker, "alice", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = _admin(acl_broker, "alice").list_topics(timeout=15).topics
    assert topic not in listed and other not in listed

    _grant(
        acl_broker,
        _allow(ResourceType.TOPIC, topic, AclOperation.WRITE),
        _allow(ResourceType.TOPIC, topic, AclOperation.READ),
        _allow(ResourceType.GROUP, "acl-g", AclOperation.READ, ResourcePatternType.PREFIXED),
    )
    # WRITE on a topic also lets an idempotent producer have a producer id.
    assert _produce(acl_broker, "alice", topic, {"enable.idempotence": True}) is None
    assert _produce(acl_broker, "alice", other).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = _admin(acl_broker, "alice").list_topics(timeout=15).topics
    assert topic in listed and other not in listed

    got, errors = _consume(acl_broker, "alice", topic, group, 1)
    assert got == [b"v"], errors
    _, errors = _consume(acl_broker, "alice", topic, topic_name("not-granted"), 1)
    assert any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors), errors
    # The super user needs no ACL.
    assert _produce(acl_broker, "admin", other) is None

    # A transactional id needs its own WRITE.
    p = Producer({**_conf(acl_broker, "alice"), "transactional.id": topic_name("tx")})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(15)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_are_described_deleted_and_persist_across_a_restart(acl_broker):
    a = _admin(acl_broker)
    topic = topic_name("persist")
    bindings = [
        _allow(ResourceType.TOPIC, topic, AclOperation.READ),
        _allow(ResourceType.TOPIC, topic + "-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:bob",
            "*",
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    ]
    _grant(acl_broker, *bindings)
    match = AclBindingFilter(
        ResourceType.TOPIC,
        topic + "-x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert a.describe_acls(match).result(15) == [bindings[1]]
    exact = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert sorted(a.describe_acls(exact).result(15), key=str) == sorted(
        [bindings[0], bindings[2]], key=str
    )

    acl_broker.restart()
    a = _admin(acl_broker)
    assert sorted(a.describe_acls(exact).result(15), key=str) == sorted(
        [bindings[0], bindings[2]], key=str
    )
    deny_bob = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.DENY,
    )
    assert a.delete_acls([deny_bob])[deny_bob].result(15) == [bindings[2]]
    assert a.describe_acls(exact).result(15) == [bindings[0]]

    # A binding Kafka refuses: the CLUSTER resource has one name.
    bad = AclBinding(
        ResourceType.BROKER,
        "other",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as e:
        a.create_acls([bad])[bad].result(15)
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST

    # Only a principal allowed ALTER on the cluster may change ACLs.
    alice = _admin(acl_broker, "alice")
    with pytest.raises(KafkaException) as e:
        alice.create_acls([bindings[0]])[bindings[0]].result(15)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_kafka_python_admin_and_clients(acl_broker):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import NewTopic as KNewTopic
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import TopicAuthorizationFailedError

    sasl = dict(
        bootstrap_servers=acl_broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
    )
    admin = KafkaAdminClient(
        **sasl, sasl_plain_username="admin", sasl_plain_password="admin-secret"
    )
    topic = topic_name("kp-acl")
    admin.create_topics([KNewTopic(topic, 1, 1)])
    acl = ACL(
        principal="User:alice",
        host="*",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(
            KResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL
        ),
    )
    result = admin.create_acls([acl])
    assert result["failed"] == [] and len(result["succeeded"]) == 1
    acl_filter = ACLFilter(
        principal="User:alice",
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            KResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL
        ),
    )
    described, error = admin.describe_acls(acl_filter)
    assert error.errno == 0 and described == [acl]

    producer = KafkaProducer(
        **sasl, sasl_plain_username="alice", sasl_plain_password="alice-secret"
    )
    producer.send(topic, b"from kafka-python").get(timeout=20)
    producer.close()

    deleted = admin.delete_acls([acl_filter])
    assert deleted[0][1] == [acl] and deleted[0][2].errno == 0
    producer = KafkaProducer(
        **sasl, sasl_plain_username="alice", sasl_plain_password="alice-secret", max_block_ms=5000
    )
    with pytest.raises(Exception) as e:
        producer.send(topic, b"refused").get(timeout=20)
    assert isinstance(e.value, TopicAuthorizationFailedError) or "TopicAuthorizationFailed" in repr(
        e.value
    )
    producer.close(timeout=1)
    admin.close()


def test_kcat_sees_only_what_it_may_describe(acl_broker):
    visible, hidden = topic_name("kcat-acl"), topic_name("kcat-hidden")
    a = _admin(acl_broker)
    for f in a.create_topics([NewTopic(visible, 1), NewTopic(hidden, 1)]).values():
        f.result(15)
    _grant(acl_broker, _allow(ResourceType.TOPIC, visible, AclOperation.DESCRIBE))
    sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=PLAIN",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ]
    out = kcat(acl_broker.bootstrap, "-L", *sasl).stdout.decode()
    assert f'topic "{visible}"' in out and hidden not in out
    # DESCRIBE alone does not let kcat produce.
    result = kcat(acl_broker.bootstrap, "-P", "-t", visible, *sasl, input=b"x\n", check=False)
    assert "authorization failed" in (result.stderr + result.stdout).decode().lower()


@pytest.mark.parametrize(
    "rules,principal",
    [(None, "User:CN=client"), ("RULE:^CN=([a-z]*)$/$1/U,DEFAULT", "User:CLIENT")],
    ids=["dn", "mapped"],
)
def test_a_tls_client_certificate_is_the_principal(tmp_path, rules, principal):
    from tests.integration.tls import make_pki
    from tests.support.ports import free_port

    pki = make_pki(str(tmp_path))
    (tmp_path / "b").mkdir()
    b = BrokerProcess(str(tmp_path / "b"))
    mtls = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},MTLS://127.0.0.1:{mtls}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
            "ssl.client.auth": "required",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca.pem"],
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # The PLAINTEXT listener's User:ANONYMOUS administers.
            "super.users": "User:ANONYMOUS",
        }
    )
    if rules is not None:
        b.overrides["listener.name.mtls.ssl.principal.mapping.rules"] = rules
    b.start()
    try:
        allowed, refused = topic_name("mtls-acl"), topic_name("mtls-refused")
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in a.create_topics([NewTopic(allowed, 1), NewTopic(refused, 1)]).values():
            f.result(15)
        grant = AclBinding(
            ResourceType.TOPIC,
            allowed,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        assert a.create_acls([grant])[grant].result(15) is None
        conf = {
            "bootstrap.servers": f"127.0.0.1:{mtls}",
            "security.protocol": "SSL",
            "ssl.ca.location": pki["ca.pem"],
            "ssl.certificate.location": pki["client.pem"],
            "ssl.key.location": pki["client.key"],
            "message.timeout.ms": 10000,
        }
        reports: list = []
        p = Producer(conf)
        for topic in (allowed, refused):
            p.produce(topic, b"v", on_delivery=lambda err, msg: reports.append((msg.topic(), err)))
        p.flush(20)
        assert dict(reports)[allowed] is None
        assert dict(reports)[refused].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        b.kill()
