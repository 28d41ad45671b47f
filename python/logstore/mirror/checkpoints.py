"""MirrorMaker 2's checkpoint records (``<source alias>.checkpoints.internal`` on the
target cluster, one partition, compacted): a consumer group's committed offset on the
source, translated for the target.

Key (Schema struct, see :mod:`.structs`): ``group`` STRING, ``topic`` STRING (the
*remote* topic's name on the target), ``partition`` INT32. Value: a header struct
``version`` INT16 (0), then ``upstreamOffset`` INT64 (the group's offset on the source),
``offset`` INT64 (the translated offset on the target), ``metadata`` STRING (the
committed metadata, empty when none).

:func:`latest` folds a checkpoints topic into the newest checkpoint per (group, topic,
partition), as ``RemoteClusterUtils.translateOffsets`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logstore.mirror import structs

VERSION = 0


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return (
            structs.string(self.group) + structs.string(self.topic) + structs.int32(self.partition)
        )

    def value(self) -> bytes:
        return (
            structs.int16(VERSION)
            + structs.int64(self.upstream_offset)
            + structs.int64(self.downstream_offset)
            + structs.string(self.metadata)
        )

    @staticmethod
    def decode(key: bytes | None, value: bytes | None) -> Checkpoint:
        v = structs.Reader(value)
        version = v.int16()
        if version != VERSION:
            raise structs.FormatError(f"checkpoint version {version} is not 0")
        upstream, downstream, metadata = v.int64(), v.int64(), v.string()
        k = structs.Reader(key)
        return Checkpoint(k.string(), k.string(), k.int32(), upstream, downstream, metadata)


def latest(
    records: Iterable[tuple[bytes | None, bytes | None]],
) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint per (group, topic, partition) among ``records`` (key, value)
    in log order. Records that do not parse (and tombstones) are skipped."""
    out: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in records:
        if value is None:
            continue
        try:
            cp = Checkpoint.decode(key, value)
        except structs.FormatError:
            continue
        out[(cp.group, cp.topic, cp.partition)] = cp
    return out
