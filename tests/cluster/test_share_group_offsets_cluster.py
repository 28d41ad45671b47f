"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932)
against three real brokers and a real ZooKeeper. confluent-kafka 2.16's AdminClient has no
share-group offset calls, so they go on the wire through logstore's codec.

The group's coordinator (FindCoordinator) sets the start offsets of a three-partition
topic's share-partitions, whose state lives with the share coordinators of their keys
(``__share_group_state`` spread over the brokers); another broker answers NOT_COORDINATOR.
A ShareConsumer then reads partition 0 from its leader, which loads the state: it gets
the records from the altered start offset on, none before. Once the consumer has left,
DeleteShareGroupOffsets deletes the topic's state: every start offset reads -1 again and
the group describes no partition.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.integration.clients import wire_call
from tests.support.waiting import wait_until

OVERRIDES = {
    "group.share.enable": "true",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
}
TOPIC = "sgo-data"
GROUP = "sgo-group"
D = DescribeShareGroupOffsetsRequest
A = AlterShareGroupOffsetsRequest
X = DeleteShareGroupOffsetsRequest


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


def _coordinator(c: Cluster) -> int:
    def find() -> int | None:
        try:
            body = FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
            (found,) = wire_call(c.bootstrap(1), body, 4).coordinators
        except OSError:
            return None
        return found.node_id if found.error_code == 0 else None

    return wait_until(find, 30, 0.2, f"the coordinator of {GROUP}")


def _describe(bootstrap: str, topics: list[int] | None) -> Any:
    group = D.DescribeShareGroupOffsetsRequestGroup(
        group_id=GROUP,
        topics=None
        if topics is None
        else [D.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=topics)],
    )
    (described,) = wire_call(bootstrap, D(groups=[group]), 0).groups
    return described


def _starts(described: Any) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, error code), of TOPIC."""
    return {
        p.partition_index: (p.start_offset, p.error_code)
        for t in described.topics
        if t.topic_name == TOPIC
        for p in t.partitions
    }


def test_start_offsets_set_read_and_deleted_across_brokers(cluster):
    c = cluster
    c.create_topic(TOPIC, 3, 2)
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for v in range(10):
        producer.produce(TOPIC, str(v).encode(), partition=0)
    assert producer.flush(30) == 0

    coordinator = _coordinator(c)
    at = c.bootstrap(coordinator)
    elsewhere = c.bootstrap(coordinator % 3 + 1)
    assert _describe(elsewhere, [0]).error_code == ErrorCode.NOT_COORDINATOR
    assert _starts(_describe(at, [0, 1, 2])) == {0: (-1, 0), 1: (-1, 0), 2: (-1, 0)}

    partitions = [
        A.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
        for p, o in ((0, 6), (1, 0), (2, 0))
    ]
    altered = wire_call(
        at,
        A(
            group_id=GROUP,
            topics=[A.AlterShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=partitions)],
        ),
        0,
    )
    assert altered.error_code == 0
    assert [(p.partition_index, p.error_code) for t in altered.responses for p in t.partitions] == [
        (0, 0),
        (1, 0),
        (2, 0),
    ]
    assert _starts(_describe(at, None)) == {0: (6, 0), 1: (0, 0), 2: (0, 0)}

    consumer = ShareConsumer({"bootstrap.servers": c.bootstrap_servers, "group.id": GROUP})
    values: list[int] = []
    try:
        consumer.subscribe([TOPIC])

        def read() -> bool:
            values.extend(int(m.value()) for m in consumer.poll(0.5) if m.error() is None)
            return len(values) >= 4

        wait_until(read, 30, 0, "the records from the altered start offset")
    finally:
        consumer.close()
    assert sorted(values) == [6, 7, 8, 9]

    def deleted() -> Any:
        topics = [X.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)]
        answer = wire_call(at, X(group_id=GROUP, topics=topics), 0)
        # NON_EMPTY_GROUP until the coordinator has seen the consumer leave
        return answer if answer.error_code != ErrorCode.NON_EMPTY_GROUP else None

    answer = wait_until(deleted, 20, 0.2, "the offsets deleted once the group is empty")
    assert answer.error_code == 0
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [(TOPIC, 0)]
    assert _starts(_describe(at, [0, 1, 2])) == {0: (-1, 0), 1: (-1, 0), 2: (-1, 0)}
    assert _describe(at, None).topics == []
