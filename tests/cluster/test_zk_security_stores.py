"""The cluster's SCRAM credential store, ACL authorizer and dynamic broker config store
against a real ZooKeeper, two or three "brokers" (each its own ZooKeeper session) in one
process: a change through one reaches the others through Kafka's notifications, updates
are conditional so concurrent writers lose nothing, data Kafka's own tools write is read,
and nothing a notification carries can break a broker."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kazoo.client import KazooClient

from broker_py.config.kafka_config import BrokerConfig
from broker_py.security.authorizer.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker_py.security.sasl.scram_credentials import ScramCredential, credential_to_string
from broker_py.zk.acl_authorizer import AclAuthorizer
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener
from broker_py.zk.zk_dynamic_broker_config_store import ZkDynamicBrokerConfigStore
from broker_py.zk.zk_scram_credential_store import ZkScramCredentialStore
from logstore.protocol.errors import (
    InvalidRequestError,
    UnacceptableCredentialError,
    UnknownServerError,
)

READ, ALLOW, DENY = AclOperation.READ, AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC_T = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)


def binding(pattern: ResourcePattern, principal: str, op=READ, permission=ALLOW) -> AclBinding:
    return AclBinding(pattern, AccessControlEntry(principal, "*", op, permission))


@pytest.fixture
def zks(zk_connect):
    """A factory of started KafkaZkClients on one chroot (and a raw kazoo client as
    ``zks.raw``, for what Kafka's own tools would write)."""
    opened: list = []

    def new() -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=6000)
        client.start()
        opened.append(client)
        return client

    new()  # makes the chroot and Kafka's paths
    new.raw = KazooClient(hosts=zk_connect)
    new.raw.start(10)
    yield new
    for closer in opened:
        closer.close()
    new.raw.stop()
    new.raw.close()


