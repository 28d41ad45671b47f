"""Partition states and leader elections (Kafka's ``ZkPartitionStateMachine`` with the
replica-ISR part of ``ZkReplicaStateMachine``), driven by the controller's thread.

States: NonExistent → New → Online ⇄ Offline → NonExistent.

- New → Online writes the first state node: leader = the first live replica, ISR = the
  live replicas, leader epoch 0; LeaderAndIsr(is_new) to the live replicas.
- Offline/Online → Online elects by a :class:`Election` kind; every new leader bumps the
  leader epoch, and the state node is written only if its partition epoch is unchanged
  (a lost race re-reads the node and tries again, a bounded number of times).
- Removing a replica from the ISR (broker gone or shutting down) bumps the leader epoch
  too; the ISR never shrinks below one member, and a removed leader leaves the partition
  leaderless (-1).
Every write is fenced by the controller epoch: ControllerMovedError propagates to the
controller, which resigns.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Iterable

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import partition_leader_election as elections
from broker_py.controller.controller_context import ControllerContext, PartitionState
from broker_py.controller.controller_request_batch import ControllerRequestBatch
from broker_py.controller.controller_store import ControllerStore, PartitionEpochMismatch
from broker_py.controller.leader_and_isr import NO_LEADER, LeaderIsrAndControllerEpoch

log = logging.getLogger(__name__)

MAX_WRITE_ATTEMPTS = 5


class Election(enum.Enum):
    OFFLINE = "offline"
    OFFLINE_UNCLEAN = "offline_unclean"  # unclean allowed whatever the topic says
    REASSIGNMENT = "reassignment"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


@dataclasses.dataclass(frozen=True)
class ElectionResult:
    elected: dict[TopicPartition, LeaderIsrAndControllerEpoch]
    failed: dict[TopicPartition, str]  # partition -> why no leader


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        store: ControllerStore,
        batch: ControllerRequestBatch,
        unclean_default: Callable[[], bool],
    ) -> None:
        self.context = context
        self.store = store
        self.batch = batch
        self._unclean_default = unclean_default

    # ---- startup ----

    def initialize_states(self) -> None:
        """States from the loaded leadership: Online if the leader is live, Offline if
        not, New when the partition has no state node yet."""
        ctx = self.context
        for tp in ctx.assignments:
            state = ctx.leadership.get(tp)
            if state is None:
                ctx.states[tp] = PartitionState.NEW
            elif ctx.is_replica_online(state.leader, tp):
                ctx.states[tp] = PartitionState.ONLINE
            else:
                ctx.states[tp] = PartitionState.OFFLINE

    # ---- transitions ----

    def to_new(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.context.states[tp] = PartitionState.NEW

    def to_offline(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            if self.context.states.get(tp) is not None:
                self.context.states[tp] = PartitionState.OFFLINE

    def to_non_existent(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.context.states[tp] = PartitionState.NON_EXISTENT

    def trigger_online_partition_state_change(
        self, topics: Iterable[str] | None = None
    ) -> ElectionResult:
        """Elects leaders for every New or Offline partition (of ``topics``, or all) not
        queued for deletion."""
        ctx = self.context
        wanted = None if topics is None else set(topics)
        partitions = [
            tp
            for tp in ctx.partitions_in_states(PartitionState.NEW, PartitionState.OFFLINE)
            if not ctx.is_queued_for_deletion(tp.topic) and (wanted is None or tp.topic in wanted)
        ]
        return self.to_online(partitions, Election.OFFLINE)

    def to_online(self, partitions: Iterable[TopicPartition], election: Election) -> ElectionResult:
        ctx = self.context
        new = [tp for tp in partitions if ctx.states.get(tp) == PartitionState.NEW]
        other = [
            tp
            for tp in partitions
            if ctx.states.get(tp) in (PartitionState.OFFLINE, PartitionState.ONLINE)
        ]
        result = ElectionResult({}, {})
        if new:
            self._initialize_leader_and_isr(new, result)
        if other:
            self._elect(other, election, result)
        return result

    def _initialize_leader_and_isr(
        self, partitions: list[TopicPartition], result: ElectionResult
    ) -> None:
        ctx = self.context
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            live = [r for r in ctx.replicas(tp) if ctx.is_live(r)]
            if not live:
                result.failed[tp] = (
                    f"no live replica of {tp.topic}-{tp.partition} among {list(ctx.replicas(tp))}"
                )
                continue
            to_create[tp] = LeaderIsrAndControllerEpoch(live[0], 0, live, ctx.epoch)
        if not to_create:
            return
        written = self.store.controller_create_partition_states(ctx.epoch_zk_version, to_create)
        for tp, outcome in written.items():
            if isinstance(outcome, PartitionEpochMismatch):
                # A state node left by an earlier controller: take it as it is and elect.
                existing = self.store.partition_states([tp]).get(tp)
                if existing is None:
                    result.failed[tp] = "state node vanished while being created"
                    continue
                ctx.leadership[tp] = existing
                ctx.states[tp] = PartitionState.OFFLINE
                self._elect([tp], Election.OFFLINE, result)
                continue
            state = dataclasses.replace(to_create[tp], partition_epoch=outcome)
            ctx.leadership[tp] = state
            ctx.states[tp] = PartitionState.ONLINE
            result.elected[tp] = state
            self.batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)

    def _select(
        self, tp: TopicPartition, current: LeaderIsrAndControllerEpoch, election: Election
    ) -> tuple[LeaderIsrAndControllerEpoch | None, str]:
        ctx = self.context
        assignment = ctx.assignments[tp]
        # Live brokers whose replica of tp is online (a failed log dir's replica is not).
        live = {b for b in ctx.live_or_shutting_down() if ctx.is_replica_online(b, tp)}
        isr = current.isr
        if election in (Election.OFFLINE, Election.OFFLINE_UNCLEAN):
            unclean_ok = election is Election.OFFLINE_UNCLEAN or ctx.unclean_election_enabled(
                tp.topic, self._unclean_default()
            )
            leader, unclean = elections.offline_partition_leader(
                assignment.replicas, isr, live, unclean_ok
            )
            if leader is None:
                return None, "no live replica in the ISR" + (
                    "" if unclean_ok else " and unclean election is disabled"
                )
            new_isr = [leader] if unclean else [r for r in isr if r in live]
        elif election is Election.REASSIGNMENT:
            leader = elections.reassign_partition_leader(assignment.target_replicas, isr, live)
            if leader is None:
                return None, "no target replica is live and in sync"
            new_isr = list(isr)
        elif election is Election.PREFERRED:
            leader = elections.preferred_replica_partition_leader(assignment.replicas, isr, live)
            if leader is None:
                return (
                    None,
                    f"preferred replica {assignment.replicas[0] if assignment.replicas else '-'} "
                    "is not live and in sync",
                )
            new_isr = list(isr)
        else:
            leader = elections.controlled_shutdown_partition_leader(
                assignment.replicas, isr, live, ctx.shutting_down
            )
            if leader is None:
                return None, "no other replica is live and in sync"
            new_isr = [r for r in isr if r not in ctx.shutting_down]
        return dataclasses.replace(
            current,
            leader=leader,
            leader_epoch=current.leader_epoch + 1,
            isr=new_isr,
            controller_epoch=ctx.epoch,
        ), ""

    def _elect(
        self, partitions: list[TopicPartition], election: Election, result: ElectionResult
    ) -> None:
        ctx = self.context
        pending = list(partitions)
        for _ in range(MAX_WRITE_ATTEMPTS):
            if not pending:
                return
            updates: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            for tp in pending:
                current = ctx.leadership.get(tp)
                if current is None:
                    result.failed[tp] = "no leadership state"
                    continue
                chosen, why = self._select(tp, current, election)
                if chosen is None:
                    result.failed[tp] = why
                    if election in (Election.OFFLINE, Election.OFFLINE_UNCLEAN):
                        ctx.states[tp] = PartitionState.OFFLINE
                        self._mark_leaderless(tp, current)
                    continue
                updates[tp] = chosen
            retry = self._write(updates, result, election)
            pending = retry
        for tp in pending:
            result.failed[tp] = "the state node kept changing"

    def _mark_leaderless(self, tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> None:
        """An offline partition nobody can lead: Kafka keeps its state node as it is (the
        dead leader stays recorded) and metadata shows it without a live leader."""
        log.warning(
            "partition %s-%d has no eligible leader (ISR %s)", tp.topic, tp.partition, current.isr
        )

    def _write(
        self,
        updates: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        result: ElectionResult,
        election: Election | None,
    ) -> list[TopicPartition]:
        """Writes the states conditionally; returns the partitions whose node moved (their
        leadership re-read for the next attempt)."""
        if not updates:
            return []
        ctx = self.context
        written = self.store.controller_update_partition_states(ctx.epoch_zk_version, updates)
        retry = []
        for tp, outcome in written.items():
            if isinstance(outcome, PartitionEpochMismatch):
                fresh = self.store.partition_states([tp]).get(tp)
                if fresh is None:
                    result.failed[tp] = "state node is gone"
                    continue
                ctx.leadership[tp] = fresh
                retry.append(tp)
                continue
            state = dataclasses.replace(updates[tp], partition_epoch=outcome)
            ctx.leadership[tp] = state
            if election is not None:
                ctx.states[tp] = (
                    PartitionState.ONLINE if state.leader >= 0 else PartitionState.OFFLINE
                )
                result.elected[tp] = state
            self.batch.add_leader_and_isr(ctx.replicas(tp), tp)
        return retry

    def update_leader_epoch(self, partitions: Iterable[TopicPartition]) -> ElectionResult:
        """Same leader and ISR, next leader epoch (a reassignment's membership change)."""
        ctx = self.context
        result = ElectionResult({}, {})
        pending = [tp for tp in partitions if tp in ctx.leadership]
        for _ in range(MAX_WRITE_ATTEMPTS):
            if not pending:
                break
            updates = {
                tp: dataclasses.replace(
                    ctx.leadership[tp],
                    leader_epoch=ctx.leadership[tp].leader_epoch + 1,
                    controller_epoch=ctx.epoch,
                )
                for tp in pending
            }
            pending = self._write(updates, result, None)
            for tp in updates:
                if tp not in pending and tp not in result.failed:
                    result.elected[tp] = ctx.leadership[tp]
        return result

    def remove_replica_from_isr(
        self, replica: int, partitions: Iterable[TopicPartition]
    ) -> ElectionResult:
        """Takes ``replica`` out of each partition's ISR (not below one member), with a new
        leader epoch that the partition's other replicas are sent (LeaderAndIsr); a removed
        leader leaves the partition leaderless."""
        ctx = self.context
        result = ElectionResult({}, {})
        pending = [tp for tp in partitions if tp in ctx.leadership]
        for _ in range(MAX_WRITE_ATTEMPTS):
            updates: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            for tp in pending:
                current = ctx.leadership[tp]
                if replica not in current.isr and current.leader != replica:
                    continue
                isr = (
                    current.isr
                    if len(current.isr) == 1
                    else [r for r in current.isr if r != replica]
                )
                leader = NO_LEADER if current.leader == replica else current.leader
                updates[tp] = dataclasses.replace(
                    current,
                    leader=leader,
                    leader_epoch=current.leader_epoch + 1,
                    isr=isr,
                    controller_epoch=ctx.epoch,
                )
            if not updates:
                break
            pending = self._write(updates, result, None)
            for tp in updates:
                if tp not in pending and tp not in result.failed:
                    result.elected[tp] = ctx.leadership[tp]
                    if ctx.leadership[tp].leader == NO_LEADER:
                        ctx.states[tp] = PartitionState.OFFLINE
                    # The other replicas learn the new leader epoch (Kafka's OfflineReplica
                    # transition): a follower left in the old epoch is fenced by its leader.
                    self.batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r != replica], tp)
        return result
