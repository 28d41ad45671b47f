"""CLIENT_METRICS resources (and GROUP configs, the same store) of a cluster in ZooKeeper
(KIP-714), against a real
ZooKeeper with two "brokers" (each its own session, ClientTelemetry and change
listener) in one process: a resource written through one reaches the other's
subscriptions through Kafka's config change notification, is kept at
``/config/client-metrics/<name>``, goes when its last key is deleted, and a bad node
another tool wrote is ignored."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from broker_py.config.kafka_config import BrokerConfig
from broker_py.coordinator.group.group_config_manager import GroupConfigManager
from broker_py.server.handlers.configs import client_metrics_incremented
from broker_py.server.telemetry.client_telemetry import ClientTelemetry
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_change_notifications import ConfigChangeListener
from broker_py.zk.zk_config_entity_store import CLIENT_METRICS, GROUPS, ZkConfigEntityStore
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError
from logstore.protocol.messages.configs import IncrementalAlterConfigsRequest

Op = IncrementalAlterConfigsRequest.AlterableConfig


@pytest.fixture
def zks(zk_connect):
    opened: list[KafkaZkClient] = []

    def new() -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=6000)
        client.start()
        opened.append(client)
        return client

    yield new
    for client in opened:
        client.close()


def broker(zk: KafkaZkClient) -> tuple[ClientTelemetry, ConfigChangeListener]:
    changes = ConfigChangeListener(zk)
    store = ZkConfigEntityStore(
        zk, asyncio.get_running_loop(), CLIENT_METRICS, "client metrics resource"
    )
    store.listen(changes)
    telemetry = ClientTelemetry(store, 1024, lambda: 0)
    telemetry.start()
    return telemetry, changes


async def until(predicate, timeout: float = 10.0, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.01)


def ops(*items):
    return lambda current: client_metrics_incremented(
        current, [Op(name=k, config_operation=op, value=v) for k, op, v in items]
    )


def test_resources_reach_every_broker(zks):
    async def main():
        zk1 = zks()
        (t1, c1), (t2, c2) = broker(zk1), broker(zks())
        try:
            await t1.alter("subs a", ops(("metrics", 0, "*"), ("interval.ms", 0, "1000")), False)
            assert t1.manager.subscriptions["subs a"].interval_ms == 1000  # at once
            await until(lambda: "subs a" in t2.manager.subscriptions, message="broker 2")
            assert t2.names() == ["subs a"]
            data = zk1.read_versioned("/config/client-metrics/subs%20a")
            assert data is not None
            assert json.loads(data[0]) == {
                "version": 1,
                "config": {"interval.ms": "1000", "metrics": "*"},
            }
            changes = zk1.list_children("/config/changes")
            last = zk1.read_versioned(f"/config/changes/{max(changes)}")
            assert json.loads(last[0]) == {
                "version": 2,
                "entity_path": "client-metrics/subs%20a",
            }
            # refused changes write nothing
            with pytest.raises(InvalidRequestError):
                await t2.alter("subs a", ops(("interval.ms", 0, "5")), False)
            with pytest.raises(InvalidConfigError):
                await t2.alter("subs a", ops(("match", 0, "nope=x")), False)
            await t2.alter("subs a", ops(("metrics", 0, "x.")), True)  # validate only
            assert t1.describe("subs a")["metrics"] == "*"
            # broker 2 appends; broker 1 sees it
            await t2.alter("subs a", ops(("metrics", 2, "y.")), False)
            await until(
                lambda: t1.describe("subs a").get("metrics") == "*,y.", message="append on 1"
            )
            # a node another tool wrote that does not parse is ignored where it is read
            zk1.set_or_create_entity(
                "/config/client-metrics/bad", b'{"version":1,"config":{"interval.ms":"x"}}'
            )
            zk1.create_sequential(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"client-metrics/bad"}',
            )
            await until(lambda: "bad" in t2.names(), message="the bad node read")
            assert "bad" not in t2.manager.subscriptions
            # deleting every key deletes the node, everywhere
            await t1.alter("subs a", ops(("metrics", 1, None), ("interval.ms", 1, None)), False)
            assert zk1.read_versioned("/config/client-metrics/subs%20a") is None
            await until(lambda: "subs a" not in t2.manager.subscriptions, message="deletion")
            # a broker started later reads what is kept
            t3, c3 = broker(zks())
            c3.close()
            assert t3.names() == ["bad"]
        finally:
            c1.close()
            c2.close()

    asyncio.run(main())


def group_configs(zk: KafkaZkClient) -> tuple[GroupConfigManager, ConfigChangeListener]:
    changes = ConfigChangeListener(zk)
    store = ZkConfigEntityStore(zk, asyncio.get_running_loop(), GROUPS, "group config")
    store.listen(changes)
    manager = GroupConfigManager(store, BrokerConfig())
    manager.start()
    return manager, changes


def test_group_configs_reach_every_broker(zks):
    """The same store, entity type ``groups``: a GROUP config set through one broker is in
    force on the other, and a node that breaks Kafka's group rules is ignored."""

    async def main():
        zk1 = zks()
        (g1, c1), (g2, c2) = group_configs(zk1), group_configs(zks())
        try:
            await g1.alter("g", lambda _: {"consumer.session.timeout.ms": "50000"}, False)
            assert g1.consumer_session_timeout_ms("g") == 50000
            await until(lambda: g2.consumer_session_timeout_ms("g") == 50000, message="broker 2")
            data = zk1.read_versioned("/config/groups/g")
            assert data is not None
            assert json.loads(data[0])["config"] == {"consumer.session.timeout.ms": "50000"}
            with pytest.raises(InvalidConfigError):
                await g2.alter("g", lambda _: {"consumer.session.timeout.ms": "1"}, False)
            zk1.set_or_create_entity(
                "/config/groups/bad", b'{"version":1,"config":{"consumer.session.timeout.ms":"1"}}'
            )
            zk1.create_sequential(
                "/config/changes/config_change_", b'{"version":2,"entity_path":"groups/bad"}'
            )
            await g2.alter("after", lambda _: {"share.auto.offset.reset": "earliest"}, False)
            await until(lambda: "after" in g1.configs, message="a later change on broker 1")
            assert "bad" not in g1.configs and g1.consumer_session_timeout_ms("bad") == 45000
            await g2.alter("g", lambda _: {}, False)
            await until(lambda: "g" not in g1.configs, message="deletion")
            assert zk1.read_versioned("/config/groups/g") is None
        finally:
            c1.close()
            c2.close()

    asyncio.run(main())
