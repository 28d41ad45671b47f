"""How a ShareFetch finds the batches it read (base and last offsets, byte ranges):
whole v2 batches in order, a cut-off last batch left out; their producer ids, and which
are transactional or ABORT markers (what read_committed needs); BatchSize cutting the
acquired ranges at log batch boundaries."""

from __future__ import annotations

import logstore
from broker_py.server.share.share_partition import AcquiredRecords, FetchedBatch
from broker_py.server.share.share_partition_manager import (
    _is_abort_marker,
    batch_offsets,
    fetched_batches,
    split_acquired,
)


def _batch(base: int, count: int, codec: str = "none") -> bytes:
    records = [(None, f"v{base + n}".encode(), [], 1000 + n) for n in range(count)]
    return bytes(logstore.encode_batch(records, codec, base_offset=base))


def test_batches_and_their_bytes() -> None:
    first, second = _batch(0, 3), _batch(3, 2, "zstd")
    data = first + second
    assert batch_offsets(data) == [
        (0, 2, 0, len(first)),
        (3, 4, len(first), len(data)),
    ]


def test_a_cut_off_batch_and_empty_input() -> None:
    data = _batch(10, 4) + _batch(14, 1)
    assert batch_offsets(data[:-3]) == [(10, 13, 0, len(_batch(10, 4)))]
    assert batch_offsets(b"") == [] and batch_offsets(b"\x00" * 20) == []


def _txn(base: int, count: int, producer_id: int, codec: str = "none") -> bytes:
    records = [(None, b"t", [], 1000) for _ in range(count)]
    return bytes(
        logstore.encode_batch(
            records,
            codec,
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    )


def _marker(base: int, producer_id: int, abort: bool) -> bytes:
    batch = logstore.encode_control_batch(
        0 if abort else 1, producer_id=producer_id, producer_epoch=0, base_offset=base
    )
    return bytes(batch)


def test_producer_ids_transactions_and_abort_markers() -> None:
    parts = [_batch(0, 2), _txn(2, 3, 7, "lz4"), _marker(5, 7, True), _marker(6, 8, False)]
    got = [batch for batch, _, _ in fetched_batches(b"".join(parts))]
    assert got == [
        FetchedBatch(0, 1, -1, False, False),
        FetchedBatch(2, 4, 7, True, False),
        FetchedBatch(5, 5, 7, True, True),
        FetchedBatch(6, 6, 8, True, False),
    ]
    # A control batch cut short of its key is not taken for an abort marker.
    assert not _is_abort_marker(parts[2][:64], 0, 64)


def test_batch_size_cuts_acquired_ranges_at_log_batches() -> None:
    batches = [FetchedBatch(0, 2), FetchedBatch(3, 3), FetchedBatch(4, 9), FetchedBatch(10, 11)]
    runs = [AcquiredRecords(0, 7, 1), AcquiredRecords(8, 11, 2)]
    assert split_acquired(runs, batches, 4) == [
        AcquiredRecords(0, 3, 1),
        AcquiredRecords(4, 7, 1),  # the run ends inside 4-9
        AcquiredRecords(8, 11, 2),  # 8-9 hold 2 records: not cut at 9
    ]
    assert split_acquired(runs, batches, 1) == [
        AcquiredRecords(0, 2, 1),
        AcquiredRecords(3, 3, 1),
        AcquiredRecords(4, 7, 1),
        AcquiredRecords(8, 9, 2),
        AcquiredRecords(10, 11, 2),
    ]
    assert split_acquired(runs, batches, 0) == runs
    assert split_acquired(runs, batches, 500) == runs
