"""One member of a classic group (Kafka's ``MemberMetadata``) and the answers its
waiting JoinGroup and SyncGroup get.

Plain state; the group it belongs to is
:class:`~broker_py.coordinator.group.group_metadata.Group`, the logic that answers
it the coordinator's (:mod:`broker_py.coordinator.group.group_coordinator`).

Invariants:

- A member is *awaiting join* exactly while ``join_future`` is set, *awaiting sync*
  exactly while ``sync_future`` is set; :meth:`MemberMetadata.complete_join` and
  :meth:`MemberMetadata.complete_sync` answer that request at most once and clear it.
- ``protocols`` keeps the member's order of preference (its vote).
- ``heartbeat_timer`` is the member's one session timer (of the coordinator's
  :class:`~broker_py.utils.time.Time`), or None.
"""

from __future__ import annotations

import asyncio
import dataclasses

from broker_py.utils.time import Timer
from logstore.protocol.error_codes import ErrorCode

__all__ = ["JoinGroupResult", "MemberMetadata", "Protocols", "SyncGroupResult"]

Protocols = list[tuple[str, bytes]]


@dataclasses.dataclass(slots=True)
class JoinGroupResult:
    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata of the selected protocol); leader only
    members: list[tuple[str, str | None, bytes]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberMetadata:
    """One member: its identity, timeouts, protocols, assignment and pending responses."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols: Protocols = list(protocols)
        self.assignment = b""
        self.is_new = False
        self.join_future: asyncio.Future[JoinGroupResult] | None = None
        self.sync_future: asyncio.Future[SyncGroupResult] | None = None
        self.heartbeat_timer: Timer | None = None

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id!r}, "
            f"group_instance_id={self.group_instance_id!r}, "
            f"client_id={self.client_id!r}, client_host={self.client_host!r})"
        )

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, in the same order, with the same metadata."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols)
        )

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among ``candidates``."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def complete_join(self, result: JoinGroupResult) -> bool:
        """Answers the pending JoinGroup, if any; True if there was one."""
        future, self.join_future = self.join_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def complete_sync(self, result: SyncGroupResult) -> bool:
        """Answers the pending SyncGroup, if any; True if there was one."""
        future, self.sync_future = self.sync_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None
