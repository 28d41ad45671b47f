"""Client-facing replication details with three real brokers in three racks:

- KIP-392: with the rack-aware replica selector, the leader points a consumer that
  names its rack at the in-sync follower there (``preferred_read_replica``), the
  follower serves it up to its high watermark, and librdkafka with ``client.rack``
  reads every record;
- KIP-951: a Produce (v10+) or Fetch (v12+) sent to a broker that does not lead the
  partition names the current leader, and (Produce v10+, Fetch v16+) its endpoint;
- ListOffsets "latest" from a follower (replica_id ≥ 0) is the leader's log end.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import logstore
from broker_py.network.network_client import NetworkClient
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.messages.produce import ProduceRequest
from tests.cluster.harness import faults
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.support.waiting import wait_until

RACKS = {1: "r1", 2: "r2", 3: "r3"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "racks"
RECORDS = 200
NULL_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(
        tmp_path_factory.mktemp("racks"),
        n_brokers=3,
        zk_session_timeout_ms=6000,
        overrides={"replica.selector.class": SELECTOR, "auto.leader.rebalance.enable": "false"},
        broker_overrides={b: {"broker.rack": rack} for b, rack in RACKS.items()},
    )
    with c:
        from confluent_kafka.admin import AdminClient

        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        c.create_topic(
            TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        for i in range(RECORDS):
            p.produce(TOPIC, b"v%d" % i, partition=0)
        assert p.flush(30) == 0
        faults.wait_full_isr(c, TOPIC)
        yield c


@pytest.fixture
def c(request, cluster):
    with logs_on_failure(request, cluster):
        yield cluster


def _send(c: Cluster, broker: int, api: ApiKey, body, version: int):
    async def go():
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "kip-test")
        try:
            return await client.send(api, body, 10000, version=version)
        finally:
            await client.close()

    return asyncio.run(go())


def _topic_id(c: Cluster, topic: str):
    from logstore.protocol.messages.metadata import MetadataRequest

    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=NULL_UUID, name=topic)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return _send(c, 1, ApiKey.METADATA, body, 12).topics[0].topic_id


def _fetch(
    topic: str, offset: int, rack: str, epoch: int = -1, max_wait_ms: int = 0, topic_id=None
) -> FetchRequest:
    return FetchRequest(
        cluster_id=None,
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id=rack,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=topic_id or NULL_UUID,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
    )


def _partition(response):
    return response.responses[0].partitions[0]


def test_the_leader_points_a_consumer_at_the_follower_in_its_rack(c):
    leader = faults.target_broker(c, "leader", TOPIC)
    follower = next(b for b in (1, 2, 3) if b != leader)
    answer = _partition(_send(c, leader, ApiKey.FETCH, _fetch(TOPIC, 0, RACKS[follower]), 12))
    assert (
        answer.error_code == 0 and answer.preferred_read_replica == follower and not answer.records
    )
    same_rack = _partition(_send(c, leader, ApiKey.FETCH, _fetch(TOPIC, 0, RACKS[leader]), 12))
    assert same_rack.preferred_read_replica == -1 and same_rack.records
    no_rack = _partition(_send(c, leader, ApiKey.FETCH, _fetch(TOPIC, 0, ""), 12))
    assert no_rack.preferred_read_replica == -1 and no_rack.records

    # the follower serves the consumer itself, up to its high watermark (which it learns
    # from the leader's answer to its next fetch)
    def served_all():
        answer = _partition(_send(c, follower, ApiKey.FETCH, _fetch(TOPIC, 0, RACKS[follower]), 12))
        return answer if answer.error_code == 0 and answer.high_watermark == RECORDS else None

    served = wait_until(served_all, 20, 0.2, "the follower's high watermark")
    offsets = [r.offset for b in logstore.decode_batches(served.records) for r in b.records]
    assert offsets == list(range(RECORDS))
    # below v11 a follower still refuses consumers
    old = _partition(_send(c, follower, ApiKey.FETCH, _fetch(TOPIC, 0, ""), 10))
    assert old.error_code == 6  # NOT_LEADER_OR_FOLLOWER


def test_librdkafka_with_client_rack_reads_every_record_from_its_rack(c):
    leader = faults.target_broker(c, "leader", TOPIC)
    follower = next(b for b in (1, 2, 3) if b != leader)
    consumer = Consumer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "group.id": "racks",
            "client.rack": RACKS[follower],
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got = []

        def read_all() -> bool:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
            return len(got) >= RECORDS

        wait_until(read_all, 30, 0, "every record read")
        assert got == [(i, b"v%d" % i) for i in range(RECORDS)]
    finally:
        consumer.close()


def test_a_broker_not_leading_names_the_leader_to_producers_and_consumers(c):
    from confluent_kafka.admin import AdminClient, NewTopic

    leader = 1
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    a.create_topics([NewTopic("solo", num_partitions=1, replica_assignment=[[leader]])])[
        "solo"
    ].result(20)
    wait_until(
        lambda: faults.target_broker(c, "leader", "solo") == leader, 20, 0.2, "solo led by broker 1"
    )
    records = logstore.encode_batch([(None, b"x", [], 0)])
    produce = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="solo",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    for other in (2, 3):
        r = _send(c, other, ApiKey.PRODUCE, produce, 10)
        p = r.responses[0].partition_responses[0]
        assert (
            p.error_code == 6
            and p.current_leader is not None
            and p.current_leader.leader_id == leader
        )
        assert [(e.node_id, f"{e.host}:{e.port}", e.rack) for e in r.node_endpoints] == [
            (leader, c.bootstrap(leader), RACKS[leader])
        ]
        f = _send(c, other, ApiKey.FETCH, _fetch("solo", 0, "", topic_id=_topic_id(c, "solo")), 16)
        part = f.responses[0].partitions[0] if f.responses else None
        assert part is not None and part.error_code == 6 and part.current_leader.leader_id == leader
        assert [e.node_id for e in f.node_endpoints] == [leader]
    # below the hint versions the answer is the same error without hints
    old = _send(c, 2, ApiKey.PRODUCE, produce, 9).responses[0].partition_responses[0]
    assert old.error_code == 6


def test_a_follower_asks_the_leader_for_its_log_end(c):
    from logstore.protocol.messages.list_offsets import ListOffsetsRequest

    leader = faults.target_broker(c, "leader", TOPIC)

    def latest(replica_id: int) -> int:
        body = ListOffsetsRequest(
            replica_id=replica_id,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1
                        )
                    ],
                )
            ],
        )
        return _send(c, leader, ApiKey.LIST_OFFSETS, body, 4).topics[0].partitions[0].offset

    assert latest(-1) == latest(2 if leader != 2 else 3) >= RECORDS
