"""OffsetCommit v0 and OffsetFetch v0 in a cluster keep their offsets in ZooKeeper, at
``/consumers/<group>/offsets/<topic>/<partition>``, as Kafka's ZooKeeper mode does; later
versions use ``__consumer_offsets`` and neither sees the other. A real broker process
and a real ZooKeeper."""

from __future__ import annotations

from kazoo.client import KazooClient

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest as FindCoordinator
from logstore.protocol.messages.offset_commit import OffsetCommitRequest as OffsetCommit
from logstore.protocol.messages.offset_commit import OffsetFetchRequest as OffsetFetch
from tests.integration.clients import create_topic, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.waiting import wait_until

T, Pt = OffsetCommit.OffsetCommitRequestTopic, OffsetCommit.OffsetCommitRequestPartition


def _commit(
    bootstrap: str,
    group: str,
    topic: str,
    offsets: dict[int, int],
    version: int,
    metadata: str = "",
) -> dict[int, int]:
    extra = {} if version == 0 else {"generation_id_or_member_epoch": -1, "member_id": ""}
    body = OffsetCommit(
        group_id=group,
        topics=[
            T(
                name=topic,
                partitions=[
                    Pt(partition_index=p, committed_offset=o, committed_metadata=metadata)
                    for p, o in offsets.items()
                ],
            )
        ],
        **extra,
    )
    return {
        p.partition_index: p.error_code
        for p in wire_call(bootstrap, body, version).topics[0].partitions
    }


def _fetch(
    bootstrap: str, group: str, topic: str, partitions: list[int], version: int
) -> dict[int, tuple[int, str, int]]:
    body = OffsetFetch(
        group_id=group,
        topics=[OffsetFetch.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
    )
    response = wire_call(bootstrap, body, version)
    return {
        p.partition_index: (p.committed_offset, p.metadata, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def test_offset_commit_v0_goes_to_zookeeper_in_a_cluster(tmp_path, zk_connect) -> None:
    b = BrokerProcess(str(tmp_path))
    b.overrides.update(
        {
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": "1",
            "offset.metadata.max.bytes": "8",
        }
    )
    zk = KazooClient(hosts=zk_connect)
    b.start()
    zk.start()
    try:
        topic = "zk-offsets"
        create_topic(b.bootstrap, topic, 3)
        assert _commit(b.bootstrap, "old-g", topic, {0: 7, 2: 11}, 0, metadata="meta") == {
            0: 0,
            2: 0,
        }
        assert zk.get(f"/consumers/old-g/offsets/{topic}/0")[0] == b"7"
        assert zk.get(f"/consumers/old-g/offsets/{topic}/2")[0] == b"11"
        # Read back by v0 (ZooKeeper keeps no metadata); partition 1 has none.
        assert _fetch(b.bootstrap, "old-g", topic, [0, 1, 2], 0) == {
            0: (7, "", 0),
            1: (-1, "", 0),
            2: (11, "", 0),
        }
        # A later commit overwrites the node.
        assert _commit(b.bootstrap, "old-g", topic, {0: 8}, 0) == {0: 0}
        assert zk.get(f"/consumers/old-g/offsets/{topic}/0")[0] == b"8"
        # v1+ commits live in __consumer_offsets (created by FindCoordinator): neither
        # store sees the other.
        wait_until(
            lambda: wire_call(b.bootstrap, FindCoordinator(key="old-g"), 0).error_code == 0,
            30,
            message="a coordinator",
        )
        wait_until(
            lambda: _commit(b.bootstrap, "old-g", topic, {1: 5}, 1) == {1: 0},
            30,
            message="a v1 commit",
        )
        assert _fetch(b.bootstrap, "old-g", topic, [0, 1], 1) == {0: (-1, "", 0), 1: (5, "", 0)}
        assert _fetch(b.bootstrap, "old-g", topic, [1], 0) == {1: (-1, "", 0)}
        assert zk.exists(f"/consumers/old-g/offsets/{topic}/1") is None
        # Per partition: metadata over offset.metadata.max.bytes, an unknown partition.
        assert _commit(b.bootstrap, "old-g", topic, {0: 9}, 0, metadata="x" * 9) == {
            0: ErrorCode.OFFSET_METADATA_TOO_LARGE
        }
        assert _commit(b.bootstrap, "old-g", topic, {5: 1}, 0) == {
            5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
        assert _fetch(b.bootstrap, "old-g", "no-such-topic", [0], 0) == {0: (-1, "", 0)}
        # A node that does not hold an offset is that partition's error, not the request's.
        zk.set(f"/consumers/old-g/offsets/{topic}/2", b"not a number")
        assert _fetch(b.bootstrap, "old-g", topic, [0, 2], 0) == {
            0: (8, "", 0),
            2: (-1, "", ErrorCode.UNKNOWN_SERVER_ERROR),
        }
    finally:
        zk.stop()
        zk.close()
        assert b.stop() == 0
