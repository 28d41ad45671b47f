"""Transactions with real clients: confluent-kafka, kafka-python and aiokafka.

Each test starts its own broker. What is checked:
- a committed transaction is read by read_committed consumers, an aborted one only
  by read_uncommitted ones, across partitions;
- an open transaction holds the last stable offset (ListOffsets and fetches under
  read_committed stop there) until it ends;
- consume-transform-produce: offsets sent to the transaction become the group's
  committed offsets only when it commits;
- a second producer with the same transactional.id fences the first;
- the transaction state, the producer state and the aborted-transaction index
  survive SIGTERM and SIGKILL; an open transaction left by a killed producer is
  aborted at its timeout after the restart;
- a lost ``.txnindex`` file is rebuilt from the log after a crash;
- on the wire: a transactional batch outside a transaction gets INVALID_TXN_STATE, a
  control batch from a client INVALID_RECORD, and OffsetFetch with require_stable
  UNSTABLE_OFFSET_COMMIT while a transactional commit is pending.
"""

from __future__ import annotations

import asyncio
import glob
import os
import time

import pytest

import logstore
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.offset_commit import OffsetFetchRequest
from logstore.protocol.messages.produce import ProduceRequest
from tests.support.waiting import wait_until

from .clients import create_topic, kcat, wire_call

FAST_TIMEOUTS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


def _producer(bootstrap: str, transactional_id: str, **extra):
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **extra,
        }
    )
    p.init_transactions(20)
    return p


def _read(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    expected: int,
    timeout: float = 15.0,
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, key) of every message read from offset 0 (waits for
    ``expected`` of them, then a little more for any extra)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if len(out) >= expected:
                    break
                continue
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key()))
        return sorted(out)
    finally:
        c.close()


