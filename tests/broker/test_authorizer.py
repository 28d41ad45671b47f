"""The ACL authorizer: bindings, filters, Kafka's decision rules and the bindings file."""

from __future__ import annotations

import pytest

from broker_py.config.kafka_config import BrokerConfig
from broker_py.security.authorizer.acl_binding import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.security.ssl.ssl_context import distinguished_name
from logstore.protocol.errors import InvalidRequestError

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"


def binding(rtype, name, ptype, principal, op, perm=ALLOW, host="*") -> AclBinding:
    return AclBinding.create(rtype, name, ptype, principal, host, op, perm)


def test_nothing_is_allowed_without_a_binding_unless_configured(tmp_path):
    assert not StandardAuthorizer(str(tmp_path)).authorize(ALICE, "127.0.0.1", Op.READ, TOPIC, "t")
    assert StandardAuthorizer(str(tmp_path), allow_everyone_if_no_acl_found=True).authorize(
        ALICE, "h", Op.READ, TOPIC, "t"
    )


def test_super_users_may_do_anything(tmp_path):
    a = StandardAuthorizer(str(tmp_path), super_users=["User:admin"])
    a.create([binding(TOPIC, "t", LITERAL, ALICE, Op.ALL, DENY)])
    assert a.authorize("User:admin", "h", Op.DELETE, TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.READ, TOPIC, "t")


def test_literal_wildcard_and_prefixed_patterns(tmp_path):
    a = StandardAuthorizer(str(tmp_path))
    a.create(
        [
            binding(TOPIC, "orders", LITERAL, ALICE, Op.WRITE),
            binding(TOPIC, "logs-", PREFIXED, ALICE, Op.READ),
            binding(GROUP, "*", LITERAL, "User:*", Op.READ),
        ]
    )
    assert a.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders2")
    assert a.authorize(ALICE, "h", Op.READ, TOPIC, "logs-app")
    assert not a.authorize(ALICE, "h", Op.READ, TOPIC, "log")
    assert a.authorize(BOB, "h", Op.READ, GROUP, "any-group")
    assert not a.authorize(BOB, "h", Op.READ, TOPIC, "logs-app")


def test_implied_operations_and_deny_precedence(tmp_path):
    a = StandardAuthorizer(str(tmp_path))
    a.create(
        [
            binding(TOPIC, "t", LITERAL, ALICE, Op.READ),
            binding(TOPIC, "t", LITERAL, ALICE, Op.ALTER_CONFIGS),
            binding(TOPIC, "t", LITERAL, ALICE, Op.WRITE),
            binding(TOPIC, "t", PREFIXED, ALICE, Op.WRITE, DENY),
        ]
    )
    # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS; DENY wins over ALLOW.
    assert a.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.WRITE, TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.DELETE, TOPIC, "t")
    # A DENY of READ does not deny DESCRIBE.
    a.create([binding(TOPIC, "t", LITERAL, ALICE, Op.READ, DENY)])
    assert not a.authorize(ALICE, "h", Op.READ, TOPIC, "t")
    assert a.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "t")
    assert a.authorized_operations(ALICE, "h", TOPIC, "t") == (1 << Op.DESCRIBE) | (
        1 << Op.DESCRIBE_CONFIGS
    ) | (1 << Op.ALTER_CONFIGS)


def test_hosts_and_the_all_operation(tmp_path):
    a = StandardAuthorizer(str(tmp_path), allow_everyone_if_no_acl_found=True)
    a.create([binding(CLUSTER, "kafka-cluster", LITERAL, ALICE, Op.ALL, host="10.0.0.1")])
    assert a.authorize(ALICE, "10.0.0.1", Op.ALTER, CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, "10.0.0.2", Op.ALTER, CLUSTER, "kafka-cluster")
    # A binding on the resource means allow.everyone.if.no.acl.found no longer applies to it.
    assert not a.authorize(BOB, "10.0.0.1", Op.DESCRIBE, CLUSTER, "kafka-cluster")
    assert a.authorize(BOB, "10.0.0.1", Op.READ, TOPIC, "t")


