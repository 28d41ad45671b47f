"""Writes partitions the way the broker does (through ``logstore.Log``) and reads back
what was produced, for comparing with what Spark reads."""

from __future__ import annotations

import os
from dataclasses import dataclass

import logstore

BASE_TS = 1_732_190_000_000


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


def write_partition(
    log_dir: str,
    topic: str,
    partition: int,
    n: int,
    *,
    codec: str = "none",
    batch: int = 10,
    segment_bytes: int = 1 << 20,
    ts0: int = BASE_TS,
    value_size: int = 20,
) -> list[Produced]:
    """Appends ``n`` records in batches of ``batch``; record i has timestamp ts0 + i * 1000."""
    path = os.path.join(log_dir, f"{topic}-{partition}")
    log = logstore.Log.open(path, segment_bytes=segment_bytes)
    out = []
    try:
        start = log.log_end_offset
        for b0 in range(0, n, batch):
            recs = []
            for i in range(b0, min(n, b0 + batch)):
                key = None if i % 7 == 3 else f"k{i}".encode()
                value = (
                    None
                    if i % 11 == 5
                    else (f"{topic}/{partition}/{i}:".encode() * value_size)[:value_size]
                )
                headers = (("h", str(i).encode()), ("null", None)) if i % 2 else ()
                ts = ts0 + i * 1000
                recs.append((key, value, list(headers), ts))
                out.append(Produced(topic, partition, start + i, key, value, ts, headers))
            log.append(logstore.encode_batch(recs, codec))
    finally:
        log.close()
    return out


def rows_as_produced(rows) -> list[Produced]:  # type: ignore[no-untyped-def]
    """Spark rows (with headers) as ``Produced``, sorted."""
    out = []
    for r in rows:
        headers = tuple(
            (h["key"], None if h["value"] is None else bytes(h["value"]))
            for h in (r["headers"] or [])
        )
        ts = int(r["timestamp"].timestamp() * 1000 + 0.5)
        out.append(
            Produced(
                r["topic"],
                r["partition"],
                r["offset"],
                None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]),
                ts,
                headers,
            )
        )
    return sorted(out, key=lambda p: (p.topic, p.partition, p.offset))