def _stable_end(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(read_committed end, read_uncommitted end) of a partition, by ListOffsets."""
    from confluent_kafka import Consumer, TopicPartition

    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation}
        )
        try:
            ends.append(c.get_watermark_offsets(TopicPartition(topic, partition), 10)[1])
        finally:
            c.close()
    return ends[0], ends[1]


def _offset_for_time(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    """(read_committed, read_uncommitted) offset of the first record at or after
    ``timestamp`` in partition 0 (-1: none)."""
    from confluent_kafka import Consumer, TopicPartition

    found = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "times", "isolation.level": isolation}
        )
        try:
            found.append(c.offsets_for_times([TopicPartition(topic, 0, timestamp)], 10)[0].offset)
        finally:
            c.close()
    return found[0], found[1]


def test_confluent_commit_and_abort_across_partitions(broker_factory):
    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "tx", 2)
    p = _producer(b.bootstrap, "t-commit-abort")
    p.begin_transaction()
    for i in range(6):
        p.produce("tx", key=b"c%d" % i, value=b"commit", partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(6):
        p.produce("tx", key=b"a%d" % i, value=b"abort", partition=i % 2)
    p.flush(20)
    p.abort_transaction(20)
    p.begin_transaction()
    for i in range(4):
        p.produce("tx", key=b"d%d" % i, value=b"commit", partition=i % 2)
    p.commit_transaction(20)

    committed = _read(b.bootstrap, "tx", 2, "read_committed", 10)
    assert sorted(k for _, _, k in committed) == sorted(
        [b"c%d" % i for i in range(6)] + [b"d%d" % i for i in range(4)]
    )
    everything = _read(b.bootstrap, "tx", 2, "read_uncommitted", 16)
    assert len(everything) == 16
    # Each partition: 3 committed, marker, 3 aborted, marker, 2 committed, marker.
    assert _stable_end(b.bootstrap, "tx", 0) == (11, 11)
    assert sorted(o for part, o, _ in committed if part == 0) == [0, 1, 2, 8, 9]


def test_open_transaction_holds_the_last_stable_offset(broker_factory):
    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "lso", 1)
    p = _producer(b.bootstrap, "t-lso")
    p.begin_transaction()
    p.produce("lso", key=b"first", value=b"x")
    p.commit_transaction(20)
    p.begin_transaction()
    open_ts = int(time.time() * 1000) + 1000
    p.produce("lso", key=b"open", value=b"x", timestamp=open_ts)
    p.flush(20)
    assert _stable_end(b.bootstrap, "lso") == (2, 3)
    # Offsets for times stop at the same bound.
    assert _offset_for_time(b.bootstrap, "lso", open_ts) == (-1, 2)
    # A non-transactional producer writes after the open transaction: read_committed
    # consumers still stop at the open transaction's first offset.
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce("lso", key=b"plain", value=b"x")
    plain.flush(20)
    assert [k for _, _, k in _read(b.bootstrap, "lso", 1, "read_committed", 1, timeout=3)] == [
        b"first"
    ]
    p.commit_transaction(20)
    assert [k for _, _, k in _read(b.bootstrap, "lso", 1, "read_committed", 3)] == [
        b"first",
        b"open",
        b"plain",
    ]
    assert _stable_end(b.bootstrap, "lso") == (5, 5)


def test_confluent_send_offsets_to_transaction(broker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "in", 1)
    create_topic(b.bootstrap, "out", 1)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        plain.produce("in", key=b"%d" % i, value=b"v%d" % i)
    plain.flush(20)

    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "eos",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.subscribe(["in"])
    p = _producer(b.bootstrap, "t-eos")

    def transform(n: int, commit: bool) -> None:
        msgs = []
        deadline = time.monotonic() + 20
        while len(msgs) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                msgs.append(m)
        assert len(msgs) == n
        p.begin_transaction()
        for m in msgs:
            p.produce("out", key=m.key(), value=m.value().upper())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)

    transform(4, commit=True)
    assert c.committed([TopicPartition("in", 0)], 10)[0].offset == 4
    transform(3, commit=False)
    assert c.committed([TopicPartition("in", 0)], 10)[0].offset == 4
    c.close()
    assert [k for _, _, k in _read(b.bootstrap, "out", 1, "read_committed", 4)] == [
        b"0",
        b"1",
        b"2",
        b"3",
    ]

    b.restart()
    c2 = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": "eos", "isolation.level": "read_committed"}
    )
    try:
        assert c2.committed([TopicPartition("in", 0)], 10)[0].offset == 4
    finally:
        c2.close()


def test_a_new_producer_instance_fences_the_old_one(broker_factory):
    from confluent_kafka import KafkaException

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "fence", 1)
    old = _producer(b.bootstrap, "t-fence")
    old.begin_transaction()
    old.produce("fence", key=b"old", value=b"x")
    old.flush(20)
    new = _producer(b.bootstrap, "t-fence")  # aborts old's open transaction
    with pytest.raises(KafkaException) as e:
        old.produce("fence", key=b"old2", value=b"x")
        old.commit_transaction(20)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    new.begin_transaction()
    new.produce("fence", key=b"new", value=b"x")
    new.commit_transaction(20)
    assert [k for _, _, k in _read(b.bootstrap, "fence", 1, "read_committed", 1)] == [b"new"]


def test_kafka_python_transactions(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "kp", 1)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="t-kafka-python")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send("kp", key=b"k%d" % i, value=b"v")
    p.commit_transaction()
    p.begin_transaction()
    p.send("kp", key=b"aborted", value=b"v")
    p.abort_transaction()
    p.close()
    c = KafkaConsumer(
        "kp",
        bootstrap_servers=b.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    try:
        assert [m.key for m in c] == [b"k0", b"k1", b"k2"]
    finally:
        c.close()


def test_aiokafka_transactions_with_offsets(broker_factory):
    import aiokafka
    from aiokafka.structs import TopicPartition

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "aio-in", 1)
    create_topic(b.bootstrap, "aio-out", 1)

    async def main():
        plain = aiokafka.AIOKafkaProducer(bootstrap_servers=b.bootstrap)
        await plain.start()
        for i in range(5):
            await plain.send_and_wait("aio-in", key=b"%d" % i, value=b"v")
        await plain.stop()

        p = aiokafka.AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="t-aiokafka")
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send("aio-out", key=b"c%d" % i, value=b"v")
                await p.send_offsets_to_transaction({TopicPartition("aio-in", 0): 3}, "aio-group")
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send("aio-out", key=b"aborted", value=b"v")
                    await p.send_offsets_to_transaction(
                        {TopicPartition("aio-in", 0): 5}, "aio-group"
                    )
                    raise RuntimeError("abort")
        finally:
            await p.stop()

        c = aiokafka.AIOKafkaConsumer(
            "aio-out",
            bootstrap_servers=b.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            group_id="aio-group",
        )
        await c.start()
        try:
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got += [m.key for m in msgs]
            assert got == [b"c0", b"c1", b"c2"]
            assert await c.committed(TopicPartition("aio-in", 0)) == 3
        finally:
            await c.stop()

    asyncio.run(main())


def test_transactions_survive_sigterm_and_sigkill(broker_factory):
    b = broker_factory({**FAST_TIMEOUTS, "transaction.max.timeout.ms": "60000"})
    create_topic(b.bootstrap, "dur", 1)
    p = _producer(b.bootstrap, "t-durable")
    p.begin_transaction()
    p.produce("dur", key=b"committed", value=b"x")
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce("dur", key=b"aborted", value=b"x")
    p.flush(20)
    p.abort_transaction(20)
    killed = _producer(b.bootstrap, "t-left-open", **{"transaction.timeout.ms": 10000})
    killed.begin_transaction()
    killed.produce("dur", key=b"left-open", value=b"x")
    killed.flush(20)
    assert _stable_end(b.bootstrap, "dur") == (4, 5)

    # Clean stop: the producer snapshot carries the open transaction's first offset.
    b.restart()
    assert _stable_end(b.bootstrap, "dur") == (4, 5)
    assert [k for _, _, k in _read(b.bootstrap, "dur", 1, "read_committed", 1, timeout=3)] == [
        b"committed"
    ]

    # Unclean stop: the log is replayed; the open transaction times out afterwards.
    b.kill()
    b.start()
    wait_until(
        lambda: _stable_end(b.bootstrap, "dur") == (6, 6),
        timeout=30,
        message="open transaction aborted at its timeout",
    )
    assert [k for _, _, k in _read(b.bootstrap, "dur", 1, "read_committed", 1, timeout=3)] == [
        b"committed"
    ]
    assert len(_read(b.bootstrap, "dur", 1, "read_uncommitted", 3)) == 3
    # The producer that was left open is fenced: its id's epoch moved on.
    survivor = _producer(b.bootstrap, "t-left-open")
    survivor.begin_transaction()
    survivor.produce("dur", key=b"after", value=b"x")
    survivor.commit_transaction(20)
    assert [k for _, _, k in _read(b.bootstrap, "dur", 1, "read_committed", 2)] == [
        b"committed",
        b"after",
    ]


def test_lost_transaction_index_is_rebuilt_after_a_crash(broker_factory):
    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "idx", 1)
    p = _producer(b.bootstrap, "t-index")
    for commit in (False, True, False):
        p.begin_transaction()
        p.produce("idx", key=b"commit" if commit else b"abort", value=b"x")
        p.flush(20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    b.kill()
    index_files = glob.glob(os.path.join(b.data_dir, "idx-0", "*.txnindex"))
    assert len(index_files) == 1 and os.path.getsize(index_files[0]) == 2 * 34
    with open(index_files[0], "r+b") as f:
        f.truncate(34 + 10)  # the second entry is cut mid-way, as by a crash
    b.start()
    assert [k for _, _, k in _read(b.bootstrap, "idx", 1, "read_committed", 1, timeout=3)] == [
        b"commit"
    ]
    assert os.path.getsize(index_files[0]) == 2 * 34


def _produce_request(
    topic: str, batch: bytes, transactional_id: str | None = None
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )


def test_wire_errors_for_batches_outside_a_transaction(broker_factory):
    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "wire", 1)
    batch = logstore.encode_batch(
        [(b"k", b"v", [], 0)],
        producer_id=4242,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    r = wire_call(b.bootstrap, _produce_request("wire", batch, "nobody"), 9)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TXN_STATE
    marker = logstore.encode_control_batch(1, producer_id=4242, producer_epoch=0)
    r = wire_call(b.bootstrap, _produce_request("wire", marker), 9)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert _stable_end(b.bootstrap, "wire") == (0, 0)


def test_offset_fetch_require_stable_sees_a_pending_commit(broker_factory):
    from confluent_kafka import Consumer, TopicPartition

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "stable", 1)
    p = _producer(b.bootstrap, "t-stable")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "stable-group"})
    p.begin_transaction()
    p.produce("stable", key=b"k", value=b"v")
    p.send_offsets_to_transaction([TopicPartition("stable", 0, 7)], c.consumer_group_metadata(), 20)
    p.flush(20)

    def fetch(require_stable: bool):
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id="stable-group",
                    topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name="stable", partition_indexes=[0]
                        )
                    ],
                )
            ],
            require_stable=require_stable,
        )
        part = wire_call(b.bootstrap, request, 8).groups[0].topics[0].partitions[0]
        return part.error_code, part.committed_offset

    assert fetch(True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch(False) == (0, -1)
    p.commit_transaction(20)
    assert fetch(True) == (0, 7)
    c.close()


def test_kafka_python_admin_finds_and_aborts_a_hanging_transaction(broker_factory):
    """kafka-python's KIP-664 admin calls: ListTransactions, DescribeTransactions,
    DescribeProducers, then WriteTxnMarkers to abort the transaction by hand."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin._transactions import AbortTransactionSpec
    from kafka.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "hang", 1)
    p = _producer(b.bootstrap, "t-hanging")
    p.begin_transaction()
    p.produce("hang", key=b"k", value=b"v")
    p.flush(20)
    done = _producer(b.bootstrap, "t-done")
    done.begin_transaction()
    done.produce("hang", key=b"done", value=b"v")
    done.commit_transaction(20)

    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        listed = {
            t.transactional_id: t.state.value
            for txns in admin.list_transactions().values()
            for t in txns
        }
        assert listed == {"t-hanging": "Ongoing", "t-done": "CompleteCommit"}
        ongoing = [
            t.transactional_id
            for txns in admin.list_transactions(state_filters=["Ongoing"]).values()
            for t in txns
        ]
        assert ongoing == ["t-hanging"]
        described = admin.describe_transactions(["t-hanging"])["t-hanging"]
        assert described.state.value == "Ongoing"
        assert described.topic_partitions == {TopicPartition("hang", 0)}
        tp = TopicPartition("hang", 0)
        producers = {s.producer_id: s for s in admin.describe_producers([tp])[tp].active_producers}
        hanging = producers[described.producer_id]
        assert (hanging.producer_epoch, hanging.current_transaction_start_offset) == (
            described.producer_epoch,
            0,
        )
        assert _stable_end(b.bootstrap, "hang") == (0, 3)
        # No marker of this producer's coordinator reached the partition yet, so the
        # tool's coordinator epoch -1 passes; an older producer epoch does not.
        assert hanging.coordinator_epoch == -1
        with pytest.raises(InvalidProducerEpochError):
            admin.abort_transaction(
                AbortTransactionSpec(tp, hanging.producer_id, hanging.producer_epoch - 1, -1)
            )
        admin.abort_transaction(
            AbortTransactionSpec(tp, hanging.producer_id, hanging.producer_epoch, -1)
        )
        assert _stable_end(b.bootstrap, "hang") == (4, 4)
        assert [k for _, _, k in _read(b.bootstrap, "hang", 1, "read_committed", 1)] == [b"done"]
        # Once the coordinator's marker is there, a marker of an older coordinator epoch is fenced.
        p.abort_transaction(20)
        assert admin.describe_producers([tp])[tp].active_producers[0].coordinator_epoch >= 0
        with pytest.raises(TransactionCoordinatorFencedError):
            admin.abort_transaction(
                AbortTransactionSpec(tp, hanging.producer_id, hanging.producer_epoch, -1)
            )
    finally:
        admin.close()


