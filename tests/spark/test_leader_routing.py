"""The network reader follows partition leaders (scripted brokers, tests/spark/fake_cluster.py):
each partition's ListOffsets and Fetch go to its leader under the leader epoch from
Metadata (KIP-320); refusals and dead brokers are retried at the same offset on the new
leader, at once with a KIP-951 hint, else after a backoff and a metadata refresh; a
spent retry budget names the partition; NetworkLog.read yields every record once across
leader changes and waits, within the budget, for a new leader's high watermark.

The same over three real brokers and a real ZooKeeper: tests/spark/test_cluster_failover.py.
"""

from __future__ import annotations

import pickle
import socket
import threading
import time

import pytest

import logstore
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.spark.errors import DataLossError, InvalidOptionError
from logstore.spark.kafka_client import (
    BrokerUnavailable,
    FencedLeaderEpoch,
    KafkaClient,
    LeaderNotAvailable,
    NotLeaderOrFollower,
    RetryPolicy,
    UnknownLeaderEpoch,
)
from logstore.spark.network_reader import NetworkLog
from logstore.spark.offset_range import OffsetRange, RecordBounds
from logstore.spark.options import NetworkSettings, parse_options
from tests.spark.fake_cluster import TOPIC, FakeCluster


def offsets_of(data: bytes, start: int = 0) -> list[int]:
    return [r.offset for b in logstore.decode_batches(data) for r in b.records if r.offset >= start]


def metadata_requests(c: FakeCluster) -> int:
    return sum(len(b.received(ApiKey.METADATA)) for b in c.brokers.values())


def fetch_partitions(b) -> list:  # noqa: ANN001
    return [fp for f in b.received(ApiKey.FETCH) for t in f.topics for fp in t.partitions]


def dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        return f"127.0.0.1:{s.getsockname()[1]}"


# --- the client ------------------------------------------------------------------------


def test_each_partition_is_asked_of_its_leader_under_its_epoch():
    with FakeCluster(3, 20, partitions=3) as c:
        c.leader, c.epoch = {0: 1, 1: 2, 2: 3}, {0: 4, 1: 7, 2: 0}
        with KafkaClient(c.bootstrap, timeout_s=5) as kc:
            assert kc.partitions([TOPIC]) == {TOPIC: [0, 1, 2]}
            for p in range(3):
                assert kc.list_offset(TOPIC, p, -1) == 20
                assert offsets_of(kc.fetch(TOPIC, p, 3), 3)[:2] == [3, 4]
        for p, node in ((0, 1), (1, 2), (2, 3)):
            b = c.brokers[node]
            assert [
                (fp.partition, fp.current_leader_epoch, fp.fetch_offset)
                for fp in fetch_partitions(b)
            ] == [(p, c.epoch[p], 3)]
            asked = [
                lp
                for lo in b.received(ApiKey.LIST_OFFSETS)
                for t in lo.topics
                for lp in t.partitions
            ]
            assert [(lp.partition_index, lp.current_leader_epoch) for lp in asked] == [
                (p, c.epoch[p])
            ]


def test_any_live_bootstrap_server_will_do():
    with FakeCluster(2, 10) as c:
        bootstrap = ",".join([dead_address(), dead_address(), c.brokers[2].address])
        with KafkaClient(bootstrap, timeout_s=5) as kc:
            assert kc.partitions() == {TOPIC: [0]}
            assert offsets_of(kc.fetch(TOPIC, 0, 0)) == list(range(10))
        assert c.brokers[2].received(ApiKey.METADATA) and fetch_partitions(c.brokers[1])


def test_a_just_started_brokers_empty_metadata_is_passed_over():
    """A broker that has not yet had the controller's UpdateMetadata knows no broker and
    no topic; its answer must not end a read with UNKNOWN_TOPIC_OR_PARTITION."""
    with FakeCluster(3, 20) as c, KafkaClient(c.bootstrap, timeout_s=5) as kc:
        assert offsets_of(kc.fetch(TOPIC, 0, 0, 1)) == list(range(5))
        c.brokers[1].stop()
        c.elect(0, 2)
        c.brokers[2].just_started = True  # asked for metadata first: it comes before 3
        assert offsets_of(kc.fetch(TOPIC, 0, 5, 1)) == list(range(5, 10))
        assert c.brokers[2].received(ApiKey.METADATA) and c.brokers[3].received(ApiKey.METADATA)
        c.brokers[3].just_started = True
        with pytest.raises(BrokerUnavailable, match="without brokers"):
            kc.partitions([TOPIC])


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, NotLeaderOrFollower),
        (ErrorCode.FENCED_LEADER_EPOCH, FencedLeaderEpoch),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, UnknownLeaderEpoch),
        (ErrorCode.LEADER_NOT_AVAILABLE, LeaderNotAvailable),
    ],
)
def test_refusals_refresh_metadata_and_retry_at_the_same_offset(code, error):
    with FakeCluster(2, 20) as c, KafkaClient(c.bootstrap, timeout_s=5) as kc:
        assert kc.list_offset(TOPIC, 0, -1) == 20
        before = metadata_requests(c)
        c.brokers[1].forced_errors = [int(code)] * 2
        assert offsets_of(kc.fetch(TOPIC, 0, 7, 1), 7) == [7, 8, 9]
        assert [fp.fetch_offset for fp in fetch_partitions(c.brokers[1])] == [7, 7, 7]
        assert metadata_requests(c) == before + 2
        c.brokers[1].forced_errors = [int(code)] * 2
        assert kc.list_offset(TOPIC, 0, -2) == 0
        assert metadata_requests(c) == before + 4
        # Exhausted: the last refusal's class, naming the partition.
        c.brokers[1].forced_errors = [int(code)] * 100
        with pytest.raises(error, match=r"Fetch t-0: gave up after 5 attempt") as err:
            kc.fetch(TOPIC, 0, 7)
        assert (err.value.errno, err.value.topic, err.value.partition, err.value.attempts) == (
            int(code),
            TOPIC,
            0,
            5,
        )
        assert err.value.retriable


