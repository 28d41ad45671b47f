"""Record batches as fetched: whole batches and a cut tail, the offset after them, and
dropping the batches of aborted transactions (RecordBatch v2 bytes, never decompressed)."""

from __future__ import annotations

import struct

import logstore
from logstore.spark.kafka_client.errors import KafkaProtocolError

BATCH_HEADER = struct.Struct(">qi")
"""The first 12 bytes of every record batch: baseOffset int64, batchLength int32.

``batchLength`` counts the bytes after these 12.
"""

_LAST_OFFSET_DELTA = struct.Struct(">i")

MIN_BATCH_LENGTH = 49
"""The smallest ``batchLength`` of a RecordBatch v2: its 61-byte header less the first 12."""


def whole_batches(records: bytes) -> tuple[bytes, int | None]:
    """Split fetched record bytes into whole batches and a trailing partial one.

    ``records`` is a sequence of batches, each starting with baseOffset
    int64 and batchLength int32 (the size of the rest).  Returns the
    longest prefix made of whole batches, and the total size (12 +
    batchLength) of the first batch that is cut short, or ``None`` when
    nothing is cut (or when even its 12-byte header is cut).  A batchLength
    below a RecordBatch v2 header's raises :class:`KafkaProtocolError`.
    """
    pos = 0
    end = len(records)
    while end - pos >= BATCH_HEADER.size:
        _, length = BATCH_HEADER.unpack_from(records, pos)
        if length < MIN_BATCH_LENGTH:
            raise KafkaProtocolError(
                f"record batch at byte {pos} declares batchLength {length}, "
                f"below the RecordBatch v2 minimum of {MIN_BATCH_LENGTH}"
            )
        if end - pos < BATCH_HEADER.size + length:
            return records[:pos], BATCH_HEADER.size + length
        pos += BATCH_HEADER.size + length
    return (records if pos == end else records[:pos]), None


def next_offset(batches: bytes) -> int:
    """The offset after the last batch of non-empty whole batches.

    That is the last batch's baseOffset + lastOffsetDelta (the int32 at
    byte 23 of a RecordBatch v2) + 1.
    """
    pos = 0
    last = -1
    while pos < len(batches):
        base, length = BATCH_HEADER.unpack_from(batches, pos)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(batches, pos + 23)
        last = base + delta
        pos += BATCH_HEADER.size + length
    return last + 1


def drop_aborted(records: bytes, aborted_transactions: list[tuple[int, int]]) -> bytes:
    """Remove the batches of aborted transactions from whole RecordBatch v2 bytes.

    ``aborted_transactions`` is a read_committed Fetch response's list of
    (producer id, first offset) pairs.  As Kafka's consumer does: walking the
    batches in order, a producer id becomes aborted once a batch reaching
    its first offset is seen, its transactional data batches are then
    dropped, and its ABORT marker (a control batch, kept) ends that.
    Everything else is kept byte for byte, so the result is whole batches
    with gaps in the offsets where aborted data was.  Bytes that are not
    RecordBatch v2 raise :class:`KafkaProtocolError`.
    """
    if not aborted_transactions:
        return records
    pending = sorted(aborted_transactions, key=lambda a: a[1])
    aborted: set[int] = set()
    kept = bytearray()
    try:
        batches = logstore.decode_batches(
            records, records=False, verify_crc=False, allow_partial=False
        )
    except logstore.LogStoreError as exc:
        raise KafkaProtocolError(f"fetched records do not decode as RecordBatch v2: {exc}") from exc
    for batch in batches:
        if batch.producer_id >= 0:
            while pending and pending[0][1] <= batch.last_offset:
                aborted.add(pending.pop(0)[0])
            if batch.is_control:
                if batch.control_type == 0:
                    aborted.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted:
                continue
        kept += records[batch.position : batch.position + batch.size]
    return bytes(kept)
