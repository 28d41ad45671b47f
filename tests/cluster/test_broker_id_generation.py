"""Broker ids as Kafka's ZooKeeper mode gives them: a cluster broker without
``broker.id`` takes the id its log dirs' ``meta.properties`` name, or generates one,
``reserved.broker.max.id`` plus the version it writes to ``/brokers/seqid``."""

from __future__ import annotations

import os

import pytest
from kazoo.client import KazooClient

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.server.meta_properties import read_properties, resolve_broker_id, stored_broker_id
from broker_py.zk.kafka_zk_client import KafkaZkClient
from tests.integration.conftest import BrokerProcess


def test_resolution_order() -> None:
    never = None
    # A given id wins, and the log dirs must not contradict it.
    assert resolve_broker_id(7, True, None, never) == 7
    assert resolve_broker_id(7, True, 7, never) == 7
    with pytest.raises(ConfigError, match="belong to broker.id 3"):
        resolve_broker_id(7, True, 3, never)
    # Without one: the stored id, then a generated one.
    assert resolve_broker_id(-1, False, 1004, lambda: 1009) == 1004
    assert resolve_broker_id(-1, False, None, lambda: 1009) == 1009
    # Without ZooKeeper (or generation): the configured default, unless it is -1.
    assert resolve_broker_id(0, False, None, None) == 0
    with pytest.raises(ConfigError, match="broker.id.generation.enable"):
        resolve_broker_id(-1, False, None, None)


def test_stored_ids_of_the_log_dirs(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert stored_broker_id([str(a), str(b)]) is None
    (a / "meta.properties").write_text("version=0\nbroker.id=1002\ncluster.id=x\n")
    assert stored_broker_id([str(a), str(b)]) == 1002
    (b / "meta.properties").write_text("version=0\nbroker.id=1003\ncluster.id=x\n")
    with pytest.raises(ConfigError, match=r"broker ids \[1002, 1003\]"):
        stored_broker_id([str(a), str(b)])


def test_a_given_id_above_the_reserved_range_is_refused() -> None:
    with pytest.raises(ConfigError, match="reserved.broker.max.id"):
        BrokerConfig({"broker.id": "1001"})
    assert (
        BrokerConfig({"broker.id": "1001", "broker.id.generation.enable": "false"}).broker_id
        == 1001
    )
    assert BrokerConfig({"broker.id": "1001", "reserved.broker.max.id": "2000"}).broker_id == 1001


def test_the_sequence_never_repeats(zk_connect) -> None:
    clients = [KafkaZkClient(zk_connect, 10_000) for _ in range(2)]
    for c in clients:
        c.start()
    try:
        got = [clients[i % 2].generate_broker_sequence_id() for i in range(6)]
    finally:
        for c in clients:
            c.close()
    assert got == list(range(1, 7))


def _registered(zk_connect: str) -> list[int]:
    zk = KazooClient(hosts=zk_connect)
    zk.start()
    try:
        return sorted(int(i) for i in zk.get_children("/brokers/ids"))
    finally:
        zk.stop()
        zk.close()


def test_brokers_without_broker_id_generate_ids_and_keep_them(tmp_path, zk_connect) -> None:
    settings = {
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
        "offsets.topic.replication.factor": "1",
    }
    brokers = [BrokerProcess(str(tmp_path / f"b{i}"), settings) for i in range(2)]
    for b in brokers:
        os.makedirs(b.workdir)
    try:
        for b in brokers:
            b.start()
        ids = [
            int(read_properties(os.path.join(b.data_dir, "meta.properties"))["broker.id"])
            for b in brokers
        ]
        assert ids == [1001, 1002]
        assert _registered(zk_connect) == [1001, 1002]
        # A restart takes the id from meta.properties: no new id is generated.
        brokers[0].restart()
        assert (
            int(read_properties(os.path.join(brokers[0].data_dir, "meta.properties"))["broker.id"])
            == 1001
        )
        assert _registered(zk_connect) == [1001, 1002]
        assert brokers[0].log_text().count("generated broker.id") == 1  # the first start's
        # A given broker.id that the log dirs contradict stops startup, naming the key.
        assert brokers[1].stop() == 0
        brokers[1].overrides["broker.id"] = "5"
        with pytest.raises(RuntimeError, match="broker did not start"):
            brokers[1].start(timeout=20)
        assert "broker.id" in brokers[1].log_text() and "1002" in brokers[1].log_text()
    finally:
        for b in brokers:
            b.kill()
