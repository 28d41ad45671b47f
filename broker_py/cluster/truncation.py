"""Where a diverging follower's log must be cut (Kafka's ``getOffsetTruncationState`` and
the leader's DivergingEpoch check in ``Partition.readRecords``). Pure functions.

The leader-epoch cache of a log maps each epoch to the offset where it starts; the end
offset of epoch E is the start of the first epoch after E (the log end for the latest).

Leader side: a follower fetching at ``fetch_offset`` whose last batch was written in
``last_fetched_epoch`` diverges when the leader's largest epoch ≤ that epoch is smaller
(the leader never had it) or ends before ``fetch_offset`` (the follower holds records
of it the leader does not). The leader then answers DivergingEpoch (its epoch, end
offset) and no records. A leader with no epoch at or below it at all (an empty epoch
cache) cannot tell: the fetch proceeds by offsets, and one past its log end is out of
range.

Follower side, given the leader's (epoch, end offset):
- the leader knows no epoch (-1, -1): keep the log, fetch next without an epoch;
- the follower has that epoch too: cut to the smaller of both ends of it; done;
- the follower's largest epoch below it differs: cut to the smaller end and ask again
  with the follower's new last epoch (not done);
- the follower has no epoch at or below it: cut to the leader's end offset.
Never past the follower's own log end. A truncation never depends on the high
watermark (CLUSTER.md: truncating to it loses committed records after two quick
leader changes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEndOffset(NamedTuple):
    epoch: int
    end_offset: int


class OffsetTruncationState(NamedTuple):
    offset: int
    completed: bool


def diverging_epoch(
    leader_end_for_epoch: EpochEndOffset, last_fetched_epoch: int, fetch_offset: int
) -> EpochEndOffset | None:
    """The DivergingEpoch a leader answers, or None when the follower's log agrees.
    ``leader_end_for_epoch`` is the leader's end offset for ``last_fetched_epoch``."""
    if last_fetched_epoch < 0 or leader_end_for_epoch == (UNDEFINED_EPOCH, UNDEFINED_OFFSET):
        return None  # no epoch to compare with: the offsets alone decide (out of range)
    if (
        leader_end_for_epoch.epoch < last_fetched_epoch
        or leader_end_for_epoch.end_offset < fetch_offset
    ):
        return leader_end_for_epoch
    return None


def offset_truncation_state(
    leader: EpochEndOffset,
    follower_end_for_epoch: Callable[[int], EpochEndOffset],
    log_end_offset: int,
) -> OffsetTruncationState:
    """Where the follower cuts its log after the leader answered ``leader`` for the
    follower's last epoch; ``follower_end_for_epoch(e)`` is the follower's own largest
    epoch ≤ e and its end offset ((-1, -1) when none)."""
    if leader.epoch == UNDEFINED_EPOCH or leader.end_offset == UNDEFINED_OFFSET:
        # The leader has no epoch at all (an empty log): keep the log; the fetch that
        # follows, without an epoch, gets OFFSET_OUT_OF_RANGE if it is ahead.
        return OffsetTruncationState(log_end_offset, True)
    mine = follower_end_for_epoch(leader.epoch)
    if mine.epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader.end_offset, log_end_offset), True)
    offset = min(mine.end_offset, leader.end_offset, log_end_offset)
    return OffsetTruncationState(offset, mine.epoch == leader.epoch)
