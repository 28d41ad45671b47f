"""The replica manager's read path (``ReplicaManager.fetch_messages``) driven without
sockets: a consumer's and a follower's reads, the errors a read answers, long polls
that complete on appends, leadership changes and expiry."""

from __future__ import annotations

import asyncio

import logstore
from broker_py.replication.fetch_data import FetchParams, ToConvert
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.server.fetch_session import NULL_UUID, CachedPartition
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

ME = 1
FOLLOWER = 2


def batch(n: int = 1) -> bytes:
    return logstore.encode_batch([(b"k", b"v%d" % i, [], 1_700_000_000_000) for i in range(n)])


def fetch_at(offset: int, topic: str = "t", index: int = 0, **kw) -> CachedPartition:
    return CachedPartition(topic, NULL_UUID, index, offset, 1 << 20, **kw)


def consumer(min_bytes: int = 1, max_wait_ms: int = 0, **kw) -> FetchParams:
    return FetchParams(-1, max_wait_ms, min_bytes, 1 << 20, **kw)


def follower(min_bytes: int = 1, max_wait_ms: int = 0) -> FetchParams:
    return FetchParams(FOLLOWER, max_wait_ms, min_bytes, 1 << 20)


def leader(logs, isr=(ME,), replicas=(ME,)):
    time = MockTime()
    manager = ReplicaManager(ME, lambda topic: 1, time)
    partition = manager.make_leader("t", 0, logs("t-0"), 0, list(isr), list(replicas))
    return manager, partition, time


def append(manager, n: int = 1, acks: int = 1, answers=None) -> None:
    callback = (lambda r: None) if answers is None else answers.append
    manager.append_records(1000, acks, [("t", [(0, batch(n), None)])], callback)


def test_a_consumer_reads_up_to_the_high_watermark_and_a_follower_to_the_log_end(logs):
    manager, partition, _ = leader(logs, isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER))
    append(manager, 3)
    assert partition.high_watermark == 0 and partition.log_end_offset == 3
    (read,) = manager.fetch_messages(consumer(), [fetch_at(0)])
    assert (read.error_code, read.high_watermark, read.records) == (0, 0, b"")
    assert read.partition is partition
    (read,) = manager.fetch_messages(follower(), [fetch_at(0)])
    assert read.error_code == 0 and len(read.records) == len(batch(3))
    # the follower's next fetch offset is its log end: the high watermark follows it
    (read,) = manager.fetch_messages(follower(), [fetch_at(3)])
    assert partition.high_watermark == 3 and read.high_watermark == 3
    (read,) = manager.fetch_messages(consumer(), [fetch_at(0)])
    assert len(read.records) == len(batch(3))


def test_a_follower_fetch_completes_a_waiting_acks_all_produce(logs):
    manager, partition, _ = leader(logs, isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER))
    answers = []
    append(manager, 2, acks=-1, answers=answers)
    assert answers == []
    manager.fetch_messages(follower(), [fetch_at(0)])
    assert answers == []
    manager.fetch_messages(follower(), [fetch_at(2)])
    ((_, [result]),) = answers[0]
    assert (result.error_code, result.base_offset) == (0, 0)


def test_a_diverging_follower_gets_the_epoch_to_truncate_to_and_no_records(logs):
    manager, partition, _ = leader(logs, isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER))
    append(manager, 2)
    partition.make_leader(3, [ME, FOLLOWER], [ME, FOLLOWER])
    append(manager, 1)
    # the follower holds epoch 0 up to offset 5: this leader's epoch 0 ends at 2
    (read,) = manager.fetch_messages(follower(), [fetch_at(5, last_fetched_epoch=0)])
    assert read.diverging == (0, 2) and read.records == b""
    assert partition.remote_replicas[FOLLOWER].log_end_offset != 5  # not recorded