def test_authorize_by_resource_type(tmp_path):
    a = StandardAuthorizer(str(tmp_path))
    assert not a.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    a.create([binding(TOPIC, "t", LITERAL, ALICE, Op.WRITE)])
    assert a.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    assert not a.authorize_by_resource_type(BOB, "h", Op.WRITE, TOPIC)
    a.create([binding(TOPIC, "*", LITERAL, ALICE, Op.WRITE, DENY)])
    assert not a.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)


def test_bindings_persist_and_deletes_report_what_matched(tmp_path):
    a = StandardAuthorizer(str(tmp_path))
    made = [
        binding(TOPIC, "t", LITERAL, ALICE, Op.READ),
        binding(TOPIC, "t-", PREFIXED, BOB, Op.WRITE),
        binding(GROUP, "g", LITERAL, ALICE, Op.READ),
    ]
    a.create(made + made[:1])
    assert StandardAuthorizer(str(tmp_path)).bindings == made
    everything_of_alice = AclBindingFilter.create(
        ResourceType.ANY, None, PatternType.ANY, ALICE, None, Op.ANY, AclPermissionType.ANY
    )
    assert a.delete([everything_of_alice, everything_of_alice]) == [
        [made[0], made[2]],
        [made[0], made[2]],
    ]
    assert StandardAuthorizer(str(tmp_path)).bindings == [made[1]]


def test_filters(tmp_path):
    literal = binding(TOPIC, "t-1", LITERAL, ALICE, Op.READ)
    wildcard = binding(TOPIC, "*", LITERAL, ALICE, Op.READ)
    prefixed = binding(TOPIC, "t-", PREFIXED, ALICE, Op.READ)

    def f(name, ptype, **kw):
        args = (
            dict(principal=None, host=None, operation=Op.ANY, permission=AclPermissionType.ANY) | kw
        )
        return AclBindingFilter.create(
            TOPIC,
            name,
            ptype,
            args["principal"],
            args["host"],
            args["operation"],
            args["permission"],
        )

    every = [literal, wildcard, prefixed]
    assert [b for b in every if f("t-1", PatternType.MATCH).matches(b)] == every
    assert [b for b in every if f("t-1", LITERAL).matches(b)] == [literal]
    assert [b for b in every if f(None, PatternType.ANY).matches(b)] == every
    assert [b for b in every if f(None, PREFIXED).matches(b)] == [prefixed]
    assert not f(None, PatternType.ANY, operation=Op.WRITE).matches(literal)
    assert not f(None, PatternType.ANY, principal=BOB).matches(literal)


@pytest.mark.parametrize(
    "args,problem",
    [
        ((ResourceType.ANY, "t", LITERAL, ALICE, "*", Op.READ, ALLOW), "resource type"),
        ((TOPIC, "t", PatternType.MATCH, ALICE, "*", Op.READ, ALLOW), "pattern type"),
        ((TOPIC, "t", LITERAL, ALICE, "*", Op.ANY, ALLOW), "operation"),
        ((TOPIC, "t", LITERAL, ALICE, "*", Op.READ, AclPermissionType.ANY), "permission"),
        ((TOPIC, "t", LITERAL, "alice", "*", Op.READ, ALLOW), "principal"),
        ((CLUSTER, "other", LITERAL, ALICE, "*", Op.ALTER, ALLOW), "kafka-cluster"),
        ((TOPIC, "", LITERAL, ALICE, "*", Op.READ, ALLOW), "name"),
        ((99, "t", LITERAL, ALICE, "*", Op.READ, ALLOW), "resource type"),
    ],
)
def test_invalid_bindings_name_the_problem(args, problem):
    with pytest.raises(InvalidRequestError, match=problem):
        AclBinding.create(*args)


def test_config_keys():
    config = BrokerConfig(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin; User:CN=broker,O=example",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    assert config["super.users"] == ["User:admin", "User:CN=broker,O=example"]
    assert config["allow.everyone.if.no.acl.found"] is True
    assert BrokerConfig({})["authorizer.class.name"] == ""


def test_certificate_subject_as_rfc_2253():
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("commonName", "client"),),
    )
    assert distinguished_name(subject) == "CN=client,O=Example\\, Inc.,C=US"
