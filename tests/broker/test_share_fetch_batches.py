"""How a ShareFetch finds the batches it read (base and last offsets, byte ranges):
whole v2 batches in order, a cut-off last batch left out."""

from __future__ import annotations

import logstore
from broker_py.server.share.share_partition_manager import batch_offsets


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
