"""KafkaZkClient against a real ZooKeeper: chroot and top-level paths, the cluster id,
broker registration and its epoch, controller election and fencing."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from broker_py.controller.controller_store import ControllerMovedError
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_broker_registration import BrokerIdInUseError
from broker_py.zk.zk_session import PERSISTENT_PATHS


@pytest.fixture
def clients(zk_connect):
    opened = []

    def new(**kwargs) -> KafkaZkClient:
        client = KafkaZkClient(
            zk_connect, session_timeout_ms=kwargs.pop("session_timeout_ms", 6000), **kwargs
        )
        client.start()
        opened.append(client)
        return client

    yield new
    for client in opened:
        client.close()


def expire_session(client: KafkaZkClient, zookeeper) -> None:
    """Ends ``client``'s session from the server's side, as a session timeout does: a
    second connection with the same session id and password closes it."""
    lost = threading.Event()
    reconnected = threading.Event()

    def watch(state):
        if state == "LOST":
            lost.set()
        elif state == "CONNECTED" and lost.is_set():
            reconnected.set()

    client._zk.add_listener(watch)
    session_id, password = client._zk.client_id
    thief = KazooClient(hosts=zookeeper.connect, client_id=(session_id, password))
    thief.start(10)
    thief.stop()
    thief.close()
    assert lost.wait(15) and reconnected.wait(15)


def test_start_makes_the_chroot_and_kafkas_paths_and_the_cluster_id_is_the_first_proposed(
    clients, zk_connect
):
    a, b = clients(), clients()
    for path in PERSISTENT_PATHS:
        assert a._zk.exists(path) is not None
    assert a.create_or_get_cluster_id("AAAAAAAAAAAAAAAAAAAAAA") == "AAAAAAAAAAAAAAAAAAAAAA"
    assert b.create_or_get_cluster_id("BBBBBBBBBBBBBBBBBBBBBB") == "AAAAAAAAAAAAAAAAAAAAAA"
    hosts, chroot = zk_connect.split("/", 1)
    raw = KazooClient(hosts=hosts)
    raw.start(10)
    try:
        assert raw.exists(f"/{chroot}/brokers/ids") is not None
    finally:
        raw.stop()
        raw.close()


def test_a_broker_id_has_one_live_owner_and_its_epoch_is_the_czxid(clients):
    a, b = clients(), clients()
    epoch = a.register_broker(1, b'{"version":5}')
    data, seen = b.get_broker(1)
    assert data == b'{"version":5}' and seen == epoch
    assert a.register_broker(1, b'{"version":5}') == epoch  # a retry by the same session
    with pytest.raises(BrokerIdInUseError, match="broker.id 1"):
        b.register_broker(1, b"{}")
    assert b.register_broker(2, b"{}") > epoch
    assert a.get_broker_ids() == [1, 2]
    a.close()  # its session ends: its node goes with it
    assert b.get_broker(1) is None
    c = clients()
    assert c.register_broker(1, b"{}") > epoch


def test_after_its_session_expires_a_broker_registers_again_with_a_new_epoch(clients, zookeeper):
    a = clients()
    first = a.register_broker(7, b"{}")
    expire_session(a, zookeeper)
    assert a.get_broker(7) is None  # the ephemeral node went with the session
    second = a.register_broker(7, b"{}")
    assert second > first


def test_one_controller_at_a_time_and_each_election_bumps_the_epoch(clients):
    a, b = clients(), clients()
    assert a.get_controller_id() is None and a.get_controller_epoch() is None
    won = a.register_controller_and_increment_epoch(1, 1_700_000_000_000)
    assert won.epoch == 1 and a.get_controller_id() == 1
    with pytest.raises(ControllerMovedError):
        b.register_controller_and_increment_epoch(2, 1_700_000_000_001)
    assert b.get_controller_epoch() == won
    a.resign_controller()
    again = b.register_controller_and_increment_epoch(2, 1_700_000_000_002)
    assert again.epoch == 2 and b.get_controller_id() == 2


def test_racing_brokers_elect_exactly_one_controller(clients):
    racers = [clients() for _ in range(4)]
    results: dict[int, object] = {}

    def race(i: int) -> None:
        try:
            results[i] = racers[i].register_controller_and_increment_epoch(i, 1_700_000_000_000)
        except ControllerMovedError as e:
            results[i] = e

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(racers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    winners = [i for i, r in results.items() if not isinstance(r, Exception)]
    assert len(results) == 4 and len(winners) == 1
    assert racers[0].get_controller_id() == winners[0]
    assert racers[0].get_controller_epoch().epoch == 1


def test_a_controller_whose_session_expired_is_fenced(clients, zookeeper):
    a, b = clients(), clients()
    old = a.register_controller_and_increment_epoch(1, 1_700_000_000_000)
    a.controller_transaction(old.zk_version, lambda t: t.create("/brokers/topics/kept", b"{}"))
    expire_session(a, zookeeper)  # /controller went with the session
    new = b.register_controller_and_increment_epoch(2, 1_700_000_000_001)
    assert new.epoch == old.epoch + 1
    with pytest.raises(ControllerMovedError):
        a.controller_transaction(
            old.zk_version, lambda t: t.create("/brokers/topics/zombie", b"{}")
        )
    assert b._zk.exists("/brokers/topics/zombie") is None
    assert b._zk.exists("/brokers/topics/kept") is not None
    b.controller_transaction(new.zk_version, lambda t: t.create("/brokers/topics/fresh", b"{}"))
    assert b._zk.exists("/brokers/topics/fresh") is not None
