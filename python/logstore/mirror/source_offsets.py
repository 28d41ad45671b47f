"""The exactly-once mode's progress records: which source offset each source partition
was copied up to, kept in ``mm2-offsets.<source alias>.internal`` on the target in the
format Kafka Connect's offsets topic uses for MirrorMaker 2's source connector, and
written in the same transaction as the records they cover.

Key: the JSON array ``["MirrorSourceConnector",{"cluster":A,"partition":P,"topic":T}]``
(the connector's name, then MM2's source partition map: source alias, partition, source
topic). Value: the JSON object ``{"offset":N}``, ``N`` the source offset of the last
record copied; copying resumes at ``N + 1``. A null value (tombstone) forgets the
partition. Records are partitioned by the key (murmur2, as Java's producer), so a topic
created by Connect with more partitions is read and written the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

CONNECTOR = "MirrorSourceConnector"


def key(cluster: str, topic: str, partition: int) -> bytes:
    body = {"cluster": cluster, "partition": partition, "topic": topic}
    return json.dumps([CONNECTOR, body], separators=(",", ":")).encode()


def value(offset: int) -> bytes:
    return json.dumps({"offset": offset}, separators=(",", ":")).encode()


def decode(k: bytes | None, v: bytes | None) -> tuple[tuple[str, str, int], int | None] | None:
    """``((cluster, topic, partition), offset or None for a tombstone)``; None when the
    record is not an MM2 source-connector offset."""
    try:
        parsed = json.loads(k or b"")
        if not (isinstance(parsed, list) and len(parsed) == 2 and parsed[0] == CONNECTOR):
            return None
        part = parsed[1]
        tp = (str(part["cluster"]), str(part["topic"]), int(part["partition"]))
        if v is None:
            return tp, None
        offset = json.loads(v)["offset"]
        if not isinstance(offset, int):
            return None
        return tp, offset
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def fold(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[tuple[str, str, int], int]:
    """The last offset per (cluster, topic, partition) of ``records`` in log order."""
    out: dict[tuple[str, str, int], int] = {}
    for k, v in records:
        got = decode(k, v)
        if got is None:
            continue
        tp, offset = got
        if offset is None:
            out.pop(tp, None)
        else:
            out[tp] = offset
    return out