def test_a_kip951_hint_goes_to_the_new_leader_without_metadata():
    with FakeCluster(3, 20) as c, KafkaClient(c.bootstrap, timeout_s=5) as kc:
        assert offsets_of(kc.fetch(TOPIC, 0, 0, 1)) == list(range(5))
        before = metadata_requests(c)
        c.elect(0, 3)
        c.brokers[3].listed = False  # only the hint's node endpoint tells where it is
        c.brokers[1].hints = True
        assert offsets_of(kc.fetch(TOPIC, 0, 5, 1)) == list(range(5, 10))
        assert metadata_requests(c) == before
        assert [
            (fp.fetch_offset, fp.current_leader_epoch) for fp in fetch_partitions(c.brokers[3])
        ] == [(5, 1)]
        # Metadata from a broker that has not heard of the election does not take it back.
        c.brokers[3].listed = True
        for b in c.brokers.values():
            b.stale_view = {0: (1, 0)} if b.node_id != 3 else None
        kc.partitions([TOPIC])
        assert kc.list_offset(TOPIC, 0, -1) == 20
        assert offsets_of(kc.fetch(TOPIC, 0, 10, 1)) == list(range(10, 15))
        assert [fp.fetch_offset for fp in fetch_partitions(c.brokers[3])] == [5, 10]
        # A stale epoch is fenced by the leader: FENCED_LEADER_EPOCH, metadata, the new epoch.
        c.brokers[1].stale_view = None
        c.elect(0, 3)
        assert offsets_of(kc.fetch(TOPIC, 0, 15, 1)) == list(range(15, 20))
        assert [
            (fp.fetch_offset, fp.current_leader_epoch) for fp in fetch_partitions(c.brokers[3])
        ][-2:] == [(15, 1), (15, 2)]


def test_a_dead_leader_is_followed_once_an_election_names_another():
    with FakeCluster(3, 20) as c:
        kc = KafkaClient(c.bootstrap, timeout_s=5, max_attempts=None, retry_timeout_s=20)
        with kc:
            assert offsets_of(kc.fetch(TOPIC, 0, 0, 1)) == list(range(5))
            c.brokers[1].stop()
            # The survivors still name the dead broker until "the controller" elects another.
            for b in (2, 3):
                c.brokers[b].stale_view = {0: (1, 0)}

            def elect() -> None:
                time.sleep(1.0)
                c.elect(0, 2)
                for b in (2, 3):
                    c.brokers[b].stale_view = None

            t = threading.Thread(target=elect)
            t.start()
            try:
                assert offsets_of(kc.fetch(TOPIC, 0, 5, 1)) == list(range(5, 10))
            finally:
                t.join()
            assert [
                (fp.fetch_offset, fp.current_leader_epoch) for fp in fetch_partitions(c.brokers[2])
            ] == [(5, 1)]


def test_a_spent_time_budget_names_the_partition():
    with FakeCluster(1, 20) as c:
        kc = KafkaClient(c.bootstrap, timeout_s=2, max_attempts=None, retry_timeout_s=1.0)
        with kc:
            assert kc.list_offset(TOPIC, 0, -1) == 20
            c.brokers[1].stop()
            started = time.monotonic()
            with pytest.raises(
                BrokerUnavailable, match=r"ListOffsets t-0: gave up after \d+ attempt"
            ) as err:
                kc.list_offset(TOPIC, 0, -1)
            assert time.monotonic() - started < 10
            assert (err.value.topic, err.value.partition) == (TOPIC, 0) and err.value.attempts > 2