def test_spark_kafka_client_drops_aborted_batches_the_broker_lists(broker_factory):
    """The Spark source's network reader (read_committed) leaves out what the
    broker's aborted-transaction list names, and reads past a fetch of only
    aborted data."""
    from logstore.spark.kafka_client import KafkaClient

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "spark-tx", 1)
    p = _producer(b.bootstrap, "t-spark")
    for keys, commit in (
        ([b"a0", b"a1"], False),
        ([b"c0", b"c1"], True),
        ([b"a2"], False),
        ([b"c2"], True),
    ):
        p.begin_transaction()
        for k in keys:
            p.produce("spark-tx", key=k, value=b"v")
        p.flush(20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    with KafkaClient(b.bootstrap) as client:
        keys, offset = [], 0
        while True:
            data = client.fetch("spark-tx", 0, offset, max_bytes=200)
            if not data:
                break
            for batch in logstore.decode_batches(data):
                if not batch.is_control:
                    keys += [r.key for r in batch.records if r.offset >= offset]
                offset = batch.last_offset + 1
    assert keys == [b"c0", b"c1", b"c2"]


def test_kcat_reads_committed_transactions_only(broker_factory):
    """kcat (Debian's librdkafka 2.0.2) with isolation.level=read_committed."""
    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "kcat-tx", 1)
    p = _producer(b.bootstrap, "t-kcat")
    for key, commit in ((b"one", True), (b"aborted", False), (b"two", True)):
        p.begin_transaction()
        p.produce("kcat-tx", key=key, value=b"v")
        p.flush(20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    committed = kcat(
        b.bootstrap,
        "-C",
        "-t",
        "kcat-tx",
        "-e",
        "-f",
        "%k\n",
        "-X",
        "isolation.level=read_committed",
    )
    assert committed.stdout.split() == [b"one", b"two"]
    everything = kcat(
        b.bootstrap,
        "-C",
        "-t",
        "kcat-tx",
        "-e",
        "-f",
        "%k\n",
        "-X",
        "isolation.level=read_uncommitted",
    )
    assert everything.stdout.split() == [b"one", b"aborted", b"two"]


def test_committed_transactions_survive_sigkill_mid_stream(broker_factory):
    """A producer commits transactions of 10 records in a loop while the broker is
    SIGKILLed. After the restart, every transaction whose commit returned is read
    whole under read_committed, every transaction read is whole (one whose commit
    was cut off may have committed, or be aborted at its timeout), and nothing is
    read twice."""
    import threading

    from confluent_kafka import KafkaException

    b = broker_factory(FAST_TIMEOUTS)
    create_topic(b.bootstrap, "crash-tx", 2)
    p = _producer(
        b.bootstrap, "t-crash", **{"transaction.timeout.ms": 3000, "message.timeout.ms": 3000}
    )
    committed: list[int] = []
    stop = threading.Event()

    def produce():
        n = 0
        while not stop.is_set():
            try:
                p.begin_transaction()
                for j in range(10):
                    p.produce("crash-tx", key=b"%d-%d" % (n, j), value=b"v", partition=j % 2)
                p.commit_transaction(10)
            except KafkaException:
                return
            committed.append(n)
            n += 1

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: len(committed) >= 20, timeout=60, message="20 committed transactions")
    b.kill()
    stop.set()
    t.join(30)
    b.start()
    wait_until(
        lambda: all(a == c for a, c in (_stable_end(b.bootstrap, "crash-tx", p) for p in (0, 1))),
        timeout=30,
        message="every transaction ended after the restart",
    )
    keys = [
        k for _, _, k in _read(b.bootstrap, "crash-tx", 2, "read_committed", 10 * len(committed))
    ]
    assert len(keys) == len(set(keys))
    by_txn: dict[int, int] = {}
    for k in keys:
        n = int(k.split(b"-")[0])
        by_txn[n] = by_txn.get(n, 0) + 1
    assert set(committed) <= set(by_txn), sorted(set(committed) - set(by_txn))
    assert all(count == 10 for count in by_txn.values()), by_txn
