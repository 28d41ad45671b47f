"""Share-partition state in ``__share_group_state`` survives the death of its share
coordinator in a cluster of three real brokers and a real ZooKeeper.

A share-partition's state is initialized and written several times (updates and, every
two updates, a snapshot) through its coordinator, the leader of the key's
``__share_group_state`` partition (replication factor 3, min ISR 2), which FindCoordinator
(key type SHARE) names. That broker is SIGKILLed. A share-partition leader's persister
(asking the metadata for the coordinator, retrying while it names the dead broker) reads,
as a new share-partition leader with a higher leader epoch, the same state epoch, start
offset and batches from the new leader, which loaded the partition; FindCoordinator
names it, the summary agrees, and the old share-partition leader's writes are fenced
(FENCED_LEADER_EPOCH).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from broker_py.common.java_string_hash import partition_for
from broker_py.coordinator.share.share_coordinator_records import (
    SharePartitionKey,
    coordinator_key,
)
from broker_py.network.network_client import NetworkClient
from broker_py.server.inter_broker_clients import InterBrokerClients
from broker_py.server.share_state_persister import ShareStatePersister
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.share_state import (
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.support.waiting import wait_until

STATE_PARTITIONS = 3
OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
}
TOPIC = "ss-data"
GROUP = "ss-group"


@pytest.fixture
def cluster(request, tmp_path):
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=4000, overrides=OVERRIDES)
    with c, logs_on_failure(request, c, 80):
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        yield c


def _send(c: Cluster, broker: int, api: ApiKey, body: Any, version: int) -> Any:
    async def go() -> Any:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "share-state-test")
        try:
            return await client.send(api, body, 10000, version=version)
        finally:
            await client.close()

    return asyncio.run(go())


def _find(c: Cluster, via: int, key: str) -> int | None:
    """The share coordinator of ``key`` as broker ``via`` names it (None while there is
    none yet)."""
    try:
        body = FindCoordinatorRequest(key_type=2, coordinator_keys=[key])
        (coordinator,) = _send(c, via, ApiKey.FIND_COORDINATOR, body, 6).coordinators
    except Exception:  # noqa: BLE001 - a broker that is not answering yet; ask again
        return None
    return coordinator.node_id if coordinator.error_code == 0 else None


def _only(response: Any) -> Any:
    (result,) = response.results
    (partition,) = result.partitions
    return partition


def _write(c, broker, tid, leader_epoch, start_offset, batches) -> Any:
    R = WriteShareGroupStateRequest
    body = R(
        group_id=GROUP,
        topics=[
            R.WriteStateData(
                topic_id=tid,
                partitions=[
                    R.PartitionData(
                        partition=0,
                        state_epoch=0,
                        leader_epoch=leader_epoch,
                        start_offset=start_offset,
                        state_batches=[
                            R.StateBatch(
                                first_offset=f, last_offset=last, delivery_state=s, delivery_count=n
                            )
                            for f, last, s, n in batches
                        ],
                    )
                ],
            )
        ],
    )
    return _only(_send(c, broker, ApiKey.WRITE_SHARE_GROUP_STATE, body, 0))


def _read(c, broker, tid, leader_epoch) -> Any:
    R = ReadShareGroupStateRequest
    body = R(
        group_id=GROUP,
        topics=[
            R.ReadStateData(
                topic_id=tid, partitions=[R.PartitionData(partition=0, leader_epoch=leader_epoch)]
            )
        ],
    )
    return _only(_send(c, broker, ApiKey.READ_SHARE_GROUP_STATE, body, 0))


def _state(p: Any) -> tuple[int, int, int, list[tuple[int, int, int, int]]]:
    batches = [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
    ]
    return (p.error_code, p.state_epoch, p.start_offset, batches)


def test_state_read_back_from_the_new_coordinator(cluster):
    c = cluster
    c.create_topic(TOPIC, partitions=1, replication_factor=3)
    meta = _send(
        c,
        1,
        ApiKey.METADATA,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
            allow_auto_topic_creation=False,
        ),
        12,
    )
    tid = meta.topics[0].topic_id
    key = coordinator_key(GROUP, tid, 0)
    # The first FindCoordinator creates __share_group_state (replication factor 3).
    coordinator = wait_until(lambda: _find(c, 1, key), 60, 0.3, "a share coordinator")
    state_partition = partition_for(key, STATE_PARTITIONS)
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    described = admin.list_topics(timeout=5).topics["__share_group_state"]
    assert len(described.partitions) == STATE_PARTITIONS
    assert described.partitions[state_partition].leader == coordinator
    assert len(described.partitions[state_partition].replicas) == 3

    R = InitializeShareGroupStateRequest
    init = R(
        group_id=GROUP,
        topics=[
            R.InitializeStateData(
                topic_id=tid,
                partitions=[R.PartitionData(partition=0, state_epoch=0, start_offset=0)],
            )
        ],
    )
    assert (
        _only(_send(c, coordinator, ApiKey.INITIALIZE_SHARE_GROUP_STATE, init, 0)).error_code == 0
    )
    assert _read(c, coordinator, tid, 1).error_code == 0
    # Six writes by share-partition leader epoch 1: updates and snapshots in the log.
    for i in range(6):
        batches = [(i * 10, i * 10 + 4, 2, 1), (i * 10 + 5, i * 10 + 9, 0, 1 + i % 2)]
        start = -1 if i < 4 else 20
        assert _write(c, coordinator, tid, 1, start, batches).error_code == 0
    expected = _state(_read(c, coordinator, tid, 1))
    assert expected[2] == 20 and expected[3][0][0] == 20 and expected[3][-1][1] == 59

    c.broker(coordinator).kill()
    alive = {1, 2, 3} - {coordinator}
    via = min(alive)

    # A share-partition leader's persister, asking the metadata for the coordinator: it
    # names the dead broker until the controller moves the leadership, and the persister
    # retries until the new coordinator has loaded the state.
    def leader_of(k: Any) -> int | None:
        try:
            topics = admin.list_topics(timeout=5).topics
        except Exception:  # noqa: BLE001 - no metadata this time: the persister asks again
            return None
        return topics["__share_group_state"].partitions[state_partition].leader

    async def persisted_read() -> Any:
        persister = ShareStatePersister(
            -1,
            lambda: None,
            leader_of,
            InterBrokerClients(
                "share-state-test",
                lambda b: ("127.0.0.1", int(c.bootstrap(b).split(":")[1])),
                NetworkClient,
            ),
            timeout_ms=60000,
        )
        try:
            return await persister.read(SharePartitionKey(GROUP, tid, 0), 2)
        finally:
            await persister.close()

    read_back = asyncio.run(persisted_read())  # a new share-partition leader, epoch 2
    assert (read_back.error, read_back.state_epoch, read_back.start_offset) == (
        ErrorCode.NONE,
        expected[1],
        expected[2],
    )
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in read_back.state_batches
    ] == expected[3]

    def moved() -> int | None:
        named = _find(c, via, key)
        return named if named in alive else None

    new = wait_until(moved, 60, 0.3, "a new share coordinator")

    assert _state(_read(c, new, tid, 2)) == expected
    R2 = ReadShareGroupStateSummaryRequest
    body = R2(
        group_id=GROUP,
        topics=[
            R2.ReadStateSummaryData(
                topic_id=tid, partitions=[R2.PartitionData(partition=0, leader_epoch=-1)]
            )
        ],
    )
    s = _only(_send(c, new, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, body, 0))
    assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset) == (0, 0, 2, 20)
    # The old share-partition leader (epoch 1) is fenced; the new one writes.
    fenced = _write(c, new, tid, 1, -1, [(60, 60, 2, 1)])
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert _write(c, new, tid, 2, -1, [(60, 60, 2, 1)]).error_code == 0
    # Another broker than the coordinator answers NOT_COORDINATOR.
    other = next(b for b in alive if b != new)
    assert _read(c, other, tid, 2).error_code == ErrorCode.NOT_COORDINATOR
