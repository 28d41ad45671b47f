"""The share coordinator's APIs on the wire against a real broker alone: Initialize,
Read, Write, Delete and ReadSummary of share-partition state in ``__share_group_state``,
Kafka's errors for bad input and fencing, FindCoordinator's SHARE key type, the state
read back after a restart (the partition's log replayed, also after pruning), and a
share-partition leader's persister on another broker reaching the coordinator, retrying
while there is none."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker_py.coordinator.share.share_coordinator_records import (
    SharePartitionKey,
    StateBatch,
    topic_id_string,
)
from broker_py.network.network_client import NetworkClient
from broker_py.server.inter_broker_clients import InterBrokerClients
from broker_py.server.share_state_persister import ShareStatePersister
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from tests.integration.clients import create_topic, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

TOPIC = "share-state"
GROUP = "sg"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share-state")),
        {"share.coordinator.state.topic.num.partitions": "4"},
    )
    b.start()
    create_topic(b.bootstrap, TOPIC, 2)
    yield b
    b.kill()


def topic_id(b: BrokerProcess, name: str) -> uuid.UUID:
    meta = wire_call(
        b.bootstrap,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False,
        ),
        12,
    )
    return meta.topics[0].topic_id


def only(response):
    (result,) = response.results
    (partition,) = result.partitions
    return partition


def initialize(b, tid, partition=0, state_epoch=0, start_offset=0, group=GROUP):
    R = InitializeShareGroupStateRequest
    body = R(
        group_id=group,
        topics=[
            R.InitializeStateData(
                topic_id=tid,
                partitions=[
                    R.PartitionData(
                        partition=partition, state_epoch=state_epoch, start_offset=start_offset
                    )
                ],
            )
        ],
    )
    return only(wire_call(b.bootstrap, body, 0))


def read(b, tid, leader_epoch, partition=0):
    R = ReadShareGroupStateRequest
    body = R(
        group_id=GROUP,
        topics=[
            R.ReadStateData(
                topic_id=tid,
                partitions=[R.PartitionData(partition=partition, leader_epoch=leader_epoch)],
            )
        ],
    )
    return only(wire_call(b.bootstrap, body, 0))


def summary(b, tid, partition=0):
    R = ReadShareGroupStateSummaryRequest
    body = R(
        group_id=GROUP,
        topics=[
            R.ReadStateSummaryData(
                topic_id=tid, partitions=[R.PartitionData(partition=partition, leader_epoch=-1)]
            )
        ],
    )
    return only(wire_call(b.bootstrap, body, 0))


def write(b, tid, state_epoch, leader_epoch, start_offset, batches, partition=0):
    R = WriteShareGroupStateRequest
    body = R(
        group_id=GROUP,
        topics=[
            R.WriteStateData(
                topic_id=tid,
                partitions=[
                    R.PartitionData(
                        partition=partition,
                        state_epoch=state_epoch,
                        leader_epoch=leader_epoch,
                        start_offset=start_offset,
                        state_batches=[
                            R.StateBatch(
                                first_offset=f, last_offset=last, delivery_state=s, delivery_count=c
                            )
                            for f, last, s, c in batches
                        ],
                    )
                ],
            )
        ],
    )
    return only(wire_call(b.bootstrap, body, 0))


def delete(b, tid, partition=0):
    R = DeleteShareGroupStateRequest
    body = R(
        group_id=GROUP,
        topics=[R.DeleteStateData(topic_id=tid, partitions=[R.PartitionData(partition=partition)])],
    )
    return only(wire_call(b.bootstrap, body, 0))


def batches(p) -> list[tuple[int, int, int, int]]:
    return [
        (s.first_offset, s.last_offset, s.delivery_state, s.delivery_count) for s in p.state_batches
    ]


def find_share_coordinator(b, key: str, version: int = 6):
    body = FindCoordinatorRequest(key=key, key_type=2, coordinator_keys=[key])
    response = wire_call(b.bootstrap, body, version)
    if version >= 4:
        (c,) = response.coordinators
        return c.error_code, c.node_id, c.port
    return response.error_code, response.node_id, response.port


def test_state_written_fenced_read_back_and_deleted(broker):
    tid = topic_id(broker, TOPIC)
    versions = wire_call(broker.bootstrap, ApiVersionsRequest(), 0).api_keys
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions}
    for api in range(83, 88):  # Initialize, Read, Write, Delete, ReadSummary
        assert advertised[api] == (0, 0)

    p = read(broker, tid, 1)
    assert p.error_code == ErrorCode.INVALID_REQUEST
    assert p.error_message == "Read operation on uninitialized share partition not allowed."
    assert write(broker, tid, 0, 1, 0, []).error_code == ErrorCode.INVALID_REQUEST
    assert initialize(broker, uuid.uuid4()).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert initialize(broker, tid, partition=2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    bad = initialize(broker, tid, partition=-1)
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "The partition id cannot be a negative number.",
    )

    assert initialize(broker, tid, state_epoch=0, start_offset=5).error_code == 0
    p = read(broker, tid, 1)
    assert (p.error_code, p.state_epoch, p.start_offset, batches(p)) == (0, 0, 5, [])
    w = write(broker, tid, 0, 1, 5, [(5, 9, 2, 1), (10, 12, 0, 2), (8, 9, 4, 1)])
    assert w.error_code == 0 and w.error_message is None
    # 8..9 archived wins over acknowledged at the same delivery count.
    expected = [(5, 7, 2, 1), (8, 9, 4, 1), (10, 12, 0, 2)]
    assert batches(read(broker, tid, 1)) == expected
    assert write(broker, tid, 0, 0, 5, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert read(broker, tid, 0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    # The start offset moves past 5..9: those batches go.
    assert write(broker, tid, 0, 2, 10, [(10, 10, 2, 2)]).error_code == 0
    # Only a read records a leader epoch (a write's higher one is accepted, not kept).
    s = summary(broker, tid)
    assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset) == (0, 0, 1, 10)

    # A new state epoch (a reset of the share-partition's state) fences older writers.
    assert initialize(broker, tid, state_epoch=1, start_offset=20).error_code == 0
    assert write(broker, tid, 0, 2, 20, []).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert initialize(broker, tid, state_epoch=0).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert write(broker, tid, 1, 3, 20, [(20, 24, 2, 1)]).error_code == 0

    # Partition 1 of the topic: state that is deleted.
    assert initialize(broker, tid, partition=1, start_offset=0).error_code == 0
    assert delete(broker, tid, partition=1).error_code == 0
    assert read(broker, tid, 1, partition=1).error_code == ErrorCode.INVALID_REQUEST
    assert delete(broker, tid, partition=1).error_code == 0  # nothing left: still NONE

    # FindCoordinator SHARE (v6+): this broker; a key that is not group:topicId:partition
    # and older versions get INVALID_REQUEST.
    key = f"{GROUP}:{topic_id_string(tid)}:0"
    assert find_share_coordinator(broker, key) == (0, 0, broker.port)
    assert find_share_coordinator(broker, "no-colons")[0] == ErrorCode.INVALID_REQUEST
    assert find_share_coordinator(broker, key, version=5)[0] == ErrorCode.INVALID_REQUEST

    meta = wire_call(
        broker.bootstrap,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="__share_group_state")],
            allow_auto_topic_creation=False,
        ),
        12,
    )
    (state_topic,) = meta.topics
    assert state_topic.error_code == 0 and state_topic.is_internal
    assert len(state_topic.partitions) == 4

    # A restart replays __share_group_state: the same state, the same fencing.
    broker.restart()
    p = read(broker, tid, 3)
    assert (p.error_code, p.state_epoch, p.start_offset, batches(p)) == (
        0,
        1,
        20,
        [(20, 24, 2, 1)],
    )
    assert write(broker, tid, 1, 2, 20, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert read(broker, tid, 1, partition=1).error_code == ErrorCode.INVALID_REQUEST


def test_an_empty_group_id_gets_an_empty_answer(broker):
    tid = topic_id(broker, TOPIC)
    R = InitializeShareGroupStateRequest
    body = R(
        group_id="",
        topics=[
            R.InitializeStateData(
                topic_id=tid,
                partitions=[R.PartitionData(partition=0, state_epoch=0, start_offset=0)],
            )
        ],
    )
    assert wire_call(broker.bootstrap, body, 0).results == []


def test_the_persister_reaches_the_coordinator_and_retries(broker):
    """A share-partition leader's persister on another broker (id 99) sends the calls to
    this broker's coordinator; while no coordinator is known, or the one named does not
    answer, it retries until its timeout."""
    tid = topic_id(broker, TOPIC)
    host, port = broker.bootstrap.split(":")
    key = SharePartitionKey("persisted", tid, 1)

    def persister(coordinator, endpoint, timeout_ms=10000) -> ShareStatePersister:
        return ShareStatePersister(
            99,
            lambda: None,
            lambda k: coordinator,
            InterBrokerClients("persister-test", lambda b: endpoint, NetworkClient),
            timeout_ms=timeout_ms,
            retry_backoff_ms=20,
        )

    async def calls():
        p = persister(0, (host, int(port)))
        try:
            assert (await p.initialize(key, 0, 3)).error == ErrorCode.NONE
            written = await p.write(key, 0, 1, -1, [StateBatch(3, 4, 2, 1)])
            assert written.error == ErrorCode.NONE
            state = await p.read(key, 1)
            assert (state.error, state.state_epoch, state.start_offset) == (ErrorCode.NONE, 0, 3)
            assert state.state_batches == (StateBatch(3, 4, 2, 1),)
            summary_ = await p.read_summary(key, -1)
            assert (summary_.leader_epoch, summary_.start_offset) == (1, 3)
            assert (await p.write(key, 0, 0, -1, [])).error == ErrorCode.FENCED_LEADER_EPOCH
            assert (await p.delete(key)).error == ErrorCode.NONE
            gone = await p.read(key, 1)
            assert gone.error == ErrorCode.INVALID_REQUEST
        finally:
            await p.close()
        nobody = persister(None, (host, int(port)), timeout_ms=300)
        assert (await nobody.read(key, 1)).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        closed_port = free_port()
        dead = persister(5, ("127.0.0.1", closed_port), timeout_ms=300)
        try:
            assert (await dead.read(key, 1)).error in (
                ErrorCode.NETWORK_EXCEPTION,
                ErrorCode.REQUEST_TIMED_OUT,
            )
        finally:
            await dead.close()

    asyncio.run(calls())


def test_pruning_keeps_the_state(tmp_path):
    """Every prune interval a written partition of __share_group_state gets a snapshot of
    each state and its records before them are deleted; a restart reads the same state
    from what is left."""
    from confluent_kafka import Consumer, TopicPartition

    b = BrokerProcess(
        str(tmp_path),
        {
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.prune.interval.ms": "200",
            "share.coordinator.snapshot.update.records.per.snapshot": "1000",
        },
    )
    b.start()
    try:
        create_topic(b.bootstrap, TOPIC, 2)
        tid = topic_id(b, TOPIC)
        assert initialize(b, tid, partition=0, start_offset=0).error_code == 0
        assert initialize(b, tid, partition=1, start_offset=0).error_code == 0
        assert delete(b, tid, partition=1).error_code == 0
        for i in range(20):
            assert write(b, tid, 0, 1, -1, [(i, i, 2, 1)]).error_code == 0
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "pruning-test"})
        try:

            def pruned() -> bool:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition("__share_group_state", 0), timeout=5
                )
                return low >= 23 and high == low + 1

            # 23 records written (two initializations, a tombstone, 20 updates); what is
            # left is the snapshot of the one state (prunes may also have run between).
            wait_until(pruned, 30, 0.1, "__share_group_state pruned to one snapshot")
        finally:
            consumer.close()
        b.restart()
        p = read(b, tid, 1)
        assert (p.error_code, p.start_offset, batches(p)) == (0, 0, [(0, 19, 2, 1)])
        assert read(b, tid, 1, partition=1).error_code == ErrorCode.INVALID_REQUEST
        assert write(b, tid, 0, 0, -1, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
    finally:
        b.kill()


def test_the_state_of_a_deleted_topic_goes(tmp_path):
    """Once a topic is deleted, the next prune writes tombstones for its share-partition
    states and deletes the records before them."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    b = BrokerProcess(
        str(tmp_path),
        {
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.prune.interval.ms": "200",
        },
    )
    b.start()
    state_partition = TopicPartition("__share_group_state", 0)
    consumer = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "deleted-topic-test",
            "enable.auto.commit": False,
        }
    )
    try:
        create_topic(b.bootstrap, "doomed", 2)
        tid = topic_id(b, "doomed")
        assert initialize(b, tid, partition=0).error_code == 0
        assert initialize(b, tid, partition=1).error_code == 0

        def watermarks() -> tuple[int, int]:
            return consumer.get_watermark_offsets(state_partition, timeout=5)

        # Pruned to the two states' snapshots.
        wait_until(
            lambda: watermarks()[0] >= 2 and watermarks()[1] - watermarks()[0] == 2,
            30,
            0.1,
            "pruned to two snapshots",
        )
        before = watermarks()[1]
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(15)
        wait_until(
            lambda: watermarks() == (before, before + 2), 30, 0.1, "two tombstones, the rest pruned"
        )
        consumer.assign([TopicPartition("__share_group_state", 0, before)])
        values = []
        deadline = 100
        while len(values) < 2 and deadline:
            deadline -= 1
            for m in consumer.consume(2, 0.2):
                assert m.error() is None, m.error()
                values.append(m.value())
        assert values == [None, None]
    finally:
        consumer.close()
        b.kill()
