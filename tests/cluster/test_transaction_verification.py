"""KIP-890 transaction verification across brokers: a partition leader that is not the
producer's transaction coordinator asks it (AddPartitionsToTxn v4, verify_only) before
the first transactional batch of a transaction, so a late batch of a transaction the
coordinator already aborted cannot open a transaction nobody will end (a hanging
transaction that would hold every read_committed consumer at its first offset).

Real ZooKeeper and three broker processes; the client side is the project's own
NetworkClient, so each request is exactly the one a late retry would send.
"""

from __future__ import annotations

import asyncio

import logstore
from broker_py.network.network_client import NetworkClient
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.list_offsets import ListOffsetsRequest
from logstore.protocol.messages.produce import ProduceRequest
from logstore.protocol.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from tests.cluster.test_coordinators import _leader_of, cluster  # noqa: F401 - the fixture

TIMEOUT_MS = 15_000


class _Brokers:
    """One NetworkClient per broker of the cluster."""

    def __init__(self, c) -> None:
        self.clients = {}
        for b in (1, 2, 3):
            host, port = c.bootstrap(b).split(":")
            self.clients[b] = NetworkClient(host, int(port), f"verification-test-{b}")

    async def send(self, broker: int, api_key: ApiKey, body, version: int):
        return await self.clients[broker].send(api_key, body, TIMEOUT_MS, version=version)

    async def coordinator(self, key: str, key_type: int) -> int:
        for _ in range(100):
            r = await self.send(
                1, ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=key, key_type=key_type), 3
            )
            if r.error_code == 0:
                return r.node_id
            await asyncio.sleep(0.2)
        raise AssertionError(f"no coordinator for {key}")

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients.values()))


async def _init_producer(brokers: _Brokers, coordinator: int, tid: str) -> tuple[int, int]:
    for _ in range(100):
        r = await brokers.send(
            coordinator,
            ApiKey.INIT_PRODUCER_ID,
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000),
            3,
        )
        if r.error_code == 0:
            return r.producer_id, r.producer_epoch
        await asyncio.sleep(0.2)
    raise AssertionError(f"InitProducerId for {tid}: {ErrorCode(r.error_code).name}")


async def _add_partition(
    brokers: _Brokers, coordinator: int, tid: str, pid: int, epoch: int, topic: str, index: int
) -> None:
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[index])
        ],
    )
    r = await brokers.send(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, body, 3)
    assert [
        p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [0]


async def _produce(
    brokers: _Brokers, leader: int, tid: str, pid: int, epoch: int, topic: str, index: int, seq: int
) -> int:
    records = logstore.encode_batch(
        [(b"k", b"v%d" % seq, [], 1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    body = ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=TIMEOUT_MS,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=index, records=records)],
            )
        ],
    )
    r = await brokers.send(leader, ApiKey.PRODUCE, body, 9)
    return r.responses[0].partition_responses[0].error_code


async def _end_txn(
    brokers: _Brokers, coordinator: int, tid: str, pid: int, epoch: int, commit: bool
) -> None:
    r = await brokers.send(
        coordinator,
        ApiKey.END_TXN,
        EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        3,
    )
    assert r.error_code == 0, ErrorCode(r.error_code).name


async def _stable_and_high(
    brokers: _Brokers, leader: int, topic: str, index: int
) -> tuple[int, int]:
    """(last stable offset, high watermark) of the partition at its leader."""
    out = []
    for isolation in (1, 0):
        body = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(partition_index=index, timestamp=-1)
                    ],
                )
            ],
        )
        r = await brokers.send(leader, ApiKey.LIST_OFFSETS, body, 5)
        out.append(r.topics[0].partitions[0].offset)
    return out[0], out[1]


def _away_from(c, coordinator_of, topic: str, partitions: int) -> tuple[str, int, int]:
    """A transactional id, and a partition of ``topic`` whose leader is not its coordinator."""
    leaders = {i: _leader_of(c, topic, i) for i in range(partitions)}
    for n in range(50):
        tid = f"late-{n}"
        coordinator = coordinator_of(tid)
        for index, leader in leaders.items():
            if leader != coordinator:
                return tid, index, coordinator
    raise AssertionError(f"every partition of {topic} led by the coordinator: {leaders}")


