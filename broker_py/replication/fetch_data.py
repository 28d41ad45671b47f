"""What a fetch asks of the replica manager and what it gets back (Kafka's
``FetchParams`` and ``FetchPartitionData``).

A fetch names its partitions with objects the request layer keeps (a fetch session's
``CachedPartition``); the replica manager reads their ``topic``, ``partition``,
``fetch_offset``, ``max_bytes``, ``current_leader_epoch``, ``last_fetched_epoch`` and
``fetcher_log_start_offset``, and sets ``topic`` when it resolves a topic id.

Records in a :class:`FetchPartitionData` are ``b""`` (nothing read), a
``DeferredRecords`` holding a ``logstore.FileSlice`` (sent with ``sendfile``), or, for
a fetch that answers in message format v0/v1, a :class:`ToConvert` that the Fetch
handler converts down when it builds the response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition
    from logstore import FileSlice
    from logstore.protocol.types import DeferredRecords


class FetchInfo(Protocol):
    """One partition as a fetch request names it."""

    topic: str | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    fetcher_log_start_offset: int


@dataclass(slots=True)
class FetchParams:
    """One fetch request, as the replica manager reads it.

    ``replica_id``: the follower's broker id, -1 for a consumer. ``max_bytes``: the
    response limit. ``leader_only``: a consumer may read only from the leader (below
    Fetch v11). ``down_convert``: the response is converted to message format v0/v1, so
    each read is a :class:`ToConvert` and the whole is at most ``down_convert_max_bytes``.
    ``denied``: topics answered TOPIC_AUTHORIZATION_FAILED without a read.
    ``topic_name``: resolves a partition's topic on every read (topic ids, Fetch v13+;
    None when no topic has it), or None to take ``FetchInfo.topic`` as it is.
    ``replica_racks``: with ``replica.selector.class`` set (Fetch v11+), the rack of
    each replica of a partition that may serve a consumer (KIP-392), else None."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    read_committed: bool = False
    leader_only: bool = True
    down_convert: bool = False
    down_convert_max_bytes: int = 0
    denied: frozenset[str] | set[str] = frozenset()
    topic_name: Callable[[FetchInfo], str | None] | None = None
    selector: str | None = None
    client_rack: str = ""
    replica_racks: Callable[[Partition], dict[int, str | None]] | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(slots=True)
class FetchPartitionData:
    """What reading one partition found (offsets -1 when this broker holds no such
    partition). ``partition``: the broker's Partition when it holds one;
    ``aborted``: (producer id, first offset) of the aborted transactions the records
    overlap (read_committed), else None; ``diverging``: the (epoch, end offset) a
    follower whose log diverged truncates to; ``preferred_read_replica``: KIP-392's
    replica the consumer should read from instead (-1: this one)."""

    fetch: FetchInfo
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes | DeferredRecords | ToConvert = b""
    aborted: list[tuple[int, int]] | None = None
    partition: Partition | None = None
    diverging: tuple[int, int] | None = None
    preferred_read_replica: int = -1


@dataclass(slots=True)
class LogReadResult:
    """One read of a fetch's partitions: a :class:`FetchPartitionData` each, in the
    order asked; the bytes found (at least ``min_bytes`` when a consumer is sent to
    another replica, so the fetch answers at once); the partitions held here that were
    read (the keys a waiting fetch watches)."""

    reads: list[FetchPartitionData]
    bytes_read: int
    partitions: list[Partition]


class ToConvert:
    """A v0-v3 partition's read: the slice of v2 batches to convert down when the
    response is built (once, however often a long poll reads), and at most ``limit``
    bytes of messages to write. Its length, for ``min_bytes``, is the slice's."""

    __slots__ = ("slice", "limit")

    def __init__(self, slice_: FileSlice, limit: int) -> None:
        self.slice = slice_
        self.limit = limit

    def __len__(self) -> int:
        return self.slice.length
