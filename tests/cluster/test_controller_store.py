"""The ControllerStore contract, run against both stores: LocalControllerStore (in memory)
and ZkControllerStore (on the real ZooKeeper of ``zk_connect``); then what only one of
them has: the znodes' exact bytes, config change notifications and corrupt znodes in
ZooKeeper, the file of the local store.

A ``cluster`` gives stores that share one backend, each its own session (a broker of a
simulated cluster), and expires a store's session as ZooKeeper does."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_store import (
    BrokerIdInUseError,
    ControllerMovedError,
    PartitionEpochMismatch,
    StoreChange,
    StoreChangeKind,
    TopicExistsInStoreError,
)
from broker_py.controller.leader_and_isr import RECOVERING, LeaderIsrAndControllerEpoch
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.server.local_controller_store import LocalControllerStore
from broker_py.utils.metadata_file import MetadataFileError
from broker_py.utils.time import MockTime
from broker_py.zk import zk_data
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_controller_store import CHANGE_EXPIRATION_MS, ZkControllerStore
from logstore.protocol.errors import UnknownTopicOrPartitionError
from tests.support.waiting import wait_until

from .test_kafka_zk_client import expire_session

K = StoreChangeKind
TS = 1_700_000_000_000


def broker(broker_id: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(
        broker_id,
        [EndPoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id, "PLAINTEXT")],
        rack,
        {"metadata.version": (1, 21)},
        timestamp_ms=TS,
    )


def assignment(partitions: dict[int, list[int]], **kwargs) -> TopicAssignment:
    return TopicAssignment(kwargs.pop("topic_id", uuid.UUID(int=7 << 64)), partitions, **kwargs)


def state(
    leader: int, isr: list[int], leader_epoch: int = 0, partition_epoch: int = -1
) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(
        leader, leader_epoch, isr, 1, partition_epoch=partition_epoch
    )


class LocalCluster:
    def __init__(self) -> None:
        self.first: LocalControllerStore | None = None

    def new(self, broker_id: int) -> LocalControllerStore:
        if self.first is None:
            self.first = LocalControllerStore(broker_id)
            return self.first
        return self.first.session(broker_id)

    def expire(self, store: LocalControllerStore) -> None:
        store.expire_session()

    def close(self) -> None:
        pass


class ZkCluster:
    def __init__(self, zk_connect: str, zookeeper, **store_kwargs) -> None:
        self.zk_connect, self.zookeeper, self.store_kwargs = zk_connect, zookeeper, store_kwargs
        self.stores: list[ZkControllerStore] = []

    def new(self, broker_id: int) -> ZkControllerStore:
        client = KafkaZkClient(
            self.zk_connect, session_timeout_ms=6000, connection_timeout_ms=15_000
        )
        client.start()
        self.stores.append(ZkControllerStore(client, broker_id, **self.store_kwargs))
        return self.stores[-1]

    def expire(self, store: ZkControllerStore) -> None:
        expire_session(store.zk, self.zookeeper)

    def close(self) -> None:
        for store in self.stores:
            store.unwatch()
            store.zk.close()


@pytest.fixture(params=["local", "zookeeper"])
def cluster(request):
    if request.param == "local":
        made = LocalCluster()
    else:
        made = ZkCluster(
            request.getfixturevalue("zk_connect"), request.getfixturevalue("zookeeper")
        )
    yield made
    made.close()


@pytest.fixture
def store(cluster):
    return cluster.new(1)


@pytest.fixture
def controller(store):
    """``store`` as the elected controller: (store, its ControllerEpoch)."""
    return store, store.elect_controller(1, TS)


class Recorder:
    """A watch callback that keeps what it is told; waits are bounded."""

    def __init__(self) -> None:
        self.changes: list[StoreChange] = []
        self._cond = threading.Condition()

    def __call__(self, change: StoreChange) -> None:
        with self._cond:
            self.changes.append(change)
            self._cond.notify_all()

    def wait_for(self, *expected: StoreChange, timeout: float = 5.0) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: all(e in self.changes for e in expected), timeout)
        assert ok, f"waited for {expected}, got {self.changes}"

    def take(self) -> list[StoreChange]:
        with self._cond:
            out, self.changes = self.changes, []
            return out


# ---- the contract ----


def test_registered_brokers_are_live_and_each_registration_has_a_later_epoch(cluster, store):
    other = cluster.new(2)
    first = store.register_broker(broker(1, rack="r1"))
    second = other.register_broker(broker(2))
    assert second > first
    assert store.register_broker(broker(1, rack="r1")) == first  # a retry by the same session
    live = other.live_brokers()
    assert sorted(live) == [1, 2]
    assert live[1].info == broker(1, rack="r1") and live[1].epoch == first and live[1].id == 1
    assert live[2].info == broker(2) and live[2].epoch == second
    with pytest.raises(BrokerIdInUseError):
        other.register_broker(broker(1))
    cluster.expire(store)
    assert sorted(other.live_brokers()) == [2]
    again = store.register_broker(broker(1))
    assert again > second and store.live_brokers()[1].epoch == again


def test_registration_without_timestamp_gets_one(store):
    store.register_broker(BrokerInfo(1, [EndPoint("PLAINTEXT", "h", 1, "PLAINTEXT")]))
    assert store.live_brokers()[1].info.timestamp_ms is not None


def test_one_controller_at_a_time_and_each_election_bumps_the_epoch(cluster, store):
    other = cluster.new(2)
    assert store.controller_id() is None
    won = store.elect_controller(1, TS)
    assert won.epoch == 1 and other.controller_id() == 1
    with pytest.raises(ControllerMovedError):
        other.elect_controller(2, TS)
    other.resign_controller()  # not its to give up
    assert store.controller_id() == 1
    store.resign_controller()
    assert other.controller_id() is None
    again = other.elect_controller(2, TS)
    assert again.epoch == 2 and again.zk_version > won.zk_version and store.controller_id() == 2
    cluster.expire(other)  # the controller's session ends: /controller goes with it
    assert store.controller_id() is None
    assert store.elect_controller(1, TS).epoch == 3


def test_a_fenced_controller_changes_nothing(cluster, controller):
    store, old = controller
    tp = TopicPartition("t", 0)
    store.create_topic("t", assignment({0: [1, 2]}), {})
    assert store.controller_create_partition_states(old.zk_version, {tp: state(1, [1, 2])}) == {
        tp: 0
    }
    store.request_reassignment({tp: [2, 1]})
    store.request_preferred_election([tp])
    store.mark_topic_for_deletion("t")
    cluster.expire(store)
    new = cluster.new(2).elect_controller(2, TS)
    assert new.epoch == old.epoch + 1
    stale = old.zk_version
    writes = [
        lambda: store.controller_create_partition_states(
            stale, {TopicPartition("t", 1): state(1, [1])}
        ),
        lambda: store.controller_update_partition_states(
            stale, {tp: state(2, [2], 1, partition_epoch=0)}
        ),
        lambda: store.controller_set_topic_assignment(stale, "t", assignment({0: [2]})),
        lambda: store.controller_delete_topic(stale, "t"),
        lambda: store.controller_delete_reassignment_request(stale),
        lambda: store.controller_delete_preferred_election_request(stale),
    ]
    for write in writes:
        with pytest.raises(ControllerMovedError):
            write()
    assert store.partition_states([tp, TopicPartition("t", 1)]) == {
        tp: state(1, [1, 2], partition_epoch=0)
    }
    assert store.topic_assignments(["t"]) == {"t": assignment({0: [1, 2]})}
    assert store.topics_to_delete() == {"t"} and store.all_topics() == {"t"}
    assert store.reassignment_request() == {tp: [2, 1]} and store.preferred_election_request() == {
        tp
    }
    with pytest.raises(ControllerMovedError):
        store.controller_create_partition_states(
            new.zk_version + 1, {TopicPartition("t", 1): state(1, [1])}
        )


def test_partition_states_are_written_only_at_their_partition_epoch(controller):
    store, epoch = controller
    v = epoch.zk_version
    p0, p1, p2 = (TopicPartition("t", p) for p in range(3))
    store.create_topic("t", assignment({0: [1, 2], 1: [2, 1], 2: [1, 2]}), {})
    assert store.controller_create_partition_states(
        v, {p0: state(1, [1, 2]), p1: state(2, [2, 1])}
    ) == {p0: 0, p1: 0}
    assert store.controller_create_partition_states(v, {p0: state(2, [2]), p2: state(1, [1])}) == {
        p0: PartitionEpochMismatch(0),
        p2: 0,
    }
    assert store.partition_states([p0, p1, TopicPartition("t", 9)]) == {
        p0: state(1, [1, 2], partition_epoch=0),
        p1: state(2, [2, 1], partition_epoch=0),
    }
    assert store.controller_update_partition_states(
        v, {p0: state(2, [2], 1, partition_epoch=0)}
    ) == {p0: 1}
    stale = store.controller_update_partition_states(
        v, {p0: state(1, [1], 1, partition_epoch=0), p1: state(1, [1], 1, partition_epoch=0)}
    )
    assert stale == {p0: PartitionEpochMismatch(1), p1: 1}
    assert store.partition_states([p0, p1]) == {
        p0: state(2, [2], 1, partition_epoch=1),
        p1: state(1, [1], 1, partition_epoch=1),
    }
    missing = TopicPartition("t", 7)
    assert store.controller_update_partition_states(
        v, {missing: state(1, [1], partition_epoch=0)}
    ) == {missing: PartitionEpochMismatch(-1)}
    gone = TopicPartition("nope", 0)
    assert store.controller_create_partition_states(v, {gone: state(1, [1])}) == {
        gone: PartitionEpochMismatch(-1)
    }
    assert store.partition_states([gone, missing]) == {}


def test_a_created_topic_has_its_assignment_and_configs_and_names_may_not_collide(store):
    topic_id = uuid.uuid4()
    a = assignment({0: [1, 2], 1: [2, 3]}, topic_id=topic_id)
    store.create_topic("a.b", a, {"cleanup.policy": "compact", "retention.ms": "1000"})
    assert store.all_topics() == {"a.b"}
    assert store.topic_assignments(["a.b", "nope"]) == {"a.b": a}
    assert store.topic_configs("a.b") == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert store.topic_configs("nope") == {}
    for name in ("a.b", "a_b"):
        with pytest.raises(TopicExistsInStoreError):
            store.create_topic(name, assignment({0: [1]}), {})
    store.create_topic("plain", assignment({0: [1]}), {})
    with pytest.raises(TopicExistsInStoreError):
        store.create_topic("plain", assignment({0: [2]}), {"retention.ms": "1"})
    assert store.topic_configs("plain") == {} and store.topic_assignments(["plain"])[
        "plain"
    ].partitions == {0: [1]}
    store.create_topic("a-b", assignment({0: [1]}, topic_id=None), {})
    assert store.all_topics() == {"a.b", "plain", "a-b"}
    assert store.topic_assignments(["a-b"])["a-b"].topic_id is None


def test_topic_assignment_is_replaced_by_admins_and_by_the_controller(controller):
    store, epoch = controller
    store.create_topic("t", assignment({0: [1, 2]}), {})
    moving = assignment({0: [1, 2, 3], 1: [3, 1]}, adding={0: [3]}, removing={0: [2]})
    store.set_topic_assignment("t", moving)
    assert store.topic_assignments(["t"]) == {"t": moving}
    final = assignment({0: [1, 3], 1: [3, 1]})
    store.controller_set_topic_assignment(epoch.zk_version, "t", final)
    assert store.topic_assignments(["t"]) == {"t": final}
    with pytest.raises(UnknownTopicOrPartitionError):
        store.set_topic_assignment("nope", final)
    with pytest.raises(UnknownTopicOrPartitionError):
        store.controller_set_topic_assignment(epoch.zk_version, "nope", final)
    assert store.all_topics() == {"t"}


def test_topic_configs_are_replaced_whole(store):
    store.create_topic("t", assignment({0: [1]}), {"retention.ms": "1", "segment.bytes": "1024"})
    store.set_topic_configs("t", {"retention.ms": "2"})
    assert store.topic_configs("t") == {"retention.ms": "2"}
    with pytest.raises(UnknownTopicOrPartitionError):
        store.set_topic_configs("nope", {"retention.ms": "2"})


def test_a_topic_marked_for_deletion_is_deleted_whole_by_the_controller(controller):
    store, epoch = controller
    v = epoch.zk_version
    store.create_topic("t", assignment({0: [1], 1: [1]}), {"retention.ms": "1"})
    store.create_topic("u", assignment({0: [1]}), {})
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    store.controller_create_partition_states(v, {tp: state(1, [1]) for tp in tps})
    store.controller_update_partition_states(v, {tps[0]: state(1, [1], 1, partition_epoch=0)})
    store.mark_topic_for_deletion("t")
    store.mark_topic_for_deletion("t")  # again: no error
    assert store.topics_to_delete() == {"t"}
    with pytest.raises(UnknownTopicOrPartitionError):
        store.mark_topic_for_deletion("nope")
    store.controller_delete_topic(v, "t")
    assert store.all_topics() == {"u"} and store.topics_to_delete() == set()
    assert (
        store.topic_assignments(["t"]) == {}
        and store.partition_states(tps) == {}
        and store.topic_configs("t") == {}
    )
    store.controller_delete_topic(v, "t")  # already gone: nothing to do
    store.create_topic("t", assignment({0: [1]}), {})
    assert store.controller_create_partition_states(v, {tps[0]: state(1, [1])}) == {tps[0]: 0}


def test_reassignment_and_preferred_election_requests_are_written_and_cleared(controller):
    store, epoch = controller
    assert store.reassignment_request() == {} and store.preferred_election_request() == set()
    a0, b1 = TopicPartition("a", 0), TopicPartition("b", 1)
    store.request_reassignment({a0: [3, 1], b1: [2]})
    assert store.reassignment_request() == {a0: [3, 1], b1: [2]}
    store.request_reassignment({b1: [1]})  # overwritten
    assert store.reassignment_request() == {b1: [1]}
    store.request_preferred_election([a0, b1])
    assert store.preferred_election_request() == {a0, b1}
    store.controller_delete_reassignment_request(epoch.zk_version)
    store.controller_delete_preferred_election_request(epoch.zk_version)
    assert store.reassignment_request() == {} and store.preferred_election_request() == set()
    store.controller_delete_reassignment_request(epoch.zk_version)  # none: nothing to do


def test_watch_reports_each_kind_of_change_but_not_the_state_at_registration(cluster, store):
    tp = TopicPartition("t", 0)
    store.create_topic("t", assignment({0: [1]}), {})
    store.request_reassignment({tp: [1]})
    store.register_broker(broker(1))
    seen = Recorder()
    store.watch(seen)
    assert seen.changes == []
    store.request_preferred_election([tp])
    seen.wait_for(StoreChange(K.PREFERRED_ELECTION))
    assert seen.take() == [StoreChange(K.PREFERRED_ELECTION)]

    other = cluster.new(2)
    other.register_broker(broker(2))
    seen.wait_for(StoreChange(K.BROKERS))
    other.create_topic("u", assignment({0: [2]}), {})
    seen.wait_for(StoreChange(K.TOPICS))
    other.mark_topic_for_deletion("u")
    seen.wait_for(StoreChange(K.TOPIC_DELETIONS))
    other.request_reassignment({tp: [2]})
    seen.wait_for(StoreChange(K.REASSIGNMENT))
    other.set_topic_configs("t", {"retention.ms": "5"})
    seen.wait_for(StoreChange(K.TOPIC_CONFIG, "t"))
    epoch = other.elect_controller(2, TS)
    seen.wait_for(StoreChange(K.CONTROLLER))
    store.watch_topic("t")
    other.set_topic_assignment("t", assignment({0: [1], 1: [2]}))
    seen.wait_for(StoreChange(K.PARTITION_MODIFICATIONS, "t"))
    seen.take()

    other.resign_controller()
    seen.wait_for(StoreChange(K.CONTROLLER))
    seen.take()
    epoch = store.elect_controller(1, TS)
    seen.wait_for(StoreChange(K.CONTROLLER))
    store.controller_delete_topic(epoch.zk_version, "u")
    seen.wait_for(StoreChange(K.TOPICS), StoreChange(K.TOPIC_DELETIONS))
    store.controller_delete_reassignment_request(
        epoch.zk_version
    )  # a request's removal is not reported
    store.request_preferred_election([tp])
    seen.wait_for(StoreChange(K.PREFERRED_ELECTION))
    assert StoreChange(K.REASSIGNMENT) not in seen.take()


def test_watch_topic_reports_only_its_topic_until_the_topic_is_deleted(controller):
    store, epoch = controller
    store.create_topic("t", assignment({0: [1]}), {})
    store.create_topic("u", assignment({0: [1]}), {})
    seen = Recorder()
    store.watch(seen)
    store.watch_topic("t")
    store.watch_topic("t")
    store.watch_topic("nope")
    store.set_topic_assignment("u", assignment({0: [1], 1: [1]}))
    store.controller_set_topic_assignment(epoch.zk_version, "t", assignment({0: [1], 1: [1]}))
    seen.wait_for(StoreChange(K.PARTITION_MODIFICATIONS, "t"))
    store.controller_delete_topic(epoch.zk_version, "t")
    seen.wait_for(StoreChange(K.TOPICS))
    store.create_topic("t", assignment({0: [1]}), {})
    store.set_topic_assignment("t", assignment({0: [1], 1: [1]}))
    store.request_preferred_election([])  # a marker: changes before it have been reported
    seen.wait_for(StoreChange(K.PREFERRED_ELECTION))
    partition_changes = [c for c in seen.take() if c.kind == K.PARTITION_MODIFICATIONS]
    assert partition_changes == [StoreChange(K.PARTITION_MODIFICATIONS, "t")]


def test_a_session_expiry_is_reported_and_the_watches_go_on(cluster, store):
    store.register_broker(broker(1))
    store.create_topic("t", assignment({0: [1]}), {})
    seen = Recorder()
    store.watch(seen)
    cluster.expire(store)
    seen.wait_for(StoreChange(K.SESSION_EXPIRED))
    assert store.live_brokers() == {}
    other = cluster.new(2)
    other.create_topic("u", assignment({0: [2]}), {})
    other.set_topic_configs("t", {"retention.ms": "9"})
    other.register_broker(broker(2))
    seen.wait_for(StoreChange(K.TOPICS), StoreChange(K.TOPIC_CONFIG, "t"), StoreChange(K.BROKERS))
    assert store.register_broker(broker(1)) > 0


def test_after_unwatch_nothing_is_reported(store):
    seen = Recorder()
    store.watch(seen)
    store.unwatch()
    store.create_topic("t", assignment({0: [1]}), {})
    time.sleep(0.2)
    assert seen.changes == []
    with pytest.raises(RuntimeError):
        store.watch_topic("t")


# ---- ZooKeeper only ----


@pytest.fixture
def zk_cluster(zk_connect, zookeeper):
    made = ZkCluster(zk_connect, zookeeper)
    yield made
    made.close()


@pytest.fixture
def raw(zk_connect, zookeeper):
    """A plain kazoo client on the test's chroot."""
    root = KazooClient(hosts=zookeeper.connect)
    root.start(10)
    root.ensure_path(zk_connect[len(zookeeper.connect) :])
    root.stop()
    root.close()
    client = KazooClient(hosts=zk_connect)
    client.start(10)
    yield client
    client.stop()
    client.close()


