"""Client quotas in process: Kafka's eight-level precedence, the quota manager's rate and
throttle (hypothesis), the controller mutation token bucket, and DescribeClientQuotas /
AlterClientQuotas through the handlers over a broker alone's store (Kafka's refusals,
filters, keys kept beside the quotas, authorization)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.config.config_entity_store import LocalConfigEntityStore
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.handlers import client_quotas as handlers
from broker_py.server.quota.client_quota_entity import DEFAULT, QuotaEntity, entity_of_path
from broker_py.server.quota.client_quota_manager import ClientQuotaManager
from broker_py.server.quota.client_quotas import ClientQuotas
from broker_py.server.quota.controller_mutation_quota import ControllerMutationQuotaManager
from broker_py.utils.sampled_rate import RateConfig
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

# Kafka's documented order (docs/ops "Quotas": the most specific first), and the sensor
# each level's requests count in.
LEVELS = [
    (QuotaEntity("alice", "app"), ("alice", "app")),
    (QuotaEntity("alice", DEFAULT), ("alice", "app")),
    (QuotaEntity("alice", None), ("alice", "")),
    (QuotaEntity(DEFAULT, "app"), ("alice", "app")),
    (QuotaEntity(DEFAULT, DEFAULT), ("alice", "app")),
    (QuotaEntity(DEFAULT, None), ("alice", "")),
    (QuotaEntity(None, "app"), ("", "app")),
    (QuotaEntity(None, DEFAULT), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_precedence(level: int) -> None:
    """With quotas set at this level and every less specific one, this level's applies;
    levels that name another user or client never do."""
    m = ClientQuotaManager("producer_byte_rate")
    for i, (entity, _) in enumerate(LEVELS[level:], start=level):
        m.update(entity, 1000.0 + i)
    m.update(QuotaEntity("bob", "app"), 1.0)
    m.update(QuotaEntity("alice", "other"), 2.0)
    m.update(QuotaEntity(None, "other"), 3.0)
    assert m.quota_of("alice", "app") == 1000.0 + level
    assert m.tags("alice", "app") == LEVELS[level][1]


def test_no_quota_records_nothing() -> None:
    m = ClientQuotaManager("producer_byte_rate")
    assert m.record("alice", "app", 1e9, 0) == 0
    assert m.sensors(0) == []
    m.update(QuotaEntity(None, "other"), 10.0)
    assert m.record("alice", "app", 1e9, 0) == 0  # counted (a quota exists), unlimited
    assert [t for t, _, _ in m.sensors(0)] == [("", "app")]


@settings(max_examples=150, deadline=None)
@given(
    bound=st.integers(1, 10_000),
    steps=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 50_000)), max_size=40),
)
def test_throttled_client_is_held_to_its_bound(bound: int, steps) -> None:
    """A client that waits out each throttle time it is given (KIP-219) gets no more
    than its bound plus its largest request in each span of the windows; a
    throttle is given exactly when the rate is over the bound."""
    m = ClientQuotaManager("producer_byte_rate", RateConfig(11, 1000), expiry_ms=10**12)
    m.update(QuotaEntity("u", None), float(bound))
    start = now = 1_000_000
    total = largest = 0
    for gap, value in steps:
        now += gap
        throttle = m.record("u", "c", value, now)
        total += value
        largest = max(largest, value)
        rate = {t: r for t, r, _ in m.sensors(now)}[("u", "")]
        assert (throttle > 0) == (round((rate - bound) / bound * 10_000) > 0)
        spans = (now - start) / 11_000 + 1  # spans of 11 windows the run covers
        assert total <= spans * (bound * 11 + largest)
        now += throttle
        m.record_throttle("u", "c", throttle, now)
    m.unrecord("u", "c", 5, now)


def test_sensors_are_bounded_and_expire() -> None:
    m = ClientQuotaManager("producer_byte_rate", max_sensors=3, expiry_ms=1000)
    m.update(QuotaEntity(None, DEFAULT), 10.0)
    for i in range(10):
        m.record("u", f"client-{i}", 1, i)
    assert [t for t, _, _ in m.sensors(9)] == [("", f"client-{i}") for i in (7, 8, 9)]
    assert m.sensors(5000) == []


def test_request_throttle_is_capped() -> None:
    m = ClientQuotaManager("request_percentage", RateConfig(11, 1000), max_throttle_ms=1000)
    m.update(QuotaEntity("u", None), 1.0)
    assert m.record("u", "c", 10_000, 0) == 1000


def test_controller_mutation_token_bucket() -> None:
    cm = ControllerMutationQuotaManager(RateConfig(2, 1000))
    cm.update(QuotaEntity("u", None), 5.0)  # burst 10
    strict = cm.quota("u", "c", strict=True)
    assert strict.record(8, 0) and strict.throttle_time_ms == 0
    assert strict.record(6, 0)  # 2 left: goes to -4
    assert strict.throttle_time_ms == 0
    assert not strict.record(1, 0)  # below zero: refused
    assert strict.throttle_time_ms == 800  # 4 tokens at 5/s
    assert cm.quota("u", "c", strict=True).record(1, 800)  # refilled to 0
    permissive = cm.quota("u", "c", strict=False)
    assert permissive.record(5, 800) and permissive.throttle_time_ms == 1200
    assert cm.quota("other", "c", strict=True).record(1000, 800)  # no quota


def test_entity_paths() -> None:
    for entity in [e for e, _ in LEVELS] + [QuotaEntity("a/b c", "*")]:
        assert entity_of_path(entity.path()) == entity
    assert QuotaEntity("a/b c", "*").path() == "users/a%2Fb%20c/clients/%2A"
    assert QuotaEntity(DEFAULT, DEFAULT).path() == "users/<default>/clients/<default>"
    assert entity_of_path("topics/x") is None


# ---- the handlers ----


class Authorizer:
    def __init__(self, allowed: set[AclOperation]) -> None:
        self.allowed = allowed

    def authorize(self, principal, host, operation, resource_type, name):
        return operation in self.allowed


CONFIG = {
    "quota.window.num": 11,
    "quota.window.size.seconds": 1,
    "controller.quota.window.num": 11,
    "controller.quota.window.size.seconds": 1,
}
CONNECTION = SimpleNamespace(principal="User:admin", host="127.0.0.1")


def make_apis(log_dir: str, authorizer=None):
    quotas = ClientQuotas(LocalConfigEntityStore(log_dir, "client-quotas.json"), CONFIG)
    quotas.start()
    return SimpleNamespace(client_quotas=quotas, authorizer=authorizer, zk_support=None)


def _entity(cls, pairs):
    return [cls(entity_type=t, entity_name=n) for t, n in pairs]


def alter(apis, *entries, validate_only=False, connection=CONNECTION):
    R = AlterClientQuotasRequest
    body = R(
        entries=[
            R.EntryData(
                entity=_entity(R.EntityData, pairs),
                ops=[R.OpData(key=k, value=v, remove=rm) for k, v, rm in ops],
            )
            for pairs, ops in entries
        ],
        validate_only=validate_only,
    )
    got = handlers.handle_alter_client_quotas(apis, SimpleNamespace(body=body), connection)
    return [(ErrorCode(e.error_code), e.error_message) for e in got.entries]


def describe(apis, components, strict=False, connection=CONNECTION):
    R = DescribeClientQuotasRequest
    body = R(
        components=[
            R.ComponentData(entity_type=t, match_type=m, match=v) for t, m, v in components
        ],
        strict=strict,
    )
    got = handlers.handle_describe_client_quotas(apis, SimpleNamespace(body=body), connection)
    if got.error_code:
        return ErrorCode(got.error_code), got.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in got.entries
    }


OK = (ErrorCode.NONE, None)


def test_alter_refusals(tmp_path) -> None:
    apis = make_apis(str(tmp_path))
    bad = ErrorCode.INVALID_REQUEST
    assert alter(
        apis,
        ([], [("producer_byte_rate", 1.0, False)]),
        ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0, False)]),
        ([("group", "g")], [("producer_byte_rate", 1.0, False)]),
        ([("user", "")], [("producer_byte_rate", 1.0, False)]),
        ([("ip", "1.2.3.4"), ("user", "a")], [("connection_creation_rate", 1.0, False)]),
        ([("user", "a")], [("producer_byte_rate", 1.5, False)]),
        ([("user", "b")], [("producer_byte_rate", 0.0, False)]),
        ([("user", "c")], [("request_percentage", -1.0, False)]),
        ([("user", "d")], [("bogus", 1.0, False)]),
        ([("user", "e")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2, False)]),
        ([("user", "f")], [("producer_byte_rate", 1e30, False)]),
    ) == [
        (bad, "Invalid empty client quota entity"),
        (bad, "Invalid client quota entity, duplicate entity entry user"),
        (bad, "Unhandled client quota entity type: group"),
        (bad, "Empty user not supported"),
        (
            bad,
            "Invalid quota entity combination, IP entity should not be combined with User or "
            "ClientId",
        ),
        (bad, "producer_byte_rate cannot be a fractional value."),
        (bad, "Quota producer_byte_rate must be greater than 0"),
        (bad, "Quota request_percentage must be greater than 0"),
        (bad, "Invalid configuration key bogus"),
        (bad, "Duplicate quota key producer_byte_rate not updating quota for this entity"),
        (bad, "Proposed value for producer_byte_rate is too large for a LONG."),
    ]
    assert describe(apis, []) == {}


def test_alter_and_describe(tmp_path) -> None:
    apis = make_apis(str(tmp_path))
    assert alter(
        apis,
        (
            [("user", "alice")],
            [("producer_byte_rate", 1024, False), ("request_percentage", 50, False)],
        ),
        ([("user", None), ("client-id", None)], [("consumer_byte_rate", 2048, False)]),
        ([("client-id", "app")], [("controller_mutation_rate", 2.5, False)]),
        ([("user", "alice"), ("client-id", "app")], [("producer_byte_rate", 10, False)]),
        ([("user", "alice")], [("consumer_byte_rate", 1, False)]),
    ) == [OK, OK, OK, OK, (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity user=alice")]
    alice = (("user", "alice"),)
    alice_app = (("user", "alice"), ("client-id", "app"))
    defaults = (("user", None), ("client-id", None))
    app = (("client-id", "app"),)
    every = {
        alice: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
        defaults: {"consumer_byte_rate": 2048.0},
        app: {"controller_mutation_rate": 2.5},
        alice_app: {"producer_byte_rate": 10.0},
    }
    assert describe(apis, []) == every
    assert describe(apis, [], strict=True) == {}
    assert describe(apis, [("user", 0, "alice")]) == {k: every[k] for k in (alice, alice_app)}
    assert describe(apis, [("user", 0, "alice")], strict=True) == {alice: every[alice]}
    assert describe(apis, [("user", 1, None)]) == {defaults: every[defaults]}
    assert describe(apis, [("user", 2, None)]) == {
        k: every[k] for k in (alice, alice_app, defaults)
    }
    assert describe(apis, [("user", 2, None), ("client-id", 2, None)], strict=True) == {
        k: every[k] for k in (alice_app, defaults)
    }
    assert describe(apis, [("client-id", 0, "app")], strict=True) == {app: every[app]}
    assert describe(apis, [("ip", 2, None)]) == {}
    # The managers follow the store.
    assert apis.client_quotas.produce.quota_of("alice", "app") == 10.0
    assert apis.client_quotas.produce.quota_of("alice", "x") == 1024.0
    assert apis.client_quotas.fetch.quota_of("bob", "x") == 2048.0
    assert apis.client_quotas.request.quota_of("alice", "app") == 50.0
    # validate_only writes nothing; removing the last key removes the entity.
    assert alter(apis, (list(alice), [("producer_byte_rate", 0, True)]), validate_only=True) == [OK]
    assert describe(apis, [("user", 0, "alice")], strict=True) == {alice: every[alice]}
    assert alter(
        apis,
        (list(alice), [("producer_byte_rate", 0, True), ("request_percentage", 0, True)]),
    ) == [OK]
    assert alice not in describe(apis, [])
    assert apis.client_quotas.produce.quota_of("alice", "x") is None
    # Kept on disk, read again at start.
    again = make_apis(str(tmp_path))
    assert describe(again, []) == {k: v for k, v in every.items() if k != alice}
    assert again.client_quotas.fetch.quota_of("bob", "x") == 2048.0


def test_other_keys_kept(tmp_path) -> None:
    """A user's node may hold SCRAM credentials beside its quotas: kept, never described."""
    path = os.path.join(tmp_path, "__logstore_metadata", "client-quotas.json")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump({"version": 1, "resources": {"users/bob": {"SCRAM-SHA-256": "x"}}}, f)
    apis = make_apis(str(tmp_path))
    assert describe(apis, []) == {}
    assert alter(apis, ([("user", "bob")], [("producer_byte_rate", 5, False)])) == [OK]
    with open(path) as f:
        stored = json.load(f)["resources"]["users/bob"]
    assert stored == {"SCRAM-SHA-256": "x", "producer_byte_rate": "5"}
    assert describe(apis, []) == {(("user", "bob"),): {"producer_byte_rate": 5.0}}