def test_what_a_read_answers_without_reading(logs):
    manager, partition, _ = leader(logs)
    append(manager, 1)
    infos = [
        fetch_at(0, topic="secret"),
        fetch_at(0, topic="gone"),
        fetch_at(0, current_leader_epoch=7),
        fetch_at(0),
    ]
    reads = manager.fetch_messages(consumer(denied={"secret"}), infos)
    assert [r.error_code for r in reads] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        0,
    ]
    assert len(reads[3].records) == len(batch(1))
    # a partition the cluster has elsewhere sends the client to refresh its metadata
    manager.partition_exists = lambda topic, index: topic == "gone"
    (read,) = manager.fetch_messages(consumer(), [fetch_at(0, topic="gone")])
    assert read.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # a topic id no topic has any longer
    params = consumer(topic_name=lambda fp: None)
    (read,) = manager.fetch_messages(params, [fetch_at(0)])
    assert read.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_old_versions_get_a_slice_to_convert_down(logs):
    manager, _, _ = leader(logs)
    append(manager, 2)
    params = consumer(down_convert=True, down_convert_max_bytes=1 << 20)
    (read,) = manager.fetch_messages(params, [fetch_at(0)])
    assert type(read.records) is ToConvert and len(read.records) == len(batch(2))


def test_a_consumer_sent_to_a_follower_in_its_rack_is_answered_at_once(logs):
    manager, partition, _ = leader(logs, isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER))
    append(manager, 1)
    manager.fetch_messages(follower(), [fetch_at(1)])
    params = consumer(
        min_bytes=1 << 20,
        max_wait_ms=500,
        selector="org.apache.kafka.common.replica.RackAwareReplicaSelector",
        client_rack="b",
        replica_racks=lambda p: {ME: "a", FOLLOWER: "b"},
    )
    (read,) = manager.fetch_messages(params, [fetch_at(0)])
    assert read.preferred_read_replica == FOLLOWER and read.records == b""


def test_a_long_poll_completes_on_appends_and_on_losing_leadership(logs):
    async def run():
        manager, partition, time = leader(logs)
        pending = manager.fetch_messages(consumer(2 * len(batch(1)), 500), [fetch_at(0)])
        assert isinstance(pending, asyncio.Future)
        append(manager)
        time.advance(0)
        assert not pending.done()
        append(manager)
        time.advance(0)
        (read,) = pending.result()
        assert len(read.records) == 2 * len(batch(1)) and read.high_watermark == 2
        # a fetch waiting on a partition this broker stops leading answers its error
        waiting = manager.fetch_messages(consumer(1, 500), [fetch_at(2)])
        assert not waiting.done()
        partition.make_follower(FOLLOWER, 1, [FOLLOWER, ME], [ME, FOLLOWER])
        manager.fetch_purgatory.complete_all(("t", 0))
        (read,) = waiting.result()
        assert read.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert manager.fetch_purgatory.watched() == 0

    asyncio.run(run())


def test_a_long_poll_that_waits_in_vain_answers_at_its_timeout(logs):
    async def run():
        manager, _, time = leader(logs)
        pending = manager.fetch_messages(consumer(1, 500), [fetch_at(0)])
        time.advance(0.499)
        assert not pending.done()
        time.advance(0.001)
        (read,) = pending.result()
        assert (read.error_code, read.records, read.high_watermark) == (0, b"", 0)
        assert manager.fetch_purgatory.watched() == 0

    asyncio.run(run())


def test_a_high_watermark_move_rereads_consumers_waiting_fetches_not_followers(logs):
    """A follower catching up moves the high watermark without an append: a consumer's
    waiting fetch is read again (and completes), a follower's is not (it reads up to the
    log end, which did not move) until the next append."""

    async def run():
        manager, partition, time = leader(logs, isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER))
        reads: list[int] = []
        read = manager.read_from_local_log

        def counting(params, infos):
            reads.append(params.replica_id)
            return read(params, infos)

        manager.read_from_local_log = counting
        waiting_consumer = manager.fetch_messages(consumer(1, 500), [fetch_at(0)])
        append(manager)
        time.advance(0)
        assert not waiting_consumer.done()  # the high watermark is still 0
        manager.fetch_messages(follower(), [fetch_at(0)])
        waiting_follower = manager.fetch_messages(follower(1, 500), [fetch_at(1)])
        assert partition.high_watermark == 1 and not waiting_follower.done()
        reads.clear()
        time.advance(0)
        assert reads == [-1]  # the consumer's fetch only
        (got,) = waiting_consumer.result()
        assert len(got.records) == len(batch(1)) and not waiting_follower.done()
        append(manager)
        time.advance(0)
        (got,) = waiting_follower.result()
        assert len(got.records) == len(batch(1))
        assert manager.fetch_purgatory.watched() == 0

    asyncio.run(run())
