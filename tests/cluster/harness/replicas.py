"""Replicas' segment files compared byte for byte up to the high watermark.

A partition's log is the directory ``<log.dirs>/<topic>-<partition>/`` holding
segments ``<base offset, 20 digits>.log``. A ``.log`` is a sequence of record batches
in Kafka's v2 format; each starts with ``baseOffset`` (int64), ``batchLength`` (int32,
the bytes that follow it), ``partitionLeaderEpoch`` (int32), ``magic`` (int8, 2),
``crc`` (uint32), ``attributes`` (int16), ``lastOffsetDelta`` (int32), ... so a batch
is ``batchLength + 12`` bytes and covers offsets ``baseOffset .. baseOffset +
lastOffsetDelta``. A follower stores the leader's batches unchanged, so below the high
watermark every replica's batches must be the same bytes.

:func:`read_batches` frames the batches of a partition (segments in base-offset order;
a torn tail or zero padding ends a segment). :func:`compare_replicas` compares the
batches of several replicas that start below ``high_watermark``, over the offset range
every replica holds, and reports the first offset where they differ (a batch's bytes,
refined to the first differing record when the batches decode), or where one replica's
log ends early. :func:`replica_records` decodes ``(offset, value)`` pairs (values as
UTF-8 text) for the checker's :class:`~tests.cluster.harness.checker.ReplicaRead`.

Read the files of stopped brokers, or accept that a live broker's newest batch may be
half written (it is then left out as a torn tail).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.harness.checker import ReplicaRead

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # at byte 23
_MIN_BATCH_LENGTH = 49  # the v2 header after baseOffset and batchLength


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    data: bytes  # the whole batch, header included
    segment: str  # file name
    position: int  # byte position in that file


def partition_dir(log_dir: str | os.PathLike[str], topic: str, partition: int) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def read_batches(part_dir: str | os.PathLike[str], upto: int | None = None) -> list[Batch]:
    """The batches of a partition directory in offset order; with ``upto``, only those
    whose base offset is below it. A missing directory has none."""
    d = Path(part_dir)
    if not d.is_dir():
        return []
    out: list[Batch] = []
    segments = sorted(
        (p for p in d.iterdir() if p.suffix == ".log" and p.stem.isdigit()),
        key=lambda p: int(p.stem),
    )
    for seg in segments:
        data = seg.read_bytes()
        pos = 0
        while pos + _PREFIX.size + _MIN_BATCH_LENGTH <= len(data):
            base, length = _PREFIX.unpack_from(data, pos)
            if length < _MIN_BATCH_LENGTH or pos + 12 + length > len(data):
                break  # zero padding or a torn tail
            if upto is not None and base >= upto:
                return out
            (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
            out.append(Batch(base, base + delta, data[pos : pos + 12 + length], seg.name, pos))
            pos += 12 + length
    return out


@dataclass
class ReplicaComparison:
    """``first_divergence``: the first offset below the high watermark where replicas
    differ (None: identical). ``end_offsets``: each replica's next offset after its last
    batch below the high watermark."""

    high_watermark: int
    first_divergence: int | None = None
    detail: str = ""
    end_offsets: dict[str, int] = field(default_factory=dict)
    batches_compared: int = 0

    @property
    def identical(self) -> bool:
        return self.first_divergence is None


def compare_replicas(
    dirs: Mapping[str, str | os.PathLike[str]], high_watermark: int
) -> ReplicaComparison:
    """Compares the partition directories ``dirs`` (replica name -> directory) below
    ``high_watermark``. Every replica must hold every offset from the largest first
    offset among them up to the high watermark, in identical batches."""
    res = ReplicaComparison(high_watermark)
    logs = {name: read_batches(d, high_watermark) for name, d in dirs.items()}
    for name, batches in logs.items():
        res.end_offsets[name] = batches[-1].last_offset + 1 if batches else 0
    if len(logs) < 2:
        return res
    start = max((b[0].base_offset for b in logs.values() if b), default=0)
    cursors = {
        name: [b for b in batches if b.last_offset >= start] for name, batches in logs.items()
    }
    names = sorted(cursors)
    ref = names[0]
    i = 0
    while True:
        heads = {n: (cursors[n][i] if i < len(cursors[n]) else None) for n in names}
        if all(h is None for h in heads.values()):
            return res
        missing = [n for n, h in heads.items() if h is None]
        if missing:
            # A replica's log ends early: the first offset it lacks.
            present = [h for h in heads.values() if h is not None]
            offset = min(h.base_offset for h in present)
            res.first_divergence = offset
            going_on = ", ".join(n for n in names if n not in missing)
            res.detail = (
                f"{', '.join(missing)} end at offset {offset}, below the high watermark "
                f"{high_watermark}; {going_on} go on"
            )
            return res
        first = heads[ref]
        assert first is not None
        for n in names[1:]:
            other = heads[n]
            assert other is not None
            if other.data != first.data:
                offset = _first_differing_offset(first, other)
                res.first_divergence = offset
                res.detail = (
                    f"{ref} {first.segment}@{first.position} "
                    f"(offsets {first.base_offset}..{first.last_offset}) and "
                    f"{n} {other.segment}@{other.position} "
                    f"(offsets {other.base_offset}..{other.last_offset}) "
                    f"differ from offset {offset}"
                )
                return res
        res.batches_compared += 1
        i += 1


def _first_differing_offset(a: Batch, b: Batch) -> int:
    """The first offset whose record differs, when both batches decode; else the
    smaller base offset."""
    if a.base_offset != b.base_offset:
        return min(a.base_offset, b.base_offset)
    try:
        from logstore import _native

        ra = _native.decode_batches(a.data, verify_crc=False)[0].records
        rb = _native.decode_batches(b.data, verify_crc=False)[0].records
    except Exception:  # noqa: BLE001 - undecodable: the batch is the best we can say
        return a.base_offset
    for x, y in zip(ra, rb, strict=False):
        if (x.offset, x.timestamp, x.key, x.value, x.headers) != (
            y.offset,
            y.timestamp,
            y.key,
            y.value,
            y.headers,
        ):
            return min(x.offset, y.offset)
    if len(ra) != len(rb):
        return a.base_offset + min(len(ra), len(rb))
    return a.base_offset  # same records, different header bytes (epoch, crc, ...)


def replica_records(
    part_dir: str | os.PathLike[str], upto: int | None = None
) -> list[tuple[int, str]]:
    """``(offset, value)`` of every data record below ``upto`` (control batches left
    out; values decoded as UTF-8, None as "")."""
    from logstore import _native

    out: list[tuple[int, str]] = []
    for batch in read_batches(part_dir, upto):
        for decoded in _native.decode_batches(batch.data, verify_crc=False):
            if decoded.is_control:
                continue
            for r in decoded.records:
                if upto is None or r.offset < upto:
                    out.append((r.offset, (r.value or b"").decode("utf-8", "replace")))
    return out


def replica_reads(
    dirs: Mapping[str, str | os.PathLike[str]], partition: int, upto: int | None = None
) -> list[ReplicaRead]:
    """One :class:`ReplicaRead` per replica, for the checker."""
    return [
        ReplicaRead(name, partition, tuple(replica_records(d, upto))) for name, d in dirs.items()
    ]
