"""Cluster-wide state in ZooKeeper, seen from three real brokers and a real ZooKeeper:
SCRAM credentials, ACLs and dynamic broker configs changed through one broker reach the
others through Kafka's change notifications, in Kafka's znode layout.

Each broker has a SASL_PLAINTEXT client listener (PLAIN for ``admin``, a super user, and
``alice``; SCRAM for users created at runtime) and a PLAINTEXT inter-broker listener
(``User:ANONYMOUS``, a super user too). Propagation times (from the changing request's
response to the first request another broker answers with the change) are measured and
printed, not asserted tightly: the host is noisy. Run with ``-s`` to see them.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from broker_py.security.sasl.sasl_client import sasl_client
from logstore.protocol import RequestHeader, decode_response, encode_request
from logstore.protocol.messages.acls import CreateAclsRequest, DescribeAclsRequest
from logstore.protocol.messages.configs import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from logstore.protocol.messages.scram import AlterUserScramCredentialsRequest
from tests.cluster.harness.cluster import Cluster
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
BROKERS = (1, 2, 3)
PROPAGATION_BOUND_S = 5.0  # generous: the host is noisy; the times are printed
TIMES: dict[str, list[float]] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(
        tmp_path_factory.mktemp("security"),
        n_brokers=3,
        zk_session_timeout_ms=6000,
        overrides={
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
            "auto.leader.rebalance.enable": "false",
        },
    )
    with c:
        wait_until(
            lambda: len(admin(c).list_topics(timeout=5).brokers) == 3,
            30,
            message="three brokers registered",
        )
        yield c
    print("\npropagation times (s), from the response on one broker to the change seen on another:")
    for what, times in TIMES.items():
        print(f"  {what}: " + ", ".join(f"{t:.3f}" for t in times) + f"  (max {max(times):.3f})")


def sasl_conf(
    c: Cluster,
    i: int | None = None,
    user: str = "admin",
    password: str | None = None,
    mechanism: str = "PLAIN",
) -> dict:
    return {
        "bootstrap.servers": c.bootstrap(i) if i else c.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password if password is not None else f"{user}-secret",
    }


def admin(c: Cluster, i: int | None = None) -> AdminClient:
    return AdminClient(sasl_conf(c, i))


class Session:
    """One authenticated connection to broker ``i``'s client listener, speaking the
    broker's own codec (so a check costs one round trip, and goes to that broker only)."""

    def __init__(self, c: Cluster, i: int, mechanism: str, user: str, password: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", c.client_proxies[i].port), timeout=10)
        self.correlation = 0
        if self.call(SaslHandshakeRequest(mechanism=mechanism), 1).error_code:
            raise ConnectionError(f"{mechanism} not enabled")
        client = sasl_client(mechanism, user, password)
        token = client.evaluate(b"")
        while token is not None:
            r = self.call(SaslAuthenticateRequest(auth_bytes=token), 1)
            if r.error_code:
                raise PermissionError(r.error_message)
            token = client.evaluate(bytes(r.auth_bytes))

    def call(self, body, version: int):
        self.correlation += 1
        header = RequestHeader(
            api_key=int(body.API_KEY),
            api_version=version,
            correlation_id=self.correlation,
            client_id="t",
        )
        self.sock.sendall(encode_request(header, body))
        size = int.from_bytes(self._read(4), "big")
        correlation_id, response = decode_response(self._read(size), body.API_KEY, version)
        assert correlation_id == self.correlation
        return response

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def can_login(c: Cluster, i: int, mechanism: str, user: str, password: str) -> bool:
    try:
        Session(c, i, mechanism, user, password).close()
        return True
    except (PermissionError, ConnectionError):
        return False


def propagated(what: str, since: float, check, brokers=BROKERS) -> None:
    """Waits until ``check(i)`` holds on every broker; records how long each took."""
    for i in brokers:
        wait_until(lambda i=i: check(i), PROPAGATION_BOUND_S, 0.005, f"{what} on broker {i}")
        TIMES.setdefault(what, []).append(time.monotonic() - since)


def zk_get(c: Cluster, path: str) -> bytes | None:
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        return zk.get(path)[0] if zk.exists(path) else None
    finally:
        zk.stop()
        zk.close()


def zk_notifications(c: Cluster, root: str) -> list[bytes]:
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        return [zk.get(f"{root}/{n}")[0] for n in sorted(zk.get_children(root))]
    finally:
        zk.stop()
        zk.close()


def test_a_scram_user_created_through_one_broker_logs_in_to_every_broker(cluster):
    c = cluster
    a = admin(c, 1)
    upserts = [
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-pw"
        ),
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw"
        ),
    ]
    for f in a.alter_user_scram_credentials(upserts).values():
        assert f.result(15) is None
    since = time.monotonic()
    propagated(
        "SCRAM user created", since, lambda i: can_login(c, i, "SCRAM-SHA-256", "carol", "carol-pw")
    )
    for i in BROKERS:
        assert can_login(c, i, "SCRAM-SHA-512", "carol", "carol-pw")
        assert not can_login(c, i, "SCRAM-SHA-256", "carol", "wrong")

    # Kafka's layout: the user's config node and a config change notification naming it.
    node = json.loads(zk_get(c, "/config/users/carol"))
    assert node["version"] == 1 and sorted(node["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert node["config"]["SCRAM-SHA-512"].startswith("salt=") and node["config"][
        "SCRAM-SHA-512"
    ].endswith(",iterations=8192")
    assert b'{"version":2,"entity_path":"users/carol"}' in zk_notifications(c, "/config/changes")

    # A real client logs in with it through each broker alone.
    for i in BROKERS:
        md = AdminClient(sasl_conf(c, i, "carol", "carol-pw", "SCRAM-SHA-256")).list_topics(
            timeout=15
        )
        assert sorted(md.brokers) == [1, 2, 3]

    # Every broker describes the same credentials.
    for i in BROKERS:
        a = admin(c, i)  # kept until its futures end: a destroyed client fails them
        described = a.describe_user_scram_credentials(["carol"])["carol"].result(15)
        assert sorted(
            (info.mechanism, info.iterations) for info in described.scram_credential_infos
        ) == [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]

    # Deleted through another broker: nobody lets carol in with SHA-256 any more.
    a = admin(c, 3)
    for f in a.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    ).values():
        assert f.result(15) is None
    since = time.monotonic()
    propagated(
        "SCRAM credential deleted",
        since,
        lambda i: not can_login(c, i, "SCRAM-SHA-256", "carol", "carol-pw"),
    )
    assert all(can_login(c, i, "SCRAM-SHA-512", "carol", "carol-pw") for i in BROKERS)