def test_a_late_batch_of_an_aborted_transaction_is_refused_by_a_remote_leader(cluster):  # noqa: F811
    c = cluster
    c.create_topic(
        "v-data", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )

    async def go() -> None:
        brokers = _Brokers(c)
        try:
            coordinators = {}
            for n in range(50):
                coordinators[f"late-{n}"] = await brokers.coordinator(f"late-{n}", 1)
            tid, index, coordinator = _away_from(c, coordinators.__getitem__, "v-data", 3)
            leader = _leader_of(c, "v-data", index)
            pid, epoch = await _init_producer(brokers, coordinator, tid)
            await _add_partition(brokers, coordinator, tid, pid, epoch, "v-data", index)
            assert (
                await _produce(brokers, leader, tid, pid, epoch, "v-data", index, 0) == 0
            )  # verified remotely: in the txn
            await _end_txn(brokers, coordinator, tid, pid, epoch, commit=False)

            # a late retry of the aborted transaction, without AddPartitionsToTxn
            error = await _produce(brokers, leader, tid, pid, epoch, "v-data", index, 1)
            assert ErrorCode(error) == ErrorCode.INVALID_TXN_STATE
            for _ in range(50):  # the ABORT marker reaches the high watermark
                stable, high = await _stable_and_high(brokers, leader, "v-data", index)
                if stable == high:
                    break
                await asyncio.sleep(0.1)
            assert stable == high  # no transaction left open in the partition

            # the next transaction, added properly, is verified and commits
            await _add_partition(brokers, coordinator, tid, pid, epoch, "v-data", index)
            assert await _produce(brokers, leader, tid, pid, epoch, "v-data", index, 1) == 0
            await _end_txn(brokers, coordinator, tid, pid, epoch, commit=True)
            for _ in range(50):
                stable, high = await _stable_and_high(brokers, leader, "v-data", index)
                if stable == high:
                    break
                await asyncio.sleep(0.1)
            assert stable == high
        finally:
            await brokers.close()

    asyncio.run(go())


def test_a_late_offset_commit_of_an_aborted_transaction_is_refused_by_a_remote_group_coordinator(
    cluster,  # noqa: F811 - the fixture imported from test_coordinators
):
    c = cluster
    c.create_topic("v-in", partitions=1, replication_factor=3)

    async def go() -> None:
        brokers = _Brokers(c)
        try:
            tid = "late-offsets"
            coordinator = await brokers.coordinator(tid, 1)
            group, group_coordinator = "", coordinator
            for n in range(200):
                group = f"g-{n}"
                group_coordinator = await brokers.coordinator(group, 0)
                if group_coordinator != coordinator:
                    break
            assert group_coordinator != coordinator, (
                "every group coordinated by the transaction coordinator"
            )
            pid, epoch = await _init_producer(brokers, coordinator, tid)
            r = await brokers.send(
                coordinator,
                ApiKey.ADD_OFFSETS_TO_TXN,
                AddOffsetsToTxnRequest(
                    transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
                ),
                3,
            )
            assert r.error_code == 0

            def commit_body(offset: int):
                return TxnOffsetCommitRequest(
                    transactional_id=tid,
                    group_id=group,
                    producer_id=pid,
                    producer_epoch=epoch,
                    member_id="",
                    topics=[
                        TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                            name="v-in",
                            partitions=[
                                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=offset,
                                    committed_metadata="",
                                )
                            ],
                        )
                    ],
                )

            r = await brokers.send(group_coordinator, ApiKey.TXN_OFFSET_COMMIT, commit_body(5), 3)
            assert [p.error_code for t in r.topics for p in t.partitions] == [0]
            await _end_txn(brokers, coordinator, tid, pid, epoch, commit=False)
            r = await brokers.send(group_coordinator, ApiKey.TXN_OFFSET_COMMIT, commit_body(7), 3)
            assert [ErrorCode(p.error_code) for t in r.topics for p in t.partitions] == [
                ErrorCode.INVALID_TXN_STATE
            ]
        finally:
            await brokers.close()

    asyncio.run(go())
