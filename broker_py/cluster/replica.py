"""A follower as its leader sees it (Kafka's ``Replica``), and the leader's pending ISR
change (Kafka's ``PendingExpandIsr`` / ``PendingShrinkIsr``). Pure: times are given.

A follower's log end offset (LEO) is known only from its fetches: a fetch at offset F
shows the follower holds everything below F. ``last_caught_up_time_ms`` is the last
time the follower was known to be caught up:
- the time of this fetch, if F reached the leader's LEO as it is now;
- else the time of its previous fetch, if F reached the leader's LEO as it was then
  (the follower has since read all the leader had at that fetch);
- never earlier than before.
A follower is out of sync when its LEO differs from the leader's and it has not caught
up for ``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Replica:
    broker_id: int
    log_end_offset: int = -1  # unknown until its first fetch
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, leader_end_offset: int, fetch_time_ms: int
    ) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def reset(self, in_sync: bool, now_ms: int, leader_end_offset: int) -> None:
        """On a new leadership: nothing is known of the follower's log; one in the ISR
        counts as caught up now (so it is not shrunk away at once)."""
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        self.last_fetch_leader_log_end_offset = leader_end_offset if in_sync else -1
        self.last_fetch_time_ms = now_ms if in_sync else 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (
            self.log_end_offset == leader_end_offset
            or now_ms - self.last_caught_up_time_ms <= max_lag_ms
        )


@dataclasses.dataclass(frozen=True)
class PendingIsrChange:
    """An ISR change sent to the controller (AlterPartition) and not yet answered; one at
    a time per partition. While an expansion is pending the high watermark already counts
    the added replica (it must reach it too); a shrink counts once committed."""

    proposed_isr: frozenset[int]
    expanding: bool