def topic_error(c: Cluster, i: int, user: str, topic: str) -> int:
    s = Session(c, i, "PLAIN", user, f"{user}-secret")
    try:
        r = s.call(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
            ),
            4,
        )
        return r.topics[0].error_code
    finally:
        s.close()


def test_an_acl_added_through_one_broker_is_enforced_by_all(cluster):
    c = cluster
    a = admin(c)
    a.create_topics([NewTopic("guarded", 3, 3)])["guarded"].result(30)
    wait_until(
        lambda: all(topic_error(c, i, "admin", "guarded") == 0 for i in BROKERS),
        20,
        message="topic everywhere",
    )
    assert {topic_error(c, i, "alice", "guarded") for i in BROKERS} == {
        29
    }  # TOPIC_AUTHORIZATION_FAILED

    grant = [
        AclBinding(
            ResourceType.TOPIC,
            "guarded",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    a2 = admin(c, 2)
    for f in a2.create_acls(grant).values():
        assert f.result(15) is None
    since = time.monotonic()
    propagated("ACL added", since, lambda i: topic_error(c, i, "alice", "guarded") == 0)

    node = json.loads(zk_get(c, "/kafka-acl/Topic/guarded"))
    assert node == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Write",
                "host": "*",
            },
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
        ],
    }
    assert b"TOPIC:guarded" in zk_notifications(c, "/kafka-acl-changes")

    # alice writes through every broker (each leads one partition)
    p = Producer({**sasl_conf(c, None, "alice"), "message.timeout.ms": 15000})
    delivered = []
    for n in range(6):
        p.produce(
            "guarded",
            b"v%d" % n,
            partition=n % 3,
            on_delivery=lambda err, msg: delivered.append(err),
        )
    assert p.flush(30) == 0 and delivered == [None] * 6

    # Every broker describes the same bindings.
    for i in BROKERS:
        ai = admin(c, i)
        found = ai.describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                "guarded",
                ResourcePatternType.ANY,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ).result(15)
        assert sorted(b.operation for b in found) == sorted([AclOperation.WRITE, AclOperation.READ])

    # A prefixed DENY through a third broker, then the deletion of the grant through the first.
    deny = AclBinding(
        ResourceType.TOPIC,
        "guar",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    a3 = admin(c, 3)
    for f in a3.create_acls([deny]).values():
        assert f.result(15) is None
    since = time.monotonic()
    propagated("prefixed ACL added", since, lambda i: topic_error(c, i, "alice", "guarded") == 29)
    assert (
        json.loads(zk_get(c, "/kafka-acl-extended/prefixed/Topic/guar"))["acls"][0][
            "permissionType"
        ]
        == "Deny"
    )
    assert (
        b'{"version":1,"resourceType":"TOPIC","name":"guar","patternType":"PREFIXED"}'
        in zk_notifications(c, "/kafka-acl-extended-changes")
    )
    a1 = admin(c, 1)
    deleted = a1.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                "gu",
                ResourcePatternType.MATCH,
                "User:alice",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    )
    assert (
        len(next(iter(deleted.values())).result(15)) == 0
    )  # MATCH names "gu": neither pattern covers it
    deleted = a1.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                None,
                ResourcePatternType.ANY,
                "User:alice",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    )
    assert len(next(iter(deleted.values())).result(15)) == 3
    since = time.monotonic()
    propagated(
        "ACLs deleted",
        since,
        lambda i: topic_error(c, i, "alice", "guarded") == 29 and not admin_sees_acls(c, i),
    )
    assert (
        zk_get(c, "/kafka-acl/Topic/guarded") is None
        and zk_get(c, "/kafka-acl-extended/prefixed/Topic/guar") is None
    )


