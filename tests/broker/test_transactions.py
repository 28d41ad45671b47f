"""Transactions below the wire: the ``__transaction_state`` record format, the
``.txnindex`` files, the producer state's ongoing transactions, partition markers,
and the transaction coordinator over a real broker (real logs under ``tmp_path``, no
sockets)."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

import logstore
from broker_py.cluster.partition import Partition
from broker_py.common.internal_topics import TRANSACTION_STATE_TOPIC
from broker_py.config.kafka_config import BrokerConfig
from broker_py.coordinator.transaction.transaction_log import (
    InvalidTransactionRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from broker_py.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)
from broker_py.log.producer_state import ProducerStateManager
from broker_py.log.transaction_index import AbortedTxn, TransactionIndex
from broker_py.log.unified_log import UnifiedLog
from broker_py.server.kafka_server import KafkaServer, new_transaction_coordinator
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)

E = ErrorCode
S = TransactionState


# ---- __transaction_state records ----


def _kafka_value_v0(pid, epoch, timeout, status, partitions, last_update, start) -> bytes:
    """TransactionLogValue v0 assembled with struct, from the schema's field order."""
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update, start)


def test_transaction_log_records_match_kafkas_bytes():
    txn = TransactionMetadata(
        "app-1", 42, 3, 60000, S.ONGOING, {("orders", 1), ("orders", 0), ("audit", 2)}, 1000, 2000
    )
    assert encode_key("app-1") == struct.pack(">hh", 0, 5) + b"app-1"
    assert decode_key(encode_key("app-1")) == "app-1"
    expected = _kafka_value_v0(42, 3, 60000, 1, [("audit", [2]), ("orders", [0, 1])], 2000, 1000)
    assert encode_value(txn) == expected
    back = decode_value("app-1", expected)
    assert (back.producer_id, back.producer_epoch, back.txn_timeout_ms, back.state) == (
        42,
        3,
        60000,
        S.ONGOING,
    )
    assert back.partitions == txn.partitions
    assert (back.txn_start_timestamp, back.txn_last_update_timestamp) == (1000, 2000)
    # A null partition list (as Kafka writes for Empty) reads as no partitions.
    assert decode_value("x", _kafka_value_v0(1, 0, 100, 0, None, 5, -1)).partitions == set()


def test_transaction_log_reads_the_flexible_v1_value():
    # v1: compact strings/arrays (length + 1), a tagged-field section after each struct.
    body = struct.pack(">hqhib", 1, 7, 2, 900, 4)
    body += bytes([2])  # one partition entry
    body += bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 3) + bytes([0])
    body += struct.pack(">qq", 11, 10)
    body += bytes([1, 0, 8]) + struct.pack(">q", 6)  # tag 0 (PreviousProducerId) = 6
    txn = decode_value("id", body)
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions) == (
        7,
        2,
        S.COMPLETE_COMMIT,
        {("t", 3)},
    )


@pytest.mark.parametrize(
    "key, value",
    [
        (b"\x00", None),
        (struct.pack(">hh", 1, 1) + b"x", None),
        (struct.pack(">hh", 0, 9) + b"x", None),
        (None, b"\x00"),
        (None, struct.pack(">h", 9) + b"\x00" * 40),
        (None, _kafka_value_v0(1, 0, 100, 0, None, 5, -1) + b"extra"),
        (None, _kafka_value_v0(1, 0, 100, 42, None, 5, -1)),
        (None, _kafka_value_v0(1, 0, 100, 0, None, 5, -1)[:-3]),
    ],
)
def test_transaction_log_rejects_bad_records(key, value):
    with pytest.raises(InvalidTransactionRecordError):
        if key is not None:
            decode_key(key)
        else:
            decode_value("id", value)


# ---- .txnindex ----


def test_transaction_index_appends_collects_and_reloads(tmp_path):
    d = str(tmp_path)
    idx = TransactionIndex(d, 0, 100)
    idx.append(AbortedTxn(1, 0, 5, 6), 0)
    idx.append(AbortedTxn(2, 3, 9, 10), 0)
    idx.append(AbortedTxn(1, 20, 30, 31), 20)
    assert sorted(os.listdir(d)) == [
        "00000000000000000000.txnindex",
        "00000000000000000020.txnindex",
    ]
    assert os.path.getsize(os.path.join(d, "00000000000000000000.txnindex")) == 2 * 34
    assert [t.producer_id for t in idx.collect(6, 25)] == [
        2,
        1,
    ]  # [6, 25): 2's txn (ends 9) and 1's (starts 20)
    assert idx.collect(10, 20) == []
    assert idx.collect(0, 1) == [AbortedTxn(1, 0, 5, 6)]
    reloaded = TransactionIndex(d, 0, 100)
    assert reloaded.collect(0, 100) == idx.collect(0, 100)
    assert reloaded.contains(2, 9) and not reloaded.contains(1, 9)