def test_znodes_hold_exactly_kafkas_encodings(zk_cluster, raw):
    store = zk_cluster.new(1)
    info = broker(1, rack="r")
    epoch_of_broker = store.register_broker(info)
    data, stat = raw.get("/brokers/ids/1")
    assert (
        data == zk_data.BrokerIdZNode.encode(info)
        and stat.czxid == epoch_of_broker
        and stat.ephemeralOwner != 0
    )
    epoch = store.elect_controller(1, TS)
    assert raw.get("/controller")[0] == zk_data.ControllerZNode.encode(1, TS)
    data, stat = raw.get("/controller_epoch")
    assert data == b"1" and stat.version == epoch.zk_version
    a = assignment({0: [1, 2], 1: [2, 1]}, topic_id=zk_data.random_uuid())
    configs = {"retention.ms": "1000", "cleanup.policy": "compact"}
    store.create_topic("t", a, configs)
    assert raw.get("/brokers/topics/t")[0] == zk_data.TopicZNode.encode(a)
    assert raw.get("/config/topics/t")[0] == zk_data.ConfigEntityZNode.encode(configs)
    tp = TopicPartition("t", 1)
    recovering = LeaderIsrAndControllerEpoch(2, 3, [2], 1, RECOVERING)
    store.controller_create_partition_states(epoch.zk_version, {tp: recovering})
    data, stat = raw.get("/brokers/topics/t/partitions/1/state")
    assert data == zk_data.TopicPartitionStateZNode.encode(recovering) and stat.version == 0
    store.controller_update_partition_states(
        epoch.zk_version, {tp: state(2, [2, 1], 4, partition_epoch=0)}
    )
    data, stat = raw.get("/brokers/topics/t/partitions/1/state")
    assert (
        data == zk_data.TopicPartitionStateZNode.encode(state(2, [2, 1], 4)) and stat.version == 1
    )
    store.set_topic_configs("t", {"retention.ms": "5"})
    (change,) = raw.get_children("/config/changes")
    assert change.startswith("config_change_")
    assert raw.get(f"/config/changes/{change}")[0] == b'{"version":2,"entity_path":"topics/t"}'
    store.mark_topic_for_deletion("t")
    assert raw.get("/admin/delete_topics/t")[0] == b""
    store.request_reassignment({tp: [1, 2]})
    assert raw.get("/admin/reassign_partitions")[0] == zk_data.ReassignPartitionsZNode.encode(
        {tp: [1, 2]}
    )
    store.request_preferred_election([tp])
    assert raw.get("/admin/preferred_replica_election")[
        0
    ] == zk_data.PreferredReplicaElectionZNode.encode([tp])
    raw.create("/brokers/topics/t/partitions/5")  # a partition without its state
    raw.create("/brokers/topics/t/partitions/1/extra/deeper", makepath=True)  # and one with more
    store.controller_delete_topic(epoch.zk_version, "t")
    for path in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
        assert raw.exists(path) is None
    assert raw.get_children("/brokers/topics") == []