def admin_sees_acls(c: Cluster, i: int) -> bool:
    a = admin(c, i)
    found = a.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(15)
    return bool(found)


def broker_config(c: Cluster, i: int, resource: str, key: str) -> tuple[str | None, int] | None:
    """(value, source) of ``key`` as broker ``i`` describes BROKER resource ``resource``."""
    s = Session(c, i, "PLAIN", "admin", "admin-secret")
    try:
        r = s.call(
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=4, resource_name=resource, configuration_keys=[key]
                    )
                ],
                include_synonyms=False,
            ),
            1,
        )
    finally:
        s.close()
    (result,) = r.results
    assert result.error_code == 0, result.error_message
    return next(((e.value, e.config_source) for e in result.configs if e.name == key), None)


def incremental_alter(
    c: Cluster, i: int, resource: str, key: str, value: str | None
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET (DELETE when ``value`` is None) of one key of BROKER
    resource ``resource``, sent to broker ``i`` (whatever broker the resource names)."""
    s = Session(c, i, "PLAIN", "admin", "admin-secret")
    try:
        R = IncrementalAlterConfigsRequest
        op = R.AlterableConfig(
            name=key, config_operation=0 if value is not None else 1, value=value
        )
        r = s.call(
            R(
                resources=[
                    R.AlterConfigsResource(resource_type=4, resource_name=resource, configs=[op])
                ],
                validate_only=False,
            ),
            0,
        )
    finally:
        s.close()
    (response,) = r.responses
    return response.error_code, response.error_message


def test_a_dynamic_broker_config_changed_on_one_broker_applies_on_all(cluster):
    c = cluster
    DYNAMIC_DEFAULT, DYNAMIC_BROKER, STATIC_OR_DEFAULT = 3, 2, (4, 5)
    assert broker_config(c, 2, "2", "log.cleaner.backoff.ms")[1] in STATIC_OR_DEFAULT

    # The cluster-wide default, changed through broker 1: every broker takes it.
    assert incremental_alter(c, 1, "", "log.cleaner.backoff.ms", "12345") == (0, None)
    since = time.monotonic()
    propagated(
        "default broker config",
        since,
        lambda i: (
            broker_config(c, i, str(i), "log.cleaner.backoff.ms") == ("12345", DYNAMIC_DEFAULT)
        ),
    )
    for i in BROKERS:
        assert broker_config(c, i, "", "log.cleaner.backoff.ms") == ("12345", DYNAMIC_DEFAULT)
    assert json.loads(zk_get(c, "/config/brokers/<default>")) == {
        "version": 1,
        "config": {"log.cleaner.backoff.ms": "12345"},
    }
    assert b'{"version":2,"entity_path":"brokers/<default>"}' in zk_notifications(
        c, "/config/changes"
    )

    # Broker 3's own config, written through broker 1: broker 3 alone takes it.
    assert incremental_alter(c, 1, "3", "log.cleaner.backoff.ms", "777") == (0, None)
    since = time.monotonic()
    propagated(
        "per-broker config",
        since,
        lambda i: broker_config(c, i, str(i), "log.cleaner.backoff.ms") == ("777", DYNAMIC_BROKER),
        brokers=(3,),
    )
    assert broker_config(c, 1, "1", "log.cleaner.backoff.ms") == ("12345", DYNAMIC_DEFAULT)
    assert broker_config(c, 2, "2", "log.cleaner.backoff.ms") == ("12345", DYNAMIC_DEFAULT)
    assert json.loads(zk_get(c, "/config/brokers/3")) == {
        "version": 1,
        "config": {"log.cleaner.backoff.ms": "777"},
    }

    # A key that cannot change at runtime is refused before anything is written.
    code, message = incremental_alter(c, 2, "3", "broker.id", "9")
    assert code == 40 and "broker.id" in message  # INVALID_CONFIG
    assert json.loads(zk_get(c, "/config/brokers/3"))["config"] == {"log.cleaner.backoff.ms": "777"}

    # confluent-kafka sees it too, and the deletions propagate back.
    a = admin(c)
    entries = a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "3")])
    assert next(iter(entries.values())).result(15)["log.cleaner.backoff.ms"].value == "777"
    assert incremental_alter(c, 2, "3", "log.cleaner.backoff.ms", None) == (0, None)
    assert incremental_alter(c, 3, "", "log.cleaner.backoff.ms", None) == (0, None)
    since = time.monotonic()
    propagated(
        "config deletions",
        since,
        lambda i: broker_config(c, i, str(i), "log.cleaner.backoff.ms")[1] in STATIC_OR_DEFAULT,
    )


def test_state_survives_a_broker_restart(cluster):
    """A restarted broker reads users, ACLs and configs from ZooKeeper at startup."""
    c = cluster
    a = admin(c, 1)
    for f in a.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-pw"
            )
        ]
    ).values():
        assert f.result(15) is None
    bob = AclBinding(
        ResourceType.GROUP,
        "g",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for f in a.create_acls([bob]).values():
        assert f.result(15) is None
    assert incremental_alter(c, 1, "", "log.cleaner.backoff.ms", "4242") == (0, None)
    c.broker(2).restart()
    wait_until(
        lambda: can_login(c, 2, "SCRAM-SHA-256", "dave", "dave-pw"),
        20,
        message="dave on the restarted broker",
    )
    assert broker_config(c, 2, "2", "log.cleaner.backoff.ms") == ("4242", 3)
    s = Session(c, 2, "PLAIN", "admin", "admin-secret")  # broker 2 itself, on its own connection
    try:
        r = s.call(
            DescribeAclsRequest(
                resource_type_filter=3,
                resource_name_filter="g",
                pattern_type_filter=3,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
            1,
        )
    finally:
        s.close()
    assert r.error_code == 0 and [
        (x.resource_name, [a.principal for a in x.acls]) for x in r.resources
    ] == [("g", ["User:alice"])]


@pytest.mark.parametrize("cut_s", [2.0, 9.0], ids=["connection-lost", "session-expired"])
def test_a_broker_cut_from_zookeeper_catches_up_when_back(cluster, cut_s):
    """Changes made through broker 1 while broker 3 could not reach ZooKeeper (its session
    kept, or expired after 6 s) reach broker 3 once it is back: kazoo re-arms the watches,
    and the notifications it missed are newer than the last it processed. (The changes go
    to broker 1 on its own connection: a client library might pick broker 3, whose
    writes wait for ZooKeeper.)"""
    c = cluster
    user, topic = f"erin{int(cut_s)}", f"cut{int(cut_s)}"
    c.net.partition(["b3"], ["zk"])
    try:
        s = Session(c, 1, "PLAIN", "admin", "admin-secret")
        try:
            salt = b"0123456789abcdef"
            salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
            up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=user, mechanism=1, iterations=4096, salt=salt, salted_password=salted
            )
            r = s.call(AlterUserScramCredentialsRequest(deletions=[], upsertions=[up]), 0)
            assert [x.error_code for x in r.results] == [0]
            grant = CreateAclsRequest.AclCreation(
                resource_type=2,
                resource_name=topic,
                resource_pattern_type=3,
                principal="User:alice",
                host="*",
                operation=3,
                permission_type=3,
            )
            assert [
                x.error_code for x in s.call(CreateAclsRequest(creations=[grant]), 1).results
            ] == [0]
        finally:
            s.close()
        time.sleep(cut_s)
        assert not can_login(c, 3, "SCRAM-SHA-256", user, "pw")  # it could not know yet
    finally:
        c.net.heal()
    since = time.monotonic()
    wait_until(
        lambda: can_login(c, 3, "SCRAM-SHA-256", user, "pw"), 30, 0.05, f"{user} on broker 3"
    )
    wait_until(
        lambda: topic_error(c, 3, "alice", topic) != 29,
        30,
        0.05,
        f"alice's ACL on {topic} on broker 3",
    )
    TIMES.setdefault(f"catch-up after ZooKeeper was cut for {cut_s:.0f} s", []).append(
        time.monotonic() - since
    )