def test_transaction_index_drops_what_a_crash_or_retention_left(tmp_path):
    d = str(tmp_path)
    idx = TransactionIndex(d, 0, 100)
    for i in range(3):
        idx.append(AbortedTxn(1, i * 10, i * 10 + 5, i * 10 + 6), 0)
    idx.append(AbortedTxn(1, 50, 55, 56), 50)
    path = os.path.join(d, "00000000000000000000.txnindex")
    with open(path, "r+b") as f:
        f.truncate(2 * 34 + 7)  # a torn third entry
    # The log now ends at 15: entries whose marker is at 15 or past it go too.
    idx = TransactionIndex(d, 0, 15)
    assert idx.collect(0, 100) == [AbortedTxn(1, 0, 5, 6)]
    assert os.path.getsize(path) == 34
    assert not os.path.exists(os.path.join(d, "00000000000000000050.txnindex"))
    idx.append(AbortedTxn(3, 12, 14, 15), 0)
    assert os.path.getsize(path) == 2 * 34
    idx.truncate_to(14)
    assert len(idx) == 1 and os.path.getsize(path) == 34
    assert idx.delete_before(6) == 1
    assert len(idx) == 0 and os.listdir(d) == []


def test_transaction_index_ignores_an_unknown_entry_version(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 1, 2) + struct.pack(">hqqqq", 7, 1, 3, 4, 5))
    idx = TransactionIndex(str(tmp_path), 0, 10)
    assert idx.collect(0, 10) == [AbortedTxn(1, 0, 1, 2)]


# ---- producer state and partition markers ----


