"""Client quotas of a cluster in ZooKeeper, against a real ZooKeeper with two "brokers"
(each its own session, change listener, ClientQuotas and SCRAM store) in one process:
quotas written through one are kept in Kafka's layout (``/config/users/<user>``,
``/config/users/<user>/clients/<client>``, ``/config/clients/<client>``), announced with
Kafka's change notifications and enforced by the other; a user's SCRAM credentials and
quotas share its node without losing each other; a broker started later reads them all,
and quotas Kafka's ``kafka-configs.sh`` wrote are read as Kafka wrote them."""

from __future__ import annotations

import asyncio

from broker_py.security.sasl.scram_credentials import ScramCredential
from broker_py.server.quota.client_quota_entity import (
    ALL_KEYS,
    DEFAULT,
    QuotaEntity,
    quota_filter,
)
from broker_py.server.quota.client_quotas import ClientQuotas
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener
from broker_py.zk.zk_client_quota_store import ZkClientQuotaStore
from tests.cluster.test_zk_config_entity_store import until
from tests.cluster.test_zk_security_stores import node, scram_store, zks  # noqa: F401

CONFIG = {
    "quota.window.num": 11,
    "quota.window.size.seconds": 1,
    "controller.quota.window.num": 11,
    "controller.quota.window.size.seconds": 1,
}


def quotas_of(zk: KafkaZkClient) -> tuple[ClientQuotas, ConfigChangeListener]:
    changes = ConfigChangeListener(zk)
    store = ZkClientQuotaStore(zk, asyncio.get_running_loop(), ALL_KEYS.__contains__)
    store.listen(changes)
    quotas = ClientQuotas(store, CONFIG)
    quotas.start()
    return quotas, changes


def test_quotas_reach_every_broker_beside_scram_credentials(zks):  # noqa: F811
    raw = zks.raw
    # As kafka-configs.sh --alter --entity-type clients --entity-default writes it.
    raw.create(
        "/config/clients/<default>",
        b'{"version":1,"config":{"consumer_byte_rate":"4096"}}',
        makepath=True,
    )
    sha256 = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    alice = QuotaEntity("alice", None)
    alice_app = QuotaEntity("alice", "app")

    async def main():
        (q1, c1), (q2, c2) = quotas_of(zks()), quotas_of(zks())
        scram, cs = scram_store(zks())
        closers = [c1, c2, cs]
        try:
            assert q1.fetch.quota_of("bob", "x") == q2.fetch.quota_of("bob", "x") == 4096
            assert await scram.apply([("alice", "SCRAM-SHA-256", sha256)], []) == {}
            got = await q1.alter(
                [
                    (alice, [("producer_byte_rate", 1024, False)]),
                    (alice_app, [("request_percentage", 12.5, False)]),
                    (QuotaEntity(DEFAULT, DEFAULT), [("controller_mutation_rate", 3, False)]),
                    (QuotaEntity(ip="10.0.0.1"), [("connection_creation_rate", 7, False)]),
                ],
                validate_only=False,
            )
            assert got == [None, None, None, None]
            await until(lambda: q2.produce.quota_of("alice", "x") == 1024, message="alice on 2")
            await until(lambda: q2.request.quota_of("alice", "app") == 12.5, message="app on 2")
            await until(lambda: q2.connection_rate("10.0.0.1") == 7, message="the ip on 2")
            assert node(raw, "/config/ips/10.0.0.1")["config"] == {"connection_creation_rate": "7"}
            user_node = node(raw, "/config/users/alice")["config"]
            assert sorted(user_node) == ["SCRAM-SHA-256", "producer_byte_rate"]
            assert user_node["producer_byte_rate"] == "1024"
            assert node(raw, "/config/users/alice/clients/app") == {
                "version": 1,
                "config": {"request_percentage": "12.5"},
            }
            assert node(raw, "/config/users/<default>/clients/<default>")["config"] == {
                "controller_mutation_rate": "3.0"
            }
            notes = sorted(raw.get_children("/config/changes"))
            paths = [node(raw, f"/config/changes/{n}")["entity_path"] for n in notes]
            assert "users/alice/clients/app" in paths and "users/alice" in paths

            # Removing the quota keeps the credential; the credential is never a quota.
            assert await q2.alter([(alice, [("producer_byte_rate", 0, True)])], False) == [None]
            await until(lambda: q1.produce.quota_of("alice", "x") is None, message="removal")
            assert list(node(raw, "/config/users/alice")["config"]) == ["SCRAM-SHA-256"]
            assert scram.get("alice", "SCRAM-SHA-256") == sha256
            described = {e.path(): v for e, v in q1.describe(_everything())}
            assert "users/alice" not in described

            # A broker started later reads every entity.
            q3, c3 = quotas_of(zks())
            closers.append(c3)
            assert (
                {e.path(): v for e, v in q3.describe(_everything())}
                == described
                == {
                    "clients/<default>": {"consumer_byte_rate": 4096.0},
                    "users/<default>/clients/<default>": {"controller_mutation_rate": 3.0},
                    "users/alice/clients/app": {"request_percentage": 12.5},
                    "ips/10.0.0.1": {"connection_creation_rate": 7.0},
                }
            )
        finally:
            for closer in closers:
                closer.close()

    asyncio.run(main())


def _everything():
    return quota_filter([], strict=False)
