"""The admin handlers over a cluster's stores, whose writes are ZooKeeper calls to await
(CreateAcls, DeleteAcls, AlterUserScramCredentials, DescribeUserScramCredentials,
AlterConfigs and IncrementalAlterConfigs of BROKER resources): each item's outcome lands
on its own line of the response. The stores are fakes here; tests/cluster has the real
ones against ZooKeeper."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker_py.config.kafka_config import BrokerConfig
from broker_py.security.authorizer.acl_binding import AclBinding
from broker_py.server.handlers import acls, configs, sasl
from logstore.protocol.errors import InvalidRequestError, UnknownServerError
from logstore.protocol.messages.acls import CreateAclsRequest, DeleteAclsRequest
from logstore.protocol.messages.configs import AlterConfigsRequest, IncrementalAlterConfigsRequest
from logstore.protocol.messages.scram import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)


def run(result):
    """A handler's response, awaited if it is a coroutine."""
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


async def done(value):
    return value


class AsyncAuthorizer:
    def __init__(self) -> None:
        self.created: list[AclBinding] = []

    def create(self, bindings):
        self.created = list(bindings)
        return done(
            [
                UnknownServerError("ZooKeeper is not available")
                if b.pattern.name == "zkdown"
                else None
                for b in self.created
            ]
        )

    def delete(self, filters):
        b = AclBinding.create(2, "t", 3, "User:a", "*", 3, 3)
        return done(([[b]] * len(filters), {b: UnknownServerError("ZooKeeper is not available")}))


def creation(name: str, resource_type: int = 2):
    return CreateAclsRequest.AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )


def test_create_acls_waits_for_the_writes_and_places_each_error():
    apis = SimpleNamespace(authorizer=AsyncAuthorizer())
    body = CreateAclsRequest(
        creations=[creation("ok"), creation("bad", resource_type=0), creation("zkdown")]
    )
    r = run(acls.handle_create_acls(apis, SimpleNamespace(body=body, api_version=3), None))
    assert [x.error_code for x in r.results] == [0, 42, -1]
    assert [b.pattern.name for b in apis.authorizer.created] == ["ok", "zkdown"]


def test_delete_acls_reports_a_binding_the_write_left_with_its_error():
    apis = SimpleNamespace(authorizer=AsyncAuthorizer())
    f = DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    r = run(
        acls.handle_delete_acls(
            apis, SimpleNamespace(body=DeleteAclsRequest(filters=[f]), api_version=3), None
        )
    )
    (result,) = r.filter_results
    assert result.error_code == 0 and [
        (m.resource_name, m.error_code) for m in result.matching_acls
    ] == [("t", -1)]


class AsyncScramStore:
    def get(self, user, mechanism):
        return None

    def describe_shared(self):
        return done({"carol": {"SCRAM-SHA-512": 8192}})

    def apply(self, upserts, deletions):
        return done(
            {
                u: UnknownServerError("ZooKeeper is not available")
                for u, _, _ in upserts
                if u == "zkdown"
            }
        )


def test_scram_admin_through_a_cluster_store():
    apis = SimpleNamespace(scram_credentials=AsyncScramStore(), authorizer=None)
    up = [
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name=n, mechanism=1, iterations=4096, salt=b"s", salted_password=b"p" * 32
        )
        for n in ("ok", "zkdown")
    ]
    r = run(
        sasl.handle_alter_user_scram_credentials(
            apis,
            SimpleNamespace(body=AlterUserScramCredentialsRequest(deletions=[], upsertions=up)),
            None,
        )
    )
    assert [(x.user, x.error_code) for x in r.results] == [("ok", 0), ("zkdown", -1)]
    d = run(
        sasl.handle_describe_user_scram_credentials(
            apis, SimpleNamespace(body=DescribeUserScramCredentialsRequest(users=None)), None
        )
    )
    assert [
        (x.user, [(c.mechanism, c.iterations) for c in x.credential_infos]) for x in d.results
    ] == [("carol", [(2, 8192)])]


class FakeDynamicConfigs:
    def __init__(self) -> None:
        self.nodes = {"3": {"log.cleanup.policy": "delete"}}
        self.written: list = []

    def read(self, resource):
        return done(dict(self.nodes.get(resource, {})))

    def write(self, resource, configs):
        self.written.append((resource, configs))
        return done(None)


def cluster_apis():
    validated = []
    apis = SimpleNamespace(
        zk_support=object(),
        broker_id=1,
        config=BrokerConfig({"broker.id": "1"}),
        authorizer=None,
        dynamic_configs=FakeDynamicConfigs(),
        metadata_cache=None,
        config_admin_manager=SimpleNamespace(
            set_broker_configs=lambda r, c, validate_only=False: validated.append(
                (r, c, validate_only)
            )
        ),
    )
    return apis, validated


def broker_resource(name: str, *entries):
    R = IncrementalAlterConfigsRequest
    return R.AlterConfigsResource(
        resource_type=4,
        resource_name=name,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in entries],
    )


def test_broker_configs_of_any_broker_are_written_through_the_one_asked():
    apis, validated = cluster_apis()
    body = IncrementalAlterConfigsRequest(
        resources=[
            broker_resource("", ("log.cleaner.backoff.ms", 0, "12345")),
            broker_resource(
                "3", ("log.cleanup.policy", 2, "compact"), ("log.cleaner.threads", 0, "2")
            ),
            broker_resource("3", ("broker.id", 0, "9")),
            broker_resource("x", ("log.cleaner.threads", 0, "2")),
            broker_resource("1", ("log.cleaner.threads", 0, "3")),
        ],
        validate_only=False,
    )
    r = run(configs.handle_incremental_alter_configs(apis, SimpleNamespace(body=body), None))
    assert [x.error_code for x in r.responses] == [
        0,
        0,
        40,
        42,
        0,
    ]  # INVALID_CONFIG, INVALID_REQUEST
    assert apis.dynamic_configs.written == [
        ("", {"log.cleaner.backoff.ms": "12345"}),
        ("3", {"log.cleanup.policy": "delete,compact", "log.cleaner.threads": "2"}),
        ("1", {"log.cleaner.threads": "3"}),
    ]
    # this broker's own and the default's are checked against its layers first
    assert validated == [
        ("", {"log.cleaner.backoff.ms": "12345"}, True),
        ("1", {"log.cleaner.threads": "3"}, True),
    ]

    apis, _ = cluster_apis()
    R = AlterConfigsRequest
    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=4,
                resource_name="2",
                configs=[R.AlterableConfig(name="log.cleaner.threads", value="2")],
            )
        ],
        validate_only=True,
    )
    r = run(configs.handle_alter_configs(apis, SimpleNamespace(body=body), None))
    assert [x.error_code for x in r.responses] == [0] and apis.dynamic_configs.written == []


def test_a_broker_id_must_be_an_integer():
    try:
        configs._broker_id_or_default("-1")
    except InvalidRequestError:
        pass
    else:
        raise AssertionError("-1 accepted")
    assert configs._broker_id_or_default("007") == "7" and configs._broker_id_or_default("") == ""
