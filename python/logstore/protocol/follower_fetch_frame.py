"""A follower's Fetch request, read by the storage engine's codec in one call.

Every replica fetcher sends a Fetch each round, so on a leader the follower's Fetch is
as hot as Produce. A frame that is a follower's sessionless fetch of v12-v17 (a
replica id >= 0, in ``replica_state`` from v15; session id 0 and epoch -1; no
forgotten topics; see ``rust/src/follower_fetch_request.rs``) becomes a
:class:`FollowerFetchFrame`: the header's fields, the replica id and limits, and per
partition its fetch state, with no message objects built. Any other Fetch frame, a
consumer's, one with a fetch session, or a malformed one, goes through the generic
schema codec and its errors.
"""

from __future__ import annotations

import logstore
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.engine_frame import EngineFrame

# One partition's fetch state: (partition, current_leader_epoch, fetch_offset,
# last_fetched_epoch, log_start_offset, partition_max_bytes).
PartitionFetchState = tuple[int, int, int, int, int, int]
# What logstore.parse_follower_fetch_request returns for a follower's fetch: (api_version,
# correlation_id, client_id, replica_id, max_wait_ms, min_bytes, max_bytes, topics), each
# topic (name (v12) or topic id as an int (v13+), partitions).
ParsedFollowerFetch = tuple[
    int,
    int,
    str | None,
    int,
    int,
    int,
    int,
    tuple[tuple[str | int, tuple[PartitionFetchState, ...]], ...],
]


class FollowerFetchFrame(EngineFrame):
    """A follower's Fetch request as its parsed fields.

    It reads as a :class:`~logstore.protocol.frame.Request` does (``header``,
    ``body``, ``size``); ``body`` is decoded on demand by the generic codec. ``topics``
    is ``((topic, ((partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
    log_start_offset, partition_max_bytes), ...)), ...)``, topic a name (v12) or a topic
    id as an int (v13+).
    """

    __slots__ = (
        "max_bytes",
        "max_wait_ms",
        "min_bytes",
        "replica_id",
        "topics",
    )

    api_key = ApiKey.FETCH

    def __init__(self, frame: bytes, parsed: ParsedFollowerFetch) -> None:
        self.frame = frame
        (
            self.api_version,
            self.correlation_id,
            self.client_id,
            self.replica_id,
            self.max_wait_ms,
            self.min_bytes,
            self.max_bytes,
            self.topics,
        ) = parsed


def parse_follower_fetch_frame(frame: bytes) -> FollowerFetchFrame | None:
    """The frame as a :class:`FollowerFetchFrame`, or None to decode it with the generic
    codec."""
    parsed = logstore.parse_follower_fetch_request(frame)
    return None if parsed is None else FollowerFetchFrame(frame, parsed)