def test_a_registration_that_does_not_decode_is_left_out(zk_cluster, raw, caplog):
    store = zk_cluster.new(1)
    store.register_broker(broker(1))
    raw.create("/brokers/ids/9", b"{not json", ephemeral=True)
    raw.create("/brokers/ids/8", b'{"version":5}', ephemeral=True)
    raw.create("/brokers/topics/bad", b"[]")
    assert sorted(store.live_brokers()) == [1]
    assert "broker 9" in caplog.text and "broker 8" in caplog.text
    store.create_topic("good", assignment({0: [1]}), {})
    assert store.topic_assignments(["bad", "good"]).keys() == {"good"}
    raw.create("/controller", b"garbage", ephemeral=True)
    assert store.controller_id() is None
    with pytest.raises(ControllerMovedError):
        store.elect_controller(1, TS)


def test_only_new_topic_config_notifications_are_reported(zk_cluster, raw):
    store, admin = zk_cluster.new(1), zk_cluster.new(2)
    for topic in ("t", "u"):
        admin.create_topic(topic, assignment({0: [1]}), {})
    admin.set_topic_configs("t", {"retention.ms": "1"})  # before watching: counts as processed
    seen = Recorder()
    store.watch(seen)
    raw.create(
        "/config/changes/config_change_",
        b'{"version":2,"entity_path":"brokers/<default>"}',
        sequence=True,
    )
    raw.create("/config/changes/config_change_", b"corrupt", sequence=True)
    admin.set_topic_configs("u", {"retention.ms": "2"})
    admin.set_topic_configs("t", {"retention.ms": "3"})
    seen.wait_for(StoreChange(K.TOPIC_CONFIG, "u"), StoreChange(K.TOPIC_CONFIG, "t"))
    assert seen.take() == [StoreChange(K.TOPIC_CONFIG, "u"), StoreChange(K.TOPIC_CONFIG, "t")]
    assert len(raw.get_children("/config/changes")) == 5  # none is old enough to purge