async def until(predicate, timeout: float = 5.0, message: str = "condition") -> float:
    """Polls ``predicate`` on the event loop; the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.005)
    return time.monotonic() - start


def node(raw: KazooClient, path: str):
    return json.loads(raw.get(path)[0]) if raw.exists(path) else None


# ---- SCRAM credentials ----


def scram_store(zk: KafkaZkClient) -> tuple[ZkScramCredentialStore, ConfigChangeListener]:
    changes = ConfigChangeListener(zk)
    store = ZkScramCredentialStore(zk, asyncio.get_running_loop())
    store.start(changes)
    return store, changes


def test_scram_credentials_reach_every_broker_and_keep_the_users_other_configs(zks):
    raw = zks.raw
    raw.create(
        "/config/users/carol",
        b'{"version":1,"config":{"producer_byte_rate":"1024"}}',
        makepath=True,
    )
    sha256 = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)

    async def main():
        (a, ca), (b, cb) = scram_store(zks()), scram_store(zks())
        try:
            assert await a.apply([("carol", "SCRAM-SHA-256", sha256)], []) == {}
            assert (
                a.get("carol", "SCRAM-SHA-256") == sha256
            )  # this broker's cache, before the response
            took = await until(
                lambda: b.get("carol", "SCRAM-SHA-256") == sha256, message="carol on b"
            )
            assert took < 5
            assert node(raw, "/config/users/carol")["config"] == {
                "producer_byte_rate": "1024",
                "SCRAM-SHA-256": credential_to_string(sha256),
            }
            assert await b.describe_shared() == {"carol": {"SCRAM-SHA-256": 4096}}

            # A user Kafka's kafka-configs.sh created: its node, then its notification.
            sha512 = ScramCredential.from_password("SCRAM-SHA-512", "dave-pw", 8192)
            raw.create(
                "/config/users/dave%40example.com",
                json.dumps(
                    {"version": 1, "config": {"SCRAM-SHA-512": credential_to_string(sha512)}}
                ).encode(),
            )
            raw.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"users/dave%40example.com"}',
                sequence=True,
            )
            await until(
                lambda: (
                    a.get("dave@example.com", "SCRAM-SHA-512")
                    == sha512
                    == b.get("dave@example.com", "SCRAM-SHA-512")
                ),
                message="dave",
            )

            # Junk among the notifications and a corrupt node are skipped; later ones still count.
            raw.create("/config/changes/config_change_", b"junk", sequence=True)
            raw.create("/config/users/eve", b"{not json", makepath=True)
            raw.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"users/eve"}',
                sequence=True,
            )
            assert await b.apply([], [("carol", "SCRAM-SHA-256")]) == {}
            await until(
                lambda: a.get("carol", "SCRAM-SHA-256") is None, message="carol's deletion on a"
            )
            assert a.describe() == b.describe() == {"dave@example.com": {"SCRAM-SHA-512": 8192}}
            assert node(raw, "/config/users/carol") == {
                "version": 1,
                "config": {"producer_byte_rate": "1024"},
            }

            failed = await a.apply(
                [(".", "SCRAM-SHA-256", sha256), ("ok", "SCRAM-SHA-256", sha256)], []
            )
            assert list(failed) == ["."] and isinstance(failed["."], UnacceptableCredentialError)
            assert a.get("ok", "SCRAM-SHA-256") == sha256
        finally:
            ca.close()
            cb.close()

    asyncio.run(main())


def test_concurrent_scram_changes_of_one_user_from_two_brokers_both_land(zks):
    async def main():
        (a, ca), (b, cb) = scram_store(zks()), scram_store(zks())
        try:
            for n in range(8):
                c256 = ScramCredential.from_password("SCRAM-SHA-256", f"p{n}", 4096)
                c512 = ScramCredential.from_password("SCRAM-SHA-512", f"p{n}", 4096)
                got = await asyncio.gather(
                    a.apply([("u", "SCRAM-SHA-256", c256)], []),
                    b.apply([("u", "SCRAM-SHA-512", c512)], []),
                )
                assert got == [{}, {}]
                await until(
                    lambda c256=c256, c512=c512: (
                        a.get("u", "SCRAM-SHA-256") == b.get("u", "SCRAM-SHA-256") == c256
                        and a.get("u", "SCRAM-SHA-512") == b.get("u", "SCRAM-SHA-512") == c512
                    ),
                    message=f"round {n}",
                )
            assert sorted(node(zks.raw, "/config/users/u")["config"]) == [
                "SCRAM-SHA-256",
                "SCRAM-SHA-512",
            ]
        finally:
            ca.close()
            cb.close()

    asyncio.run(main())


# ---- ACLs ----


def authorizer(zk: KafkaZkClient, **kwargs) -> AclAuthorizer:
    a = AclAuthorizer(zk, asyncio.get_running_loop(), **kwargs)
    a.start()
    return a


def test_acls_reach_every_broker_in_kafkas_layout(zks):
    raw = zks.raw
    prefixed = ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED)

    async def main():
        a, b = authorizer(zks()), authorizer(zks())
        try:
            assert not b.authorize("User:alice", "h", READ, ResourceType.TOPIC, "t")
            bad = binding(
                ResourcePattern(ResourceType.TOPIC, "a/b", PatternType.LITERAL), "User:alice"
            )
            results = await a.create(
                [binding(TOPIC_T, "User:alice"), bad, binding(prefixed, "User:bob")]
            )
            assert (
                results[0] is None
                and results[2] is None
                and isinstance(results[1], InvalidRequestError)
            )
            assert a.authorize(
                "User:alice", "h", READ, ResourceType.TOPIC, "t"
            )  # before the response
            await until(
                lambda: b.authorize("User:alice", "h", READ, ResourceType.TOPIC, "t"),
                message="alice on b",
            )
            await until(
                lambda: b.authorize("User:bob", "h", READ, ResourceType.TOPIC, "pay-1"),
                message="bob on b",
            )
            assert node(raw, "/kafka-acl/Topic/t") == {
                "version": 1,
                "acls": [
                    {
                        "principal": "User:alice",
                        "permissionType": "Allow",
                        "operation": "Read",
                        "host": "*",
                    }
                ],
            }
            assert (
                node(raw, "/kafka-acl-extended/prefixed/Topic/pay-")["acls"][0]["principal"]
                == "User:bob"
            )
            changes = sorted(raw.get_children("/kafka-acl-changes"))
            assert [raw.get(f"/kafka-acl-changes/{c}")[0] for c in changes] == [b"TOPIC:t"]

            # A binding already there is kept once, and writes nothing.
            version = raw.get("/kafka-acl/Topic/t")[1].version
            assert await b.create([binding(TOPIC_T, "User:alice")]) == [None]
            assert raw.get("/kafka-acl/Topic/t")[1].version == version

            # Deleted through b: gone from ZooKeeper and from a.
            every = AclBindingFilter.create(
                ResourceType.ANY,
                None,
                PatternType.ANY,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
            matched, errors = await b.delete([every])
            assert (
                sorted(x.entry.principal for x in matched[0]) == ["User:alice", "User:bob"]
                and errors == {}
            )
            await until(lambda: not a.bindings, message="deletions on a")
            assert not raw.exists("/kafka-acl/Topic/t") and not raw.exists(
                "/kafka-acl-extended/prefixed/Topic/pay-"
            )

            # What kafka-acls.sh writes (another key order, the legacy change format) is read.
            raw.create(
                "/kafka-acl/Group/g",
                b'{"version": 1, "acls": [{"host": "*", "operation": "Read", '
                b'"permissionType": "Allow", "principal": "User:carol"}]}',
            )
            raw.create("/kafka-acl-changes/acl_changes_", b"Group:g", sequence=True)
            await until(
                lambda: (
                    a.authorize("User:carol", "h", READ, ResourceType.GROUP, "g")
                    and b.authorize("User:carol", "h", READ, ResourceType.GROUP, "g")
                ),
                message="carol",
            )

            # Junk notifications and an unreadable node never break a broker; the node is not
            # overwritten.
            raw.create("/kafka-acl-changes/acl_changes_", b"nonsense", sequence=True)
            raw.create("/kafka-acl-extended-changes/acl_changes_", b"{", sequence=True)
            raw.create("/kafka-acl/Topic/broken", b'{"version":1,"acls":[{"principal":"nobody"}]}')
            raw.create("/kafka-acl-changes/acl_changes_", b"TOPIC:broken", sequence=True)
            broken = ResourcePattern(ResourceType.TOPIC, "broken", PatternType.LITERAL)
            (error,) = await a.create([binding(broken, "User:x")])
            assert isinstance(error, UnknownServerError) and "do not decode" in str(error)
            assert (
                raw.get("/kafka-acl/Topic/broken")[0]
                == b'{"version":1,"acls":[{"principal":"nobody"}]}'
            )
            raw.create(
                "/kafka-acl/Topic/after",
                b'{"version":1,"acls":[{"principal":"User:d","permissionType":"Deny","operation":"All","host":"*"}]}',
            )
            raw.create("/kafka-acl-changes/acl_changes_", b"TOPIC:after", sequence=True)
            await until(
                lambda: any(x.pattern.name == "after" for x in b.bindings),
                message="the change after the junk",
            )

            # A broker starting now reads all of it.
            c = authorizer(zks())
            try:
                assert sorted((x.pattern.name, x.entry.principal) for x in c.bindings) == [
                    ("after", "User:d"),
                    ("g", "User:carol"),
                ]
            finally:
                c.close()
        finally:
            a.close()
            b.close()

    asyncio.run(main())


def test_concurrent_acl_changes_of_one_pattern_from_three_brokers_all_land(zks):
    async def main():
        brokers = [authorizer(zks()) for _ in range(3)]
        try:
            for n in range(5):
                made = [binding(TOPIC_T, f"User:u{n}-{i}") for i in range(3)]
                results = await asyncio.gather(*(a.create([m]) for a, m in zip(brokers, made)))
                assert results == [[None]] * 3
            principals = sorted(e["principal"] for e in node(zks.raw, "/kafka-acl/Topic/t")["acls"])
            assert principals == sorted(f"User:u{n}-{i}" for n in range(5) for i in range(3))
            for a in brokers:
                await until(
                    lambda a=a: len(a.bindings) == 15, message="every binding on every broker"
                )
            # and concurrent deletions of different principals leave the rest
            filters = [
                AclBindingFilter.create(
                    ResourceType.TOPIC,
                    "t",
                    PatternType.LITERAL,
                    f"User:u0-{i}",
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
                for i in range(3)
            ]
            outcomes = await asyncio.gather(*(a.delete([f]) for a, f in zip(brokers, filters)))
            assert [len(matched[0]) for matched, errors in outcomes] == [1, 1, 1]
            assert len(node(zks.raw, "/kafka-acl/Topic/t")["acls"]) == 12
        finally:
            for a in brokers:
                a.close()

    asyncio.run(main())


def test_an_acl_change_zookeeper_cannot_take_fails_alone(zks):
    async def main():
        zk = zks()
        a = authorizer(zk)
        try:
            assert await a.create([binding(TOPIC_T, "User:bob")]) == [None]
            zk.close()
            (error,) = await a.create([binding(TOPIC_T, "User:alice")])
            assert isinstance(error, UnknownServerError) and "ZooKeeper" in str(error)
            assert not a.authorize("User:alice", "h", READ, ResourceType.TOPIC, "t")
            # a deletion ZooKeeper cannot take reports the bindings it meant to delete, each
            # with the error
            every = AclBindingFilter.create(
                ResourceType.ANY,
                None,
                PatternType.ANY,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
            matched, errors = await a.delete([every])
            assert matched == [[binding(TOPIC_T, "User:bob")]] and isinstance(
                errors[binding(TOPIC_T, "User:bob")], UnknownServerError
            )
            assert a.authorize("User:bob", "h", READ, ResourceType.TOPIC, "t")
        finally:
            a.close()

    asyncio.run(main())


# ---- dynamic broker configs ----


def config_store(
    zk: KafkaZkClient, broker_id: int, applied: list
) -> tuple[ZkDynamicBrokerConfigStore, ConfigChangeListener]:
    config = BrokerConfig({"broker.id": str(broker_id)})
    store: ZkDynamicBrokerConfigStore

    def apply(resource: str, configs: dict[str, str]) -> None:
        applied.append((resource, configs))
        store.set(resource, configs, check=lambda: None)

    changes = ConfigChangeListener(zk)
    store = ZkDynamicBrokerConfigStore(zk, asyncio.get_running_loop(), config, apply)
    store.start(changes)
    store.load()
    return store, changes


def test_broker_configs_reach_the_brokers_they_name(zks):
    raw = zks.raw
    raw.create(
        "/config/brokers/2",
        b'{"version":1,"config":{"log.cleaner.threads":"3","broker.id":"7"}}',
        makepath=True,
    )

    async def main():
        seen1, seen2 = [], []
        (s1, c1), (s2, c2) = config_store(zks(), 1, seen1), config_store(zks(), 2, seen2)
        try:
            # At startup a broker layers its node (what it refuses left out, logged).
            assert (
                s2.get("2") == {"log.cleaner.threads": "3"}
                and s2._config["log.cleaner.threads"] == 3
            )
            await s1.write("", {"log.cleaner.backoff.ms": "12345"})
            assert seen1 == [
                ("", {"log.cleaner.backoff.ms": "12345"})
            ]  # at once, before the response
            await until(
                lambda: seen2 == [("", {"log.cleaner.backoff.ms": "12345"})],
                message="the default on broker 2",
            )
            assert s2._config["log.cleaner.backoff.ms"] == 12345
            assert node(raw, "/config/brokers/<default>") == {
                "version": 1,
                "config": {"log.cleaner.backoff.ms": "12345"},
            }

            await s1.write("2", {"log.cleaner.threads": "2"})
            await s1.write("3", {"log.cleaner.threads": "4"})
            await until(
                lambda: s2.get("2") == {"log.cleaner.threads": "2"}, message="broker 2's own"
            )
            await asyncio.sleep(0.2)
            assert seen1 == [
                ("", {"log.cleaner.backoff.ms": "12345"})
            ]  # neither 2's nor 3's concerned broker 1
            assert await s2.read("3") == {"log.cleaner.threads": "4"} and await s2.read("") == {
                "log.cleaner.backoff.ms": "12345"
            }
            changes = [
                raw.get(f"/config/changes/{c}")[0]
                for c in sorted(raw.get_children("/config/changes"))
            ]
            assert changes == [
                b'{"version":2,"entity_path":"brokers/%s"}' % n for n in (b"<default>", b"2", b"3")
            ]

            # A value a broker refuses (written by another tool) is logged; the broker keeps
            # its layers.
            raw.set(
                "/config/brokers/<default>",
                b'{"version":1,"config":{"log.cleaner.backoff.ms":"soon"}}',
            )
            raw.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"brokers/<default>"}',
                sequence=True,
            )
            s1._apply = lambda r, c: s1.set(r, c, check=lambda: None)
            await asyncio.sleep(0.3)
            assert (
                s1._config["log.cleaner.backoff.ms"]
                == 12345
                == s2._config["log.cleaner.backoff.ms"]
            )
        finally:
            c1.close()
            c2.close()

    asyncio.run(main())
