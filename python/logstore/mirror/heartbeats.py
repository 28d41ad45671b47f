"""MirrorMaker 2's heartbeat records (``heartbeats`` topic on the target cluster, one
partition, compacted).

Key (Schema struct, see :mod:`.structs`): ``sourceClusterAlias`` STRING,
``targetClusterAlias`` STRING. Value: a header struct ``version`` INT16 (0), then the
version-0 struct ``timestamp`` INT64 (milliseconds since the epoch when emitted).
"""

from __future__ import annotations

from dataclasses import dataclass

from logstore.mirror import structs

VERSION = 0


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp: int

    def key(self) -> bytes:
        return structs.string(self.source) + structs.string(self.target)

    def value(self) -> bytes:
        return structs.int16(VERSION) + structs.int64(self.timestamp)

    @staticmethod
    def decode(key: bytes | None, value: bytes | None) -> Heartbeat:
        v = structs.Reader(value)
        version = v.int16()
        if version != VERSION:
            raise structs.FormatError(f"heartbeat version {version} is not 0")
        timestamp = v.int64()
        k = structs.Reader(key)
        return Heartbeat(k.string(), k.string(), timestamp)