def test_notifications_older_than_15_minutes_are_purged(zk_connect, zookeeper, raw):
    later = MockTime(wall_ms=int(time.time() * 1000) + CHANGE_EXPIRATION_MS + 60_000)
    cluster = ZkCluster(zk_connect, zookeeper, time=later)
    try:
        store = cluster.new(1)
        store.create_topic("t", assignment({0: [1]}), {})
        store.set_topic_configs("t", {"retention.ms": "1"})
        store.set_topic_configs("t", {"retention.ms": "2"})
        seen = Recorder()
        store.watch(seen)  # purges what is there when it starts
        changes_purged = "/config/changes emptied"
        wait_until(lambda: raw.get_children("/config/changes") == [], 5.0, 0.02, changes_purged)
        store.set_topic_configs("t", {"retention.ms": "3"})
        seen.wait_for(StoreChange(K.TOPIC_CONFIG, "t"))
        wait_until(lambda: raw.get_children("/config/changes") == [], 5.0, 0.02, changes_purged)
    finally:
        cluster.close()


def test_partition_epochs_are_the_state_nodes_zk_versions(zk_cluster, raw):
    store = zk_cluster.new(1)
    epoch = store.elect_controller(1, TS)
    tp = TopicPartition("t", 0)
    store.create_topic("t", assignment({0: [1]}), {})
    store.controller_create_partition_states(epoch.zk_version, {tp: state(1, [1])})
    raw.set(
        "/brokers/topics/t/partitions/0/state",
        zk_data.TopicPartitionStateZNode.encode(state(1, [1], 5)),
    )
    assert store.partition_states([tp])[tp].partition_epoch == 1
    assert store.controller_update_partition_states(
        epoch.zk_version, {tp: state(1, [1], 6, partition_epoch=0)}
    ) == {tp: PartitionEpochMismatch(1)}
    raw.set("/brokers/topics/t/partitions/0/state", b"{broken")
    assert store.partition_states([tp]) == {}


