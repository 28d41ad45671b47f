"""The znodes of cluster-wide security and config state are Kafka's, byte for byte: ACLs
(``ZkData.ResourceZNode``, the two ACL change stores), SCRAM credentials in a user's
config (``ScramCredentialUtils``), entity names (``Sanitizer``), config change
notifications for users and brokers.

Golden bytes were obtained by running Kafka's encode expressions with Jackson 2.21 and
Scala 2.13's collections on Java 17 (``AclEntry.toJsonCompatibleMap``: an outer Map2 of
Map4 entries; ``ExtendedAclChangeEvent`` as a case class whose constructor parameters
carry ``@JsonProperty``; ``ConfigEntityZNode.encode`` of a ``java.util.Properties``;
``Sanitizer.sanitize`` over ``URLEncoder``; ``java.util.Base64``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_py.security.authorizer.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.security.sasl.scram_credentials import (
    ScramCredential,
    credential_from_string,
    credential_to_string,
)
from broker_py.zk import zk_acl_data
from broker_py.zk.zk_acl_data import ExtendedAclChangeStore, LiteralAclChangeStore, ResourceZNode
from broker_py.zk.zk_change_notifications import ConfigChangeListener, sequence_number
from broker_py.zk.zk_data import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ZkDataError,
    desanitize,
    is_valid_node_name,
    sanitize,
)

ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
BOB_DENY = AccessControlEntry(
    "User:bob", "10.0.0.1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY
)


# ---- ACL nodes ----


def test_acl_node_is_kafkas_json():
    assert ResourceZNode.encode([ALICE_READ, BOB_DENY]) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
        b'{"principal":"User:bob","permissionType":"Deny","operation":"DescribeConfigs","host":"10.0.0.1"}]}'
    )
    assert ResourceZNode.encode([]) == b'{"version":1,"acls":[]}'


def test_acl_node_reads_what_kafka_and_its_tools_write():
    # AclEntry.fromBytes's doc example: other key order, spaces; upper-case names
    # (valueFromMap's fallback).
    doc = (
        b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert ResourceZNode.decode(doc) == [
        AccessControlEntry("User:alice", "host1", AclOperation.READ, AclPermissionType.DENY)
    ]
    upper = (
        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"ALLOW",'
        b'"operation":"IDEMPOTENTWRITE","host":"*"}]}'
    )
    assert ResourceZNode.decode(upper) == [
        AccessControlEntry("User:*", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)
    ]
    every = [
        AccessControlEntry("User:u", "*", op, AclPermissionType.ALLOW)
        for op in AclOperation
        if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
    ]
    assert ResourceZNode.decode(ResourceZNode.encode(every)) == every
    assert ResourceZNode.decode(ResourceZNode.encode([ALICE_READ, ALICE_READ])) == [ALICE_READ]
    assert ResourceZNode.decode(b"") == []


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":2,"acls":[]}',
        b'{"version":1}',
        b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"DESCRIBE_CONFIGS","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Any","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
        b"[1]",
        b"\xff",
    ],
)
def test_acl_node_that_does_not_decode(data):
    with pytest.raises(ZkDataError):
        ResourceZNode.decode(data, path="/kafka-acl/Topic/t")


def test_acl_paths_are_kafkas():
    assert (
        ResourceZNode.path(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL))
        == "/kafka-acl/Topic/t"
    )
    assert (
        ResourceZNode.path(
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)
        )
        == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    )
    assert (
        ResourceZNode.path(
            ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
        )
        == "/kafka-acl/Cluster/kafka-cluster"
    )
    assert (
        ResourceZNode.path(ResourcePattern(ResourceType.DELEGATION_TOKEN, "*", PatternType.LITERAL))
        == "/kafka-acl/DelegationToken/*"
    )
    assert zk_acl_data.acl_paths() == [
        *(
            f"/kafka-acl/{t}"
            for t in ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
        ),
        *(
            f"/kafka-acl-extended/prefixed/{t}"
            for t in ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
        ),
        "/kafka-acl-changes",
        "/kafka-acl-extended-changes",
    ]
    assert zk_acl_data.resource_type_from_name("TransactionalId") == ResourceType.TRANSACTIONAL_ID
    assert zk_acl_data.resource_type_from_name("TRANSACTIONALID") == ResourceType.TRANSACTIONAL_ID
    assert zk_acl_data.resource_type_from_name("Topics") == ResourceType.UNKNOWN
    with pytest.raises(ValueError):
        zk_acl_data.acl_root(PatternType.MATCH)


def test_acl_change_notifications_are_kafkas():
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx:1", PatternType.LITERAL)
    assert (
        LiteralAclChangeStore.encode(literal) == b"TRANSACTIONAL_ID:tx:1"
    )  # the Java enum's toString
    assert (
        LiteralAclChangeStore.decode(b"TRANSACTIONAL_ID:tx:1") == literal
    )  # split at the first ':'
    assert LiteralAclChangeStore.decode(b"Topic:t") == ResourcePattern(
        ResourceType.TOPIC, "t", PatternType.LITERAL
    )
    prefixed = ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED)
    assert (
        ExtendedAclChangeStore.encode(prefixed)
        == b'{"version":1,"resourceType":"TOPIC","name":"pay-","patternType":"PREFIXED"}'
    )
    assert (
        ExtendedAclChangeStore.decode(
            b'{"patternType":"prefixed","name":"pay-","resourceType":"topic","version":1}'
        )
        == prefixed
    )
    for bad in (b"t", b"Nothing:t", b"ANY:t", b"\xff:t"):
        with pytest.raises(ZkDataError):
            LiteralAclChangeStore.decode(bad)
    for bad in (
        b'{"version":2,"resourceType":"TOPIC","name":"t","patternType":"PREFIXED"}',
        b'{"version":1,"resourceType":"TOPIC","name":"t","patternType":"MATCH"}',
        b"x",
    ):
        with pytest.raises(ZkDataError):
            ExtendedAclChangeStore.decode(bad)
    with pytest.raises(ValueError):
        LiteralAclChangeStore.encode(prefixed)
    with pytest.raises(ValueError):
        ExtendedAclChangeStore.encode(literal)


def test_valid_node_names():
    assert (
        is_valid_node_name("orders") and is_valid_node_name("*") and is_valid_node_name("a:b.c-d_e")
    )
    for bad in ("", "a/b", ".", "..", "a\x00", "a\x1f", "\x7f", "\ue000", "\ufff0"):
        assert not is_valid_node_name(bad)


# ---- SCRAM credentials and config entities ----


def test_scram_credential_string_is_kafkas():
    credential = ScramCredential(b"salt", b"stored", b"server", 4096)
    text = "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
    assert credential_to_string(credential) == text
    assert credential_from_string(text) == credential
    assert (
        credential_from_string(
            "iterations=8192,server_key=c2VydmVy,salt=c2FsdA==,stored_key=c3RvcmVk"
        ).iterations
        == 8192
    )
    for bad in (
        "",
        "salt=c2FsdA==",
        text + ",extra=1",
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=x",
        "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1",
        "=1,salt=c2FsdA==",
    ):
        with pytest.raises(ValueError):
            credential_from_string(bad)


def test_user_and_broker_config_nodes_are_kafkas():
    user = {
        "SCRAM-SHA-512": "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192",
        "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        "producer_byte_rate": "1024",
    }
    assert ConfigEntityZNode.encode(user) == (
        b'{"version":1,"config":{"SCRAM-SHA-512":"salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192",'
        b'"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096","producer_byte_rate":"1024"}}'
    )
    broker = {
        "log.cleaner.threads": "2",
        "log.retention.ms": "3600000",
        "message.max.bytes": "2000000",
    }
    assert ConfigEntityZNode.encode(broker) == (
        b'{"version":1,"config":{"log.retention.ms":"3600000","message.max.bytes":"2000000","log.cleaner.threads":"2"}}'
    )
    assert (
        ConfigEntityChangeNotificationSequenceZNode.encode("users/carol")
        == b'{"version":2,"entity_path":"users/carol"}'
    )
    assert (
        ConfigEntityChangeNotificationSequenceZNode.encode("brokers/<default>")
        == b'{"version":2,"entity_path":"brokers/<default>"}'
    )


@pytest.mark.parametrize(
    "name,sanitized",
    [
        ("alice", "alice"),
        ("a b", "a%20b"),
        ("x*y", "x%2Ay"),
        ("é", "%C3%A9"),
        ("a+b", "a%2Bb"),
        ("~t", "%7Et"),
        ("User:bob", "User%3Abob"),
        ("o'neil@example.com", "o%27neil%40example.com"),
        ("a.b-c_d", "a.b-c_d"),
    ],
)
def test_entity_names_are_sanitized_as_kafka_does(name, sanitized):
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_sanitized_names_are_node_names_and_come_back(name):
    # but "." and "..", which URLEncoder keeps: the cluster's store refuses those users
    assert (
        is_valid_node_name(sanitize(name)) == (name not in (".", ".."))
        and sanitize(name) != "<default>"
    )
    assert desanitize(sanitize(name)) == name


def test_config_change_listener_dispatches_by_entity_type():
    seen = []
    listener = ConfigChangeListener.__new__(ConfigChangeListener)
    listener._handlers = {
        "users": lambda n: seen.append(("users", n)),
        "brokers": lambda n: seen.append(("brokers", n)),
    }
    listener._nested = {"clients": lambda n: seen.append(("clients quotas", n))}
    for data in (
        b'{"version":2,"entity_path":"users/carol"}',
        b'{"version":2,"entity_path":"brokers/<default>"}',
        b'{"version":2,"entity_path":"topics/t"}',
        b'{"version":2,"entity_path":"users/u/clients/c"}',
        b'{"version":1,"entity_type":"clients","entity_name":"c"}',
        b"junk",
        b'{"version":2,"entity_path":"users/"}',
    ):
        listener._on_notification(data)
    assert seen == [("users", "carol"), ("brokers", "<default>"), ("clients quotas", "c")]
    assert sequence_number("config_change_0000000042", "config_change_") == 42
    assert (
        sequence_number("config_change_x", "config_change_") is None
        and sequence_number("acl_changes_1", "config_change_") is None
    )


# ---- the authorizer's cache, a pattern at a time ----


def test_replacing_a_patterns_bindings_keeps_the_others_and_the_order(tmp_path):
    a = StandardAuthorizer(str(tmp_path))
    t = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    g = ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED)
    assert a._replace_pattern(t, [ALICE_READ])
    assert a._replace_pattern(g, [BOB_DENY])
    assert not a._replace_pattern(t, [ALICE_READ])
    assert a.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert a._replace_pattern(t, [BOB_DENY, ALICE_READ])
    assert a.bindings == [
        AclBinding(t, BOB_DENY),
        AclBinding(t, ALICE_READ),
        AclBinding(g, BOB_DENY),
    ]
    assert a._replace_pattern(t, [])
    assert a.bindings == [AclBinding(g, BOB_DENY)]
    assert not a.authorize(
        "User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t"
    )  # the decision cache was cleared
    assert not (
        tmp_path / "__logstore_metadata" / "acls.json"
    ).exists()  # the cache alone: nothing written
