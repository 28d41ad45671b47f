"""Replication throttles (KIP-73) on the read paths, without sockets: the leader holds back
a throttled partition from a follower outside the ISR while its quota is exceeded, never
from an in-sync one, and counts what it sends; the replica fetcher leaves out a throttled
partition it has not caught up while its own quota is exceeded."""

from __future__ import annotations

import logstore
from broker_py.replication.fetch_data import FetchParams
from broker_py.replication.leader_end_point import PartitionFetchState
from broker_py.replication.replica_fetcher_thread import ReplicaFetcherThread
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.replication.replication_quota_manager import (
    FOLLOWER,
    LEADER,
    ReplicationQuotaManager,
)
from broker_py.server.fetch_session import NULL_UUID, CachedPartition
from broker_py.utils.time import MockTime

ME = 1
NEW = 2  # a replica being added: not in the ISR
IN_SYNC = 3


def batch(n: int) -> bytes:
    return logstore.encode_batch([(b"k", b"v%d" % i, [], 1_700_000_000_000) for i in range(n)])


def fetch(replica_id: int, index: int = 0) -> tuple[FetchParams, list[CachedPartition]]:
    return FetchParams(replica_id, 0, 1, 1 << 20), [
        CachedPartition("t", NULL_UUID, index, 0, 1 << 20)
    ]


def throttled_leader(logs, bound: float, replicas: str = "*"):
    time = MockTime()
    manager = ReplicaManager(ME, lambda topic: 1, time)
    manager.leader_quota = ReplicationQuotaManager(
        LEADER,
        ME,
        manager.monotonic_ms,
        bound=lambda: bound,
        throttled_replicas=lambda topic: replicas if topic == "t" else "",
    )
    for index in (0, 1):
        manager.make_leader("t", index, logs(f"t-{index}"), 0, [ME, IN_SYNC], [ME, IN_SYNC, NEW])
        manager.append_records(1000, 1, [("t", [(index, batch(5), None)])], lambda r: None)
    return manager, time


def test_a_new_replica_is_held_back_once_the_leader_quota_is_exceeded(logs):
    manager, _ = throttled_leader(logs, bound=1.0)
    size = len(batch(5))
    # Under the quota: the first read goes out and is counted.
    (read,) = manager.fetch_messages(*fetch(NEW))
    assert len(read.records) == size
    assert manager.leader_quota.is_quota_exceeded()
    # Over it: the replica outside the ISR gets nothing, but its fetch is still recorded.
    (read,) = manager.fetch_messages(*fetch(NEW))
    assert read.error_code == 0 and read.records == b""
    partition = manager.get_partition("t", 0)
    assert partition is not None and partition.remote_replicas[NEW].log_end_offset == 0
    # An in-sync follower is never held back (acks=all is not slowed), and is counted.
    before = manager.leader_quota.byte_rate()
    (read,) = manager.fetch_messages(*fetch(IN_SYNC))
    assert len(read.records) == size
    assert manager.leader_quota.byte_rate() > before


def test_only_the_listed_replicas_are_throttled(logs):
    manager, _ = throttled_leader(logs, bound=100.0, replicas=f"0:{ME}")
    manager.leader_quota.record(1 << 20)
    (read,) = manager.fetch_messages(*fetch(NEW, index=0))
    assert read.records == b""
    (read,) = manager.fetch_messages(*fetch(NEW, index=1))
    assert len(read.records) == len(batch(5))


def test_the_quota_lets_the_new_replica_fetch_again_as_the_rate_falls(logs):
    manager, time = throttled_leader(logs, bound=1000.0)
    manager.leader_quota.record(20_000)
    (read,) = manager.fetch_messages(*fetch(NEW))
    assert read.records == b""
    time.advance(12.0)  # past every window: the rate is 0
    (read,) = manager.fetch_messages(*fetch(NEW))
    assert len(read.records) == len(batch(5))


def test_without_a_rate_nothing_is_held_back(logs):
    manager, _ = throttled_leader(logs, bound=float((1 << 63) - 1))
    manager.leader_quota.record(1 << 50)
    (read,) = manager.fetch_messages(*fetch(NEW))
    assert len(read.records) == len(batch(5))


def test_the_fetcher_leaves_out_throttled_partitions_not_caught_up(logs):
    manager = ReplicaManager(NEW, lambda topic: 1, MockTime())
    manager.follower_quota = ReplicationQuotaManager(
        FOLLOWER,
        NEW,
        manager.monotonic_ms,
        bound=lambda: 100.0,
        throttled_replicas=lambda topic: f"0:{NEW},1:{NEW}" if topic == "t" else "",
    )
    fetcher = ReplicaFetcherThread("f", ME, None, manager, 1000)  # type: ignore[arg-type]
    ready = {
        ("t", 0): PartitionFetchState(0, 0, -1),
        ("t", 1): PartitionFetchState(0, 0, -1, in_sync=True),
        ("t", 2): PartitionFetchState(0, 0, -1),
        ("u", 0): PartitionFetchState(0, 0, -1),
    }
    assert fetcher._unthrottled(ready) == ready  # under the quota
    manager.follower_quota.record(10_000)
    assert set(fetcher._unthrottled(ready)) == {("t", 1), ("t", 2), ("u", 0)}