def test_filter_refusals(tmp_path) -> None:
    apis = make_apis(str(tmp_path))
    assert describe(apis, [("", 2, None)]) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected empty filter component entity type",
    )
    assert describe(apis, [("group", 2, None)]) == (
        ErrorCode.UNSUPPORTED_VERSION,
        "Custom entity type 'group' not supported",
    )
    assert describe(apis, [("user", 2, None), ("user", 1, None)]) == (
        ErrorCode.INVALID_REQUEST,
        "Duplicate user filter component entity type",
    )
    assert describe(apis, [("ip", 2, None), ("client-id", 1, None)])[0] == (
        ErrorCode.INVALID_REQUEST
    )
    assert describe(apis, [("user", 7, None)])[0] == ErrorCode.INVALID_REQUEST


def test_authorization(tmp_path) -> None:
    apis = make_apis(str(tmp_path), Authorizer({AclOperation.DESCRIBE_CONFIGS}))
    assert alter(apis, ([("user", "a")], [("producer_byte_rate", 5, False)])) == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER_CONFIGS on the cluster is not authorized")
    ]
    assert describe(apis, []) == {}
    apis.authorizer = Authorizer(set())
    assert describe(apis, [])[0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_request_time_counts_the_steps_not_the_waits(tmp_path) -> None:
    """request_percentage: a waiting handler's time is its synchronous part and each step
    it runs after a wait; the wait itself is not counted, and the response is stamped
    with the throttle time its time earned."""
    import asyncio
    import time as clock

    from broker_py.server.quota.request_throttle import throttled
    from broker_py.utils.time import SYSTEM_TIME
    from logstore.protocol.api_keys import ApiKey
    from logstore.protocol.messages.describe_cluster import DescribeClusterResponse

    apis = make_apis(str(tmp_path))
    apis.time = SYSTEM_TIME
    assert alter(apis, ([("client-id", "c")], [("request_percentage", 0.01, False)])) == [OK]

    async def handler(apis_, request, connection):
        await asyncio.sleep(0.2)  # waiting: not counted
        end = clock.perf_counter() + 0.03  # 30 ms on the loop: 3 percent-seconds
        while clock.perf_counter() < end:
            pass
        return DescribeClusterResponse(throttle_time_ms=0)

    handle = throttled(apis, {ApiKey.DESCRIBE_CLUSTER: lambda r, c: handler(apis, r, c)})
    connection = SimpleNamespace(principal="User:u", throttle_ms=0)
    request = SimpleNamespace(client_id="c")
    response = asyncio.run(handle[ApiKey.DESCRIBE_CLUSTER](request, connection))
    ((tags, rate, _),) = apis.client_quotas.request.sensors(SYSTEM_TIME.milliseconds())
    assert tags == ("", "c")
    assert 3.0 <= rate * 10 < 10.0  # over the 10-window span; the 20 of the wait left out
    assert response.throttle_time_ms == connection.throttle_ms == 1000  # capped: one window


def test_ip_entities(tmp_path) -> None:
    """connection_creation_rate on IP entities: alone, an IP address or the default, a
    whole number; described by ip components (and with no filter), not by user ones."""
    apis = make_apis(str(tmp_path))
    bad = ErrorCode.INVALID_REQUEST
    assert alter(
        apis,
        ([("ip", "10.0.0.1")], [("connection_creation_rate", 5, False)]),
        ([("ip", None)], [("connection_creation_rate", 100, False)]),
        ([("ip", "not an address")], [("connection_creation_rate", 5, False)]),
        ([("ip", "10.0.0.2")], [("producer_byte_rate", 5, False)]),
        ([("user", "u")], [("connection_creation_rate", 5, False)]),
        ([("ip", "10.0.0.3")], [("connection_creation_rate", 2.5, False)]),
        ([("ip", "10.0.0.4")], [("connection_creation_rate", 2**31, False)]),
        ([("user", "v")], [("producer_byte_rate", 5, False)]),
    ) == [
        OK,
        OK,
        (bad, "not an address is not a valid IP or resolvable host."),
        (bad, "Invalid configuration key producer_byte_rate"),
        (bad, "Invalid configuration key connection_creation_rate"),
        (bad, "connection_creation_rate cannot be a fractional value."),
        (bad, "Proposed value for connection_creation_rate is too large for an INT."),
        OK,
    ]
    ip1 = (("ip", "10.0.0.1"),)
    ip_default = (("ip", None),)
    user = (("user", "v"),)
    assert describe(apis, [("ip", 2, None)]) == {
        ip1: {"connection_creation_rate": 5.0},
        ip_default: {"connection_creation_rate": 100.0},
    }
    assert describe(apis, [("ip", 1, None)]) == {ip_default: {"connection_creation_rate": 100.0}}
    assert describe(apis, [("ip", 0, "10.0.0.1")]) == {ip1: {"connection_creation_rate": 5.0}}
    assert set(describe(apis, [])) == {ip1, ip_default, user}
    assert describe(apis, [("user", 2, None)]) == {user: {"producer_byte_rate": 5.0}}
    quotas = apis.client_quotas
    assert quotas.connection_rate("10.0.0.1") == 5.0
    assert quotas.connection_rate("10.9.9.9") == 100.0
    assert alter(apis, ([("ip", None)], [("connection_creation_rate", 0, True)])) == [OK]
    assert quotas.connection_rate("10.9.9.9") is None
    again = make_apis(str(tmp_path))  # kept on disk
    assert again.client_quotas.connection_rate("10.0.0.1") == 5.0


def test_connection_creation_rate_in_the_connection_quotas() -> None:
    """The listeners' connection quotas count each address's new connections: one over
    its rate is not counted and gets a throttle time of at most one window."""
    from broker_py.network.connection_quotas import ConnectionQuotas

    config = {"quota.window.num": 2, "quota.window.size.seconds": 1}
    quotas = ConnectionQuotas(config, 1000)
    assert quotas.ip_throttle_ms("10.0.0.1", 0) == 0  # no quota source: nothing counted
    quotas.ip_connection_rate = {"10.0.0.1": 2.0}.get
    assert [quotas.ip_throttle_ms("10.0.0.1", 0) for _ in range(4)] == [0, 0, 500, 500]
    assert quotas.ip_throttle_ms("10.0.0.2", 0) == 0  # another address: no quota
    assert quotas.ip_throttle_ms("10.0.0.1", 2000) == 0  # the windows moved on


def test_follower_fetches_are_exempt_from_request_quotas(tmp_path) -> None:
    """A follower's Fetch (a cluster action in Kafka) is not counted against the
    request quota of the inter-broker connection's user; a consumer's is."""
    from broker_py.server.quota.request_throttle import throttled
    from broker_py.utils.time import SYSTEM_TIME
    from logstore.protocol.api_keys import ApiKey

    apis = make_apis(str(tmp_path))
    apis.time = SYSTEM_TIME
    assert alter(apis, ([("user", None)], [("request_percentage", 1e-9, False)])) == [OK]
    handle = throttled(apis, {ApiKey.FETCH: lambda request, connection: [b"frame"]})[ApiKey.FETCH]
    connection = SimpleNamespace(principal="User:ANONYMOUS", throttle_ms=0)
    follower = SimpleNamespace(client_id="broker-2", body=SimpleNamespace(replica_id=2))
    v15 = SimpleNamespace(
        client_id="broker-2",
        body=SimpleNamespace(replica_state=SimpleNamespace(replica_id=2)),
    )
    for request in (follower, v15, follower):
        assert handle(request, connection) == [b"frame"]
        assert connection.throttle_ms == 0
    assert apis.client_quotas.request.sensors(SYSTEM_TIME.milliseconds()) == []
    consumer = SimpleNamespace(client_id="c", body=SimpleNamespace(replica_id=-1))
    handle(consumer, connection)
    assert connection.throttle_ms > 0


def test_forwarded_mutations_are_not_counted_again(tmp_path) -> None:
    """CreateTopics forwarded by another broker to the controller (its channel's client
    id) takes nothing from the forwarding broker's bucket; with an authorizer only from a
    principal allowed CLUSTER_ACTION. A client's own request is counted."""
    from broker_py.server.quota.request_throttle import mutation_quota

    apis = make_apis(str(tmp_path))
    assert alter(apis, ([("user", None)], [("controller_mutation_rate", 1, False)])) == [OK]
    connection = SimpleNamespace(principal="User:ANONYMOUS", host="127.0.0.1", throttle_ms=0)

    def request(client_id):
        return SimpleNamespace(client_id=client_id, api_key=ApiKey.CREATE_TOPICS, api_version=7)

    assert mutation_quota(apis, connection, request("broker-2-to-controller")) is None
    assert mutation_quota(apis, connection, request("broker-2-to-controllers")) is not None
    assert mutation_quota(apis, connection, request("app")) is not None
    apis.authorizer = Authorizer(set())
    assert mutation_quota(apis, connection, request("broker-2-to-controller")) is not None
    apis.authorizer = Authorizer({AclOperation.CLUSTER_ACTION})
    assert mutation_quota(apis, connection, request("broker-2-to-controller")) is None