def test_retry_policy_backoff_doubles_up_to_its_cap_within_the_budget():
    policy = RetryPolicy(timeout_s=10, max_attempts=None, backoff_s=0.1, backoff_max_s=1.0)
    assert [policy.backoff(n) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    now = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    state = policy.start(clock=lambda: now[0], sleep=sleep)
    assert state.retry(backoff=False) and slept == []  # a hint: at once, counted
    while state.retry():
        pass
    assert sum(slept) <= 10 and slept[:5] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert state.attempts == 2 + len(slept) and not state.retry()
    with pytest.raises(ValueError):
        RetryPolicy(timeout_s=1, max_attempts=0, backoff_s=0.1, backoff_max_s=1.0)


# --- the reader ------------------------------------------------------------------------


def read(
    log: NetworkLog, start: int, end: int, *, fail_on_data_loss: bool = True, after_batch=None
):  # noqa: ANN001
    """(offset, value) of every record NetworkLog.read yields; ``after_batch(i, offset)``
    runs after the i-th Arrow batch."""
    out = []
    r = OffsetRange(TOPIC, 0, start, end)
    for i, batch in enumerate(
        log.read(
            r,
            RecordBounds(),
            include_headers=False,
            fail_on_data_loss=fail_on_data_loss,
            max_rows=1000,
        )
    ):
        rows = batch.to_pydict()
        out += list(zip(rows["offset"], rows["value"], strict=True))
        if after_batch is not None:
            after_batch(i, out[-1][0] + 1)
    return out


def expected(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(o, b"v%d" % o) for o in range(start, end)]


def small_fetches(**kw) -> NetworkSettings:  # noqa: ANN003
    return NetworkSettings(fetch_max_bytes=1, retry_timeout_s=kw.pop("retry_timeout_s", 20), **kw)


def test_reader_follows_leaders_mid_read_and_yields_every_record_once():
    with FakeCluster(3, 200) as c:
        log = NetworkLog(c.bootstrap, small_fetches())

        def churn(i: int, offset: int) -> None:
            if i == 3:  # the leader dies; the next one is elected at once
                c.brokers[1].stop()
                c.elect(0, 2)
            elif i == 10:  # a move with a hint
                c.brokers[2].hints = True
                c.elect(0, 3)
            elif i == 20:  # a move the old leader only refuses
                c.elect(0, 2)

        assert read(log, 0, 200, after_batch=churn) == expected(0, 200)
        assert min(fp.fetch_offset for fp in fetch_partitions(c.brokers[3])) == 55
        assert max(fp.fetch_offset for fp in fetch_partitions(c.brokers[1])) == 15


def test_reader_waits_for_a_new_leaders_high_watermark():
    with FakeCluster(2, 100) as c:
        log = NetworkLog(c.bootstrap, small_fetches())
        timers = []

        def elect(i: int, offset: int) -> None:
            if i == 9:  # at offset 50: broker 2 leads, its high watermark still 30
                c.brokers[1].stop()
                c.brokers[2].high_watermark = 30
                c.elect(0, 2)
                timers.append(
                    threading.Timer(1.0, lambda: setattr(c.brokers[2], "high_watermark", None))
                )
                timers[-1].start()

        try:
            assert read(log, 0, 100, after_batch=elect) == expected(0, 100)
        finally:
            for t in timers:
                t.join()
        empty = [fp.fetch_offset for fp in fetch_partitions(c.brokers[2])]
        assert empty[0] == 50 and empty.count(50) >= 2  # asked again, never past it


def test_reader_gives_up_on_a_planned_end_that_never_comes():
    with FakeCluster(1, 100) as c:
        c.brokers[1].high_watermark = 40  # e.g. an unclean election truncated the log
        log = NetworkLog(c.bootstrap, small_fetches(retry_timeout_s=0.5))
        with pytest.raises(
            DataLossError, match=r"t-0: offsets \[40, 100\) were planned but leader 1"
        ):
            read(log, 0, 100)
        assert read(log, 0, 100, fail_on_data_loss=False) == expected(0, 40)


def test_network_options_reach_the_reader():
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:1,h:2",
            "kafka.max.partition.fetch.bytes": "1024",
            "kafka.default.api.timeout.ms": "90000",
            "kafka.request.timeout.ms": "5000",
            "kafka.retry.backoff.ms": "50",
            "kafka.retry.backoff.max.ms": "2000",
        },
        streaming=False,
    )
    assert opts.network == NetworkSettings(
        request_timeout_s=5.0,
        retry_timeout_s=90.0,
        retry_backoff_s=0.05,
        retry_backoff_max_s=2.0,
        fetch_max_bytes=1024,
    )
    log = NetworkLog(opts.bootstrap_servers, opts.network)
    copy = pickle.loads(pickle.dumps(log))
    assert copy.settings == opts.network and copy.bootstrap_servers == "h:1,h:2"
    policy = copy.new_client().retry_policy
    assert (policy.timeout_s, policy.max_attempts, policy.backoff_s, policy.backoff_max_s) == (
        90.0,
        None,
        0.05,
        2.0,
    )
    assert (
        parse_options({"kafka.bootstrap.servers": "h:1"}, streaming=False).network
        == NetworkSettings()
    )
    for bad in (
        {"kafka.retry.backoff.ms": "500", "kafka.retry.backoff.max.ms": "100"},
        {"kafka.max.partition.fetch.bytes": "0"},
        {"kafka.default.api.timeout.ms": "soon"},
    ):
        with pytest.raises(InvalidOptionError, match="kafka"):
            parse_options({"kafka.bootstrap.servers": "h:1", **bad}, streaming=False)