def txn_batch(pid: int, epoch: int, seq: int, n: int = 2, transactional: bool = True) -> bytes:
    return logstore.encode_batch(
        [(b"k%d" % i, b"v", [], 0) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


@pytest.fixture
def plog(tmp_path):
    log = logstore.Log.open(str(tmp_path / "t-0"))
    yield log
    if not log.closed:
        log.close()


def leader(plog) -> Partition:
    """A partition this broker (id 0) leads alone, over ``plog``."""
    part = Partition("t", 0, UnifiedLog("t", 0, plog), local_broker_id=0)
    part.make_leader(0, [0], [0])
    return part


def append(partition: Partition, data: bytes) -> int:
    """Appends as the leader would, the batch's transaction verified."""
    first, *_ = partition.append_records_to_leader(
        data, 1, 1, verify_transaction=lambda pid, epoch: ErrorCode.NONE
    )
    return first


def test_ongoing_transactions_set_the_last_stable_offset(plog):
    part = leader(plog)
    append(part, txn_batch(1, 0, 0))  # 0-1
    append(part, txn_batch(2, 0, 0))  # 2-3
    append(part, txn_batch(1, 0, 2))  # 4-5
    assert (part.last_stable_offset, part.high_watermark) == (0, 6)
    with pytest.raises(InvalidTxnStateError):
        part.log.producer_state.check(
            logstore.decode_batches(txn_batch(1, 0, 4, transactional=False), records=False)[0]
        )
    offset, txn = part.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 6
    assert offset == 6
    assert (txn.first_offset, txn.last_offset, txn.aborted) == (0, 6, True)
    assert part.last_stable_offset == 2
    assert part.aborted_transactions(0, 7) == [AbortedTxn(1, 0, 6, 2)]
    part.append_marker(2, 0, commit=True, coordinator_epoch=0)  # 7
    assert part.last_stable_offset == part.high_watermark == 8
    assert part.aborted_transactions(7, 8) == []
    # Markers from an older producer epoch or coordinator epoch are fenced.
    with pytest.raises(InvalidProducerEpochError):
        part.log.producer_state.check_marker(1, -1, 0)
    part.append_marker(2, 1, commit=False, coordinator_epoch=3)
    with pytest.raises(TransactionCoordinatorFencedError):
        part.append_marker(2, 1, commit=False, coordinator_epoch=2)


def test_ongoing_transactions_survive_a_snapshot_and_a_replay(tmp_path):
    path = str(tmp_path / "t-0")
    log = logstore.Log.open(path)
    part = leader(log)
    append(part, txn_batch(1, 0, 0))  # 0-1, aborted below
    part.append_marker(1, 0, commit=False, coordinator_epoch=0)  # 2
    append(part, txn_batch(1, 0, 2))  # 3-4, left open
    part.log.producer_state.write_snapshot()
    append(part, txn_batch(2, 5, 0))  # 5-6, open, after the snapshot
    log.close()

    log = logstore.Log.open(path)
    part = leader(log)
    assert part.log.producer_state.ongoing_transactions() == {1: 3, 2: 5}
    assert part.last_stable_offset == 3
    assert part.aborted_transactions(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    log.close()

    # Without snapshot or index, replaying the whole log finds the same state.
    for name in os.listdir(path):
        if name.endswith((".snapshot", ".txnindex")):
            os.unlink(os.path.join(path, name))
    log = logstore.Log.open(path)
    part = leader(log)
    assert part.log.producer_state.ongoing_transactions() == {1: 3, 2: 5}
    assert [
        (t.producer_id, t.first_offset, t.last_offset) for t in part.aborted_transactions(0, 10)
    ] == [(1, 0, 2)]
    log.close()


def test_producers_with_an_open_transaction_do_not_expire(plog):
    state = ProducerStateManager(plog)
    data = txn_batch(9, 0, 0)
    (b,) = logstore.decode_batches(data, records=False)
    first, last = plog.append(data)
    state.record(b, first, last)
    assert state.remove_expired(now_ms=1 << 50, expiration_ms=1) == 0


# ---- the coordinator ----


def make_broker(data_dir, **overrides) -> KafkaServer:
    props = {
        "log.dirs": str(data_dir),
        "listeners": "PLAINTEXT://127.0.0.1:19092",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.num.partitions": "3",
        **{k.replace("_", "."): str(v) for k, v in overrides.items()},
    }
    broker = KafkaServer(BrokerConfig(props))
    broker.startup_logs()
    return broker


def with_coordinator(data_dir, fn, **overrides):
    async def run():
        broker = make_broker(data_dir, **overrides)
        coordinator = new_transaction_coordinator(broker.apis)
        broker.apis.transaction_coordinator = coordinator
        await coordinator.start()
        try:
            return await fn(broker, coordinator)
        finally:
            await coordinator.stop()
            for p in broker.apis.replica_manager.partitions.values():
                p.log.producer_state.write_snapshot()
            broker.log_manager.shutdown()

    return asyncio.run(run())


def test_coordinator_runs_a_transaction_and_reloads_its_state(tmp_path):
    async def first(broker, c):
        broker.apis.topic_admin_manager.create_topic("data", 2)
        assert await c.init_producer_id("app", 0) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
        assert await c.init_producer_id("app", 10**9) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
        error, pid, epoch = await c.init_producer_id("app", 60000)
        assert (error, epoch) == (E.NONE, 0)
        assert await c.end_txn("app", pid, epoch, True) == E.INVALID_TXN_STATE  # nothing begun
        assert await c.add_partitions("app", pid + 1, epoch, [("data", 0)]) == {
            ("data", 0): E.INVALID_PRODUCER_ID_MAPPING
        }
        assert await c.add_partitions("app", pid, epoch + 1, [("data", 0)]) == {
            ("data", 0): E.PRODUCER_FENCED
        }
        assert await c.add_partitions("app", pid, epoch, [("data", 0), ("nope", 0)]) == {
            ("data", 0): E.OPERATION_NOT_ATTEMPTED,
            ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert c.verify_partition(pid, epoch, "data", 0) == E.INVALID_TXN_STATE
        assert await c.add_partitions("app", pid, epoch, [("data", 0), ("data", 1)]) == {
            ("data", 0): E.NONE,
            ("data", 1): E.NONE,
        }
        assert c.verify_partition(pid, epoch, "data", 1) == E.NONE
        assert c.verify_partition(pid, epoch - 1, "data", 1) == E.INVALID_PRODUCER_EPOCH
        assert await c.end_txn("app", pid, epoch, True) == E.NONE
        assert await c.end_txn("app", pid, epoch, True) == E.NONE  # a retry
        assert await c.end_txn("app", pid, epoch, False) == E.INVALID_TXN_STATE
        for p in (0, 1):
            batches = logstore.decode_batches(
                broker.apis.replica_manager.get_partition("data", p).log.local_log.read(0, 1 << 20)
            )
            assert [(b.is_control, b.control_type, b.producer_id) for b in batches] == [
                (True, 1, pid)
            ]
        return pid

    pid = with_coordinator(tmp_path, first)

    async def second(broker, c):
        txn = c.transactions["app"]
        assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions) == (
            pid,
            0,
            S.COMPLETE_COMMIT,
            set(),
        )
        assert await c.init_producer_id("app", 60000) == (E.NONE, pid, 1)
        # KIP-360: the previous instance's id and epoch are fenced, a retry is answered again.
        assert await c.init_producer_id("app", 60000, pid, 0) == (E.NONE, pid, 1)
        assert (await c.init_producer_id("app", 60000, pid, 7))[0] == E.PRODUCER_FENCED

    with_coordinator(tmp_path, second)


def test_coordinator_aborts_at_the_timeout_and_expires_ids(tmp_path):
    async def run(broker, c):
        broker.apis.topic_admin_manager.create_topic("data", 1)
        _, pid, epoch = await c.init_producer_id("slow", 1000)
        await c.add_partitions("slow", pid, epoch, [("data", 0)])
        start = c.transactions["slow"].txn_start_timestamp
        assert await c.abort_timed_out(now=start + 500) == 0
        assert await c.abort_timed_out(now=start + 1001) == 1
        txn = c.transactions["slow"]
        assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
        assert await c.end_txn("slow", pid, epoch, True) == E.PRODUCER_FENCED
        (marker,) = logstore.decode_batches(
            broker.apis.replica_manager.get_partition("data", 0).log.local_log.read(0, 1 << 20)
        )
        assert (marker.control_type, marker.producer_epoch) == (0, epoch + 1)
        assert await c.expire_transactional_ids(now=txn.txn_last_update_timestamp + 1000) == 0
        assert await c.expire_transactional_ids(now=txn.txn_last_update_timestamp + 10**10) == 1
        assert "slow" not in c.transactions

    with_coordinator(tmp_path, run)

    async def reloaded(broker, c):
        assert "slow" not in c.transactions

    with_coordinator(tmp_path, reloaded)


def test_coordinator_finishes_a_prepared_transaction_on_load(tmp_path):
    async def prepare(broker, c):
        broker.apis.topic_admin_manager.create_topic("data", 1)
        _, pid, epoch = await c.init_producer_id("crashy", 60000)
        await c.add_partitions("crashy", pid, epoch, [("data", 0)])
        prepared = c.transactions["crashy"].copy()
        prepared.state = S.PREPARE_COMMIT
        await c.state.store(prepared)  # as if the broker died before writing the markers
        return pid

    pid = with_coordinator(tmp_path, prepare)

    async def check(broker, c):
        assert c.transactions["crashy"].state == S.COMPLETE_COMMIT
        (marker,) = logstore.decode_batches(
            broker.apis.replica_manager.get_partition("data", 0).log.local_log.read(0, 1 << 20)
        )
        assert (marker.control_type, marker.producer_id) == (1, pid)
        assert broker.apis.metadata_cache.get(TRANSACTION_STATE_TOPIC).partitions == 3

    with_coordinator(tmp_path, check)


def test_state_writes_wait_for_acks_all_and_map_their_errors(tmp_path):
    """The coordinator writes __transaction_state through the replica manager with
    acks=-1: while a write waits for the ISR the id answers CONCURRENT_TRANSACTIONS,
    a write that times out is COORDINATOR_NOT_AVAILABLE and changes nothing, and a
    partition this broker no longer leads is NOT_COORDINATOR."""
    from broker_py.common.internal_topics import TRANSACTION_STATE_TOPIC
    from broker_py.coordinator.transaction.transaction_log import partition_for
    from broker_py.utils.time import MockTime

    async def run():
        time = MockTime()
        broker = KafkaServer(
            BrokerConfig(
                {
                    "log.dirs": str(tmp_path),
                    "listeners": "PLAINTEXT://127.0.0.1:19092",
                    "transaction.state.log.num.partitions": "1",
                }
            ),
            time=time,
        )
        coordinator = new_transaction_coordinator(broker.apis, time)
        broker.apis.transaction_coordinator = coordinator
        await coordinator.start()
        try:
            coordinator.state.ensure_topic()
            rm = broker.apis.replica_manager
            state_log = rm.get_partition(TRANSACTION_STATE_TOPIC, partition_for("slow", 1)).log
            # A follower (broker 2) in the ISR that never fetches: acks=-1 cannot complete.
            rm.make_leader(TRANSACTION_STATE_TOPIC, 0, state_log, 1, [0, 2], [0, 2])
            first = asyncio.ensure_future(coordinator.init_producer_id("slow", 60000))
            await asyncio.sleep(0)
            assert not first.done()
            assert await coordinator.init_producer_id("slow", 60000) == (
                E.CONCURRENT_TRANSACTIONS,
                -1,
                -1,
            )
            time.advance(30.0)  # request.timeout.ms
            assert await first == (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
            assert "slow" not in coordinator.transactions
            # The follower catches up: the next write is acknowledged.
            again = asyncio.ensure_future(coordinator.init_producer_id("slow", 60000))
            await asyncio.sleep(0)
            partition = rm.get_partition(TRANSACTION_STATE_TOPIC, 0)
            partition.update_follower_fetch_state(2, partition.log_end_offset)
            rm.produce_purgatory.check_and_complete(partition.key)
            error, pid, epoch = await again
            assert error == E.NONE and coordinator.transactions["slow"].producer_id == pid
            # Leadership gone: the write fails with NOT_COORDINATOR and nothing changes.
            partition.leader_id = 2
            assert (await coordinator.init_producer_id("slow", 60000))[0] == E.NOT_COORDINATOR
            assert coordinator.transactions["slow"].producer_epoch == epoch
        finally:
            await coordinator.stop()
            broker.log_manager.shutdown()

    asyncio.run(run())
