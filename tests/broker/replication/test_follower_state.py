"""A follower rebuilds, from the batches it replicates, what the leader keeps beside its
log: producer state (so a producer's retry is still a duplicate after a failover, and a
fenced producer stays fenced), ongoing transactions and the last stable offset, the
aborted-transaction index, and the coordinator epoch of markers (an older transaction
coordinator stays fenced). The follower's log is byte-identical to the leader's."""

from __future__ import annotations

import pytest

import logstore
from broker_py.cluster.partition import Partition
from broker_py.log.unified_log import UnifiedLog
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import TransactionCoordinatorFencedError


def _batch(pid: int, epoch: int, seq: int, n: int = 2, transactional: bool = False) -> bytes:
    return logstore.encode_batch(
        [(b"k%d" % i, b"v", [], 0) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


@pytest.fixture
def pair(tmp_path):
    logs = [logstore.Log.open(str(tmp_path / f"b{b}" / "t-0")) for b in (1, 2)]
    leader = Partition("t", 0, UnifiedLog("t", 0, logs[0]), local_broker_id=1)
    follower = Partition("t", 0, UnifiedLog("t", 0, logs[1]), local_broker_id=2)
    leader.make_leader(1, [1, 2], [1, 2])
    follower.make_follower(1, 1, [1, 2], [1, 2])
    yield leader, follower
    for log in logs:
        if not log.closed:
            log.close()


def _replicate(leader: Partition, follower: Partition) -> None:
    """The follower fetches everything the leader has, as its fetcher does."""
    while follower.log_end_offset < leader.log_end_offset:
        diverging, slice_ = leader.read_for_follower(follower.log_end_offset, -1, 1 << 20, True)
        assert diverging is None and slice_ is not None
        data = leader.log.local_log.read(
            follower.log_end_offset, 1 << 20, max_offset=leader.log_end_offset
        )
        follower.append_records_to_follower(data)
        leader.update_follower_fetch_state(2, follower.log_end_offset)
    follower.update_follower_high_watermark(leader.high_watermark, leader.log_start_offset)


def _bytes(p: Partition) -> bytes:
    log = p.log.local_log
    return log.read(0, 1 << 24, max_offset=log.log_end_offset) if log.log_end_offset else b""


def test_a_follower_rebuilds_producer_state_transactions_and_markers(pair):
    leader, follower = pair
    ok = lambda pid, epoch: ErrorCode.NONE  # noqa: E731 - the coordinator's verification
    leader.append_records_to_leader(_batch(7, 0, 0), -1, 1)  # idempotent 0-1
    leader.append_records_to_leader(
        _batch(8, 0, 0, transactional=True), -1, 1, verify_transaction=ok
    )  # 2-3 open
    leader.append_records_to_leader(
        _batch(9, 0, 0, transactional=True), -1, 1, verify_transaction=ok
    )  # 4-5
    leader.append_marker(9, 0, commit=False, coordinator_epoch=3)  # 6: 9 aborted
    _replicate(leader, follower)
    assert _bytes(follower) == _bytes(leader)
    assert follower.high_watermark == leader.high_watermark == 7
    # the transaction of 8 is still open on both: the LSO stops at its first offset
    assert follower.last_stable_offset == leader.last_stable_offset == 2
    assert follower.aborted_transactions(0, 7) == leader.aborted_transactions(0, 7)
    assert [t.producer_id for t in follower.aborted_transactions(0, 7)] == [9]
    # the follower becomes leader: 7's retry is a duplicate, answered with its offsets
    follower.make_leader(2, [2], [1, 2])
    first, last, *_ = follower.append_records_to_leader(_batch(7, 0, 0), 1, 1)
    assert (first, last) == (0, 1) and follower.log_end_offset == 7
    # a marker from transaction coordinator epoch 2 (older than 3, seen replicated) is fenced
    with pytest.raises(TransactionCoordinatorFencedError):
        follower.append_marker(9, 0, commit=True, coordinator_epoch=2)
    follower.append_marker(8, 0, commit=True, coordinator_epoch=3)
    assert follower.last_stable_offset == follower.high_watermark == follower.log_end_offset == 8


def test_a_new_leader_answers_offset_not_available_until_its_high_watermark_reaches_its_epoch(pair):
    from broker_py.server.handlers.list_offsets import EARLIEST, LATEST, lookup
    from logstore.protocol.errors import OffsetNotAvailableError

    leader, follower = pair
    for seq in range(3):
        leader.append_records_to_leader(_batch(7, 0, seq * 2), 1, 1)
    # the follower copies everything but learns the high watermark only on its next fetch
    data = leader.log.local_log.read(0, 1 << 20, max_offset=leader.log_end_offset)
    follower.append_records_to_follower(data)
    follower.update_follower_high_watermark(2, 0)
    follower.make_leader(2, [2, 1], [1, 2])
    assert follower.leader_epoch_start_offset == 6 and follower.high_watermark == 2
    with pytest.raises(OffsetNotAvailableError):
        lookup(follower, LATEST, 0)
    assert lookup(follower, EARLIEST, 0) == (-1, 0)  # the log start is known
    assert lookup(follower, LATEST, 0, replica_id=1) == (-1, 6)  # a follower asks the log end
    follower.update_follower_fetch_state(1, 6)  # the other replica shows it holds 6
    assert follower.high_watermark == 6 and lookup(follower, LATEST, 0) == (-1, 6)