def test_many_partitions_are_written_in_pipelined_multis(zk_cluster):
    store = zk_cluster.new(1)
    epoch = store.elect_controller(1, TS)
    store.create_topic("big", assignment({p: [1] for p in range(1500)}), {})
    tps = [TopicPartition("big", p) for p in range(1500)]
    started = time.monotonic()
    assert set(
        store.controller_create_partition_states(
            epoch.zk_version, {tp: state(1, [1]) for tp in tps}
        ).values()
    ) == {0}
    updated = store.controller_update_partition_states(
        epoch.zk_version, {tp: state(1, [1], 1, partition_epoch=0) for tp in tps}
    )
    assert set(updated.values()) == {1}
    assert len(store.partition_states(tps)) == 1500
    store.controller_delete_topic(epoch.zk_version, "big")
    assert store.all_topics() == set()
    assert time.monotonic() - started < 10


# ---- local only ----


def test_the_local_store_keeps_everything_but_ephemerals_in_its_file(tmp_path):
    path = str(tmp_path / "meta" / "controller.json")
    store = LocalControllerStore(1, path)
    first_epoch = store.register_broker(broker(1))
    epoch = store.elect_controller(1, TS)
    a = assignment({0: [1, 2], 1: [2, 1]}, adding={1: [1]}, removing={1: [3]})
    store.create_topic("t", a, {"retention.ms": "7"})
    store.create_topic("u", assignment({0: [1]}, topic_id=None), {})
    tp = TopicPartition("t", 0)
    store.controller_create_partition_states(
        epoch.zk_version, {tp: LeaderIsrAndControllerEpoch(1, 2, [1, 2], 1, 1)}
    )
    store.controller_update_partition_states(
        epoch.zk_version, {tp: state(2, [2, 1], 3, partition_epoch=0)}
    )
    store.mark_topic_for_deletion("u")
    store.request_reassignment({tp: [2, 1]})
    store.request_preferred_election([tp])
    assert json.loads(open(path).read())["version"] == 1

    def written_whole(s: LocalControllerStore) -> bool:
        """The file, put together from fragments per topic, is the document encoded anew."""
        doc = s._b.data.to_doc()
        return open(path).read() == json.dumps(doc, separators=(",", ":"), sort_keys=True)

    assert written_whole(store)

    again = LocalControllerStore(1, path)
    assert again.live_brokers() == {} and again.controller_id() is None
    assert again.all_topics() == {"t", "u"}
    assert again.topic_assignments(["t", "u"]) == store.topic_assignments(["t", "u"])
    assert again.partition_states([tp]) == {tp: state(2, [2, 1], 3, partition_epoch=1)}
    assert again.topic_configs("t") == {"retention.ms": "7"} and again.topics_to_delete() == {"u"}
    assert again.reassignment_request() == {tp: [2, 1]} and again.preferred_election_request() == {
        tp
    }
    assert again.register_broker(broker(1)) > first_epoch
    # The first write reuses the fragments the file held: the same file as encoding anew.
    assert written_whole(again)
    assert again.elect_controller(1, TS) == type(epoch)(2, 2)
    with pytest.raises(ControllerMovedError):
        again.controller_update_partition_states(
            epoch.zk_version, {tp: state(2, [2], 4, partition_epoch=1)}
        )
    again.controller_update_partition_states(2, {tp: state(1, [1], 4, partition_epoch=1)})
    again.controller_delete_topic(2, "u")
    assert written_whole(again) and len(again._b.fragments) == 2


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{not json", "not valid JSON"),
        ("[]", "not an object"),
        ('{"version": 1}', "lacks the key"),
        (
            '{"version": 1, "zxid": 1, "controller_epoch": null,'
            ' "topics": {"t": {"version": 3, "partitions": {"x": [1]}}}, "partition_states": {},'
            ' "configs": {}, "topic_deletions": [], "reassign_partitions": null,'
            ' "preferred_replica_election": null}',
            "malformed",
        ),
        (
            '{"version": 1, "zxid": "1", "controller_epoch": null, "topics": {},'
            ' "partition_states": {}, "configs": {}, "topic_deletions": [],'
            ' "reassign_partitions": null, "preferred_replica_election": null}',
            "malformed",
        ),
    ],
)
def test_a_corrupt_local_file_is_refused_naming_it(tmp_path, text, reason):
    path = tmp_path / "controller.json"
    path.write_text(text)
    with pytest.raises(MetadataFileError, match=reason) as caught:
        LocalControllerStore(1, str(path))
    assert str(path) in str(caught.value)


def test_the_local_store_simulates_other_brokers_and_their_expiry():
    store = LocalControllerStore(1)
    seen = Recorder()
    store.watch(seen)
    own = store.register_broker(broker(1))
    two = store.add_broker(broker(2))
    assert two > own and sorted(store.live_brokers()) == [1, 2]
    with pytest.raises(BrokerIdInUseError):
        store.add_broker(broker(2))
    assert seen.take() == [StoreChange(K.BROKERS)] * 2
    store.expire_broker(2)
    assert sorted(store.live_brokers()) == [1] and seen.take() == [StoreChange(K.BROKERS)]
    store.elect_controller(1, TS)
    seen.take()
    store.expire_broker(1)  # this store's own session
    assert seen.take() == [
        StoreChange(K.SESSION_EXPIRED),
        StoreChange(K.BROKERS),
        StoreChange(K.CONTROLLER),
    ]
    assert store.live_brokers() == {} and store.controller_id() is None
    store.expire_broker(5)  # not registered: nothing
    assert seen.changes == []
