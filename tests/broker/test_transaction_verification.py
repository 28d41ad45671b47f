"""KIP-890 verification at a partition leader, without sockets: the replica manager asks
its verifier (scripted here in place of the transaction coordinator) before the first
transactional batch of a producer's transaction in a partition, and appends a verified
batch only if no marker ended the producer's transaction meanwhile (the guard)."""

from __future__ import annotations

import asyncio

import pytest

import logstore
from broker_py.log.unified_log import UnifiedLog
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

ME = 1
PID, EPOCH, TID = 7, 0, "tx"


def txn_batch(seq: int) -> bytes:
    return logstore.encode_batch(
        [(b"k", b"v%d" % seq, [], 1_700_000_000_000)],
        producer_id=PID,
        producer_epoch=EPOCH,
        base_sequence=seq,
        transactional=True,
    )


class ScriptedVerifier:
    """Answers ``answer`` for every partition; ``before_answer`` runs while the leader waits."""

    def __init__(self, answer: ErrorCode = ErrorCode.NONE) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int, int, list]] = []
        self.before_answer = None

    async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
        self.asked.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        await asyncio.sleep(0)
        if self.before_answer is not None:
            self.before_answer()
        return dict.fromkeys(partitions, self.answer)


@pytest.fixture
def leader(tmp_path):
    plog = logstore.Log.open(str(tmp_path / "t-0"))
    manager = ReplicaManager(ME, lambda topic: 1, MockTime())
    partition = manager.make_leader("t", 0, UnifiedLog("t", 0, plog), 0, [ME], [ME])
    yield manager, partition
    plog.close()


def produce(manager, seq: int):
    async def go():
        result = manager.append(1000, 1, [("t", [(0, txn_batch(seq), True)])], transactional_id=TID)
        if not isinstance(result, list):
            result = await result
        return result[0][1][0].wire()

    return asyncio.run(go())


def test_the_first_batch_of_a_transaction_is_verified_and_the_next_are_not(leader):
    manager, partition = leader
    manager.txn_verifier = verifier = ScriptedVerifier()
    index, error, base_offset, *_ = produce(manager, 0)
    assert (error, base_offset) == (0, 0)
    assert verifier.asked == [(TID, PID, EPOCH, [("t", 0)])]
    assert produce(manager, 1)[1] == 0
    assert len(verifier.asked) == 1  # the transaction is open here: nothing to verify
    partition.append_marker(PID, EPOCH, False, 0)
    assert produce(manager, 2)[1] == 0  # a new transaction: verified again
    assert len(verifier.asked) == 2


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_ENOUGH_REPLICAS),
    ],
)
def test_a_refused_verification_writes_nothing(leader, answer, expected):
    manager, partition = leader
    manager.txn_verifier = ScriptedVerifier(answer)
    _, error, base_offset, _, _, message, _ = produce(manager, 0)
    assert (ErrorCode(error), base_offset) == (expected, -1)
    assert message
    assert partition.log.log_end_offset == 0
    assert not partition.log.producer_state.in_transaction(PID)


def test_a_marker_during_verification_voids_it(leader):
    """The coordinator aborted the transaction (its marker written here) after it
    answered the verification: the verified batch must not open a new transaction."""
    manager, partition = leader
    manager.txn_verifier = verifier = ScriptedVerifier()
    verifier.before_answer = lambda: partition.append_marker(PID, EPOCH, False, 0)
    _, error, *_ = produce(manager, 0)
    assert ErrorCode(error) == ErrorCode.INVALID_TXN_STATE
    assert partition.log.log_end_offset == 1  # the marker only
    assert not partition.log.producer_state.in_transaction(PID)


def test_pipelined_first_batches_share_one_verification_guard(leader):
    manager, partition = leader
    manager.txn_verifier = ScriptedVerifier()

    async def go():
        first = manager.append(1000, 1, [("t", [(0, txn_batch(0), True)])], transactional_id=TID)
        second = manager.append(1000, 1, [("t", [(0, txn_batch(1), True)])], transactional_id=TID)
        return [r[0][1][0] for r in await asyncio.gather(first, second)]

    results = asyncio.run(go())
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 1)]
    assert partition.log.producer_state.in_transaction(PID)


def test_without_a_transactional_id_a_cluster_leader_refuses_a_batch_opening_a_transaction(leader):
    manager, partition = leader
    manager.txn_verifier = verifier = ScriptedVerifier()
    result = manager.append(1000, 1, [("t", [(0, txn_batch(0), True)])])
    assert ErrorCode(result[0][1][0].error_code) == ErrorCode.INVALID_TXN_STATE
    assert verifier.asked == []
    assert partition.log.log_end_offset == 0
