"""KIP-951 leader hints: a Produce (v10+) or Fetch (v12+ current leader, v16+ node
endpoints) answer that tells a client this broker does not lead a partition names the
partition's current leader and epoch, and the endpoints of those leaders on the
client's listener, so the client can go there without a Metadata round trip.

Hints come from the metadata cache (the controller's UpdateMetadata); a partition whose
leader is unknown or offline gets none.
"""

from __future__ import annotations

from logstore.protocol.error_codes import ErrorCode

NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
PRODUCE_HINT_ERRORS = frozenset({NOT_LEADER_OR_FOLLOWER})
FETCH_HINT_ERRORS = frozenset({NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH})
PRODUCE_MIN_VERSION = 10
FETCH_MIN_VERSION = 12
FETCH_ENDPOINTS_MIN_VERSION = 16

Endpoint = tuple[int, str, int, "str | None"]


class LeaderHints:
    """Collects the leaders named in one response and their endpoints."""

    def __init__(self, apis, connection) -> None:
        self._apis = apis
        self._connection = connection
        self.leaders: set[int] = set()

    def current_leader(self, topic: str, index: int) -> tuple[int, int] | None:
        state = self._apis.metadata_cache.partition_state(topic, index)
        if state is None or state.leader < 0:
            return None
        self.leaders.add(state.leader)
        return state.leader, state.leader_epoch

    def node_endpoints(self) -> list[Endpoint] | None:
        if not self.leaders:
            return None
        listener = self._apis.advertised_listener(self._connection)
        nodes = self._apis.metadata_cache.alive_nodes(listener)
        return [(n.id, n.host, n.port, n.rack) for n in nodes if n.id in self.leaders] or None


def with_produce_hints(
    apis, connection, version: int, results: list
) -> tuple[list, list[Endpoint] | None]:
    """``results`` ([(topic, [(index, error, ...7 fields), ...]), ...]) with a current
    leader appended to each NOT_LEADER_OR_FOLLOWER partition, and the node endpoints;
    unchanged below v10 or when no partition needs a hint."""
    if version < PRODUCE_MIN_VERSION or not any(
        p[1] in PRODUCE_HINT_ERRORS for _, parts in results for p in parts
    ):
        return results, None
    hints = LeaderHints(apis, connection)
    out = [
        (
            topic,
            [
                (*p, hints.current_leader(topic, p[0]) if p[1] in PRODUCE_HINT_ERRORS else None)
                for p in parts
            ],
        )
        for topic, parts in results
    ]
    return out, hints.node_endpoints()
