"""The ConsumerGroupHeartbeat request and response as the decision logic sees them (the
response is also ShareGroupHeartbeat's: the same fields).

Decoded fields only: the handler maps the wire's topic-partition lists to
:data:`Assignment` (topic id -> partitions) and back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.records import ClassicMemberMetadata, Record
from logstore.protocol.error_codes import ErrorCode


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    # None: unchanged since the previous heartbeat.
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # The partitions the member owns; None: unchanged since the previous heartbeat.
    topic_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    # Set when the request is a classic member's JoinGroup (None: a ConsumerGroupHeartbeat,
    # whose member then no longer uses the classic protocol).
    classic_member_metadata: ClassicMemberMetadata | None = None

    def is_full(self) -> bool:
        """Whether the request carries every field (a join, or a member resending all
        after an error): then the response carries the whole assignment."""
        return self.member_epoch == 0 or (
            self.rebalance_timeout_ms != -1
            and (self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None)
            and self.topic_partitions is not None
        )


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # The member's whole assignment; None when it did not change (and the request was
    # not full; a share member: it did not join).
    assignment: dict[uuid.UUID, frozenset[int]] | None = None


@dataclass
class HeartbeatResult:
    response: HeartbeatResponse
    # Already applied to the group; the caller persists them in order.
    records: list[Record] = field(default_factory=list)
