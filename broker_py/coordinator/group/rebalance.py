"""Rebalance: from PreparingRebalance to the next generation.

Kafka's ``maybePrepareRebalance``, ``prepareRebalance``, ``DelayedJoin`` and
``InitialDelayedJoin`` (their ``tryComplete``/``onExpiration``) and ``onCompleteJoin``,
as a mixin of :class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`.

Invariants:

- A group has at most one pending join completion, ``group.delayed_join``
  (:class:`~broker_py.coordinator.group.group_metadata.DelayedJoin`), timed on the
  coordinator's :class:`~broker_py.utils.time.Time`. Installing one cancels the one
  before; a timer that fires for an op that is no longer the group's does nothing.
- The initial one (the group was Empty) waits ``group.initial.rebalance.delay.ms`` and
  never completes early; when it expires with new members having joined meanwhile
  and rebalance time left, another initial one takes over, for at most the
  rebalance timeout in all.
- A plain one completes as soon as every member and pending member has rejoined, or
  when the rebalance timeout (the largest of the members') expires.
- Completion removes the dynamic members that did not rejoin and bumps the
  generation. With members left it answers every pending JoinGroup (the leader's
  with all members' metadata), restarts each member's session timer and starts the
  pending-sync expiry (:mod:`.sync_group`); without, the group is Empty and that is
  written to ``__consumer_offsets``. Only static members that did not rejoin hold
  the group in PreparingRebalance for one more rebalance timeout.
- Starting a rebalance from CompletingRebalance answers every waiting SyncGroup
  REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    DelayedJoin,
    Group,
)
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.utils.time import Time

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")


class RebalanceMixin:
    """PreparingRebalance and the join completion; uses the shell's removal,
    :mod:`.sync_group` and :mod:`.heartbeat`."""

    # The shell's (GroupCoordinator.__init__/start).
    config: BrokerConfig
    manager: GroupMetadataManager
    time: Time

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            # Members waiting in SyncGroup must rejoin.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s-%d) (reason: %s)",
            group.group_id,
            group.generation_id,
            OFFSETS_TOPIC,
            self.partition_for(group.group_id),
            reason,
        )
        if initial:
            delay = self.config["group.initial.rebalance.delay.ms"]
            self._watch_join(
                group, DelayedJoin(True, delay, max(group.rebalance_timeout_ms - delay, 0))
            )
        else:
            self._watch_join(group, DelayedJoin(False, group.rebalance_timeout_ms))

    def _watch_join(self, group: Group, op: DelayedJoin) -> None:
        """Installs ``op`` as the group's pending join completion (tryCompleteElseWatch)."""
        if group.delayed_join is not None:
            group.delayed_join.cancel()
        group.delayed_join = op
        op.timer = self.time.call_later(op.delay_ms / 1000, self._on_join_expired, group, op)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        op = group.delayed_join
        if op is not None and not op.initial and group.has_all_members_joined():
            self._complete_delayed_join(group, op)

    def _on_join_expired(self, group: Group, op: DelayedJoin) -> None:
        if group.delayed_join is not op:
            return
        op.timer = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            configured = self.config["group.initial.rebalance.delay.ms"]
            delay = min(configured, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._watch_join(group, DelayedJoin(True, delay, remaining))
        else:
            self._complete_delayed_join(group, op)

    def _complete_delayed_join(self, group: Group, op: DelayedJoin) -> None:
        op.cancel()
        group.delayed_join = None
        self._on_complete_join(group)

    def _on_complete_join(self, group: Group) -> None:
        not_rejoined = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        if not_rejoined:
            log.info(
                "group %s removed dynamic members who did not rejoin: %s",
                group.group_id,
                [m.member_id for m in not_rejoined],
            )
            for member in not_rejoined:
                self._remove_member(group, member.member_id)
        if group.is_(DEAD):
            log.info("group %s is dead, skipping rebalance stage", group.group_id)
        elif not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or for
            # their sessions to expire) one more rebalance timeout.
            log.error(
                "group %s could not complete rebalance because no members rejoined", group.group_id
            )
            self._watch_join(group, DelayedJoin(False, group.rebalance_timeout_ms))
        else:
            group.init_next_generation(self.time.milliseconds())
            if group.is_(EMPTY):
                log.info(
                    "group %s with generation %d is now empty", group.group_id, group.generation_id
                )

                def stored(error: ErrorCode, group_id: str = group.group_id) -> None:
                    if error:
                        log.warning(
                            "failed to write empty metadata for group %s: %s", group_id, error.name
                        )

                self.manager.store_group(group, {}, stored)
            else:
                log.info(
                    "stabilized group %s generation %d (%s-%d) with %d members",
                    group.group_id,
                    group.generation_id,
                    OFFSETS_TOPIC,
                    self.partition_for(group.group_id),
                    group.size,
                )
                for member in list(group.members.values()):
                    member.complete_join(
                        self._join_result(
                            group, member, include_members=group.is_leader(member.member_id)
                        )
                    )
                    self._schedule_heartbeat_expiration(group, member)
                    member.is_new = False
                    group.pending_sync_members.add(member.member_id)
                self._schedule_pending_sync(group)
