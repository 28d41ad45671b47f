"""Partition reassignment (KIP-455, Kafka's ``KafkaController.onPartitionReassignment``),
on the controller's thread.

With RS the target replicas, ORS the origin ones, AR = RS − ORS and RR = ORS − RS:

Phase A, until every target replica is in the ISR:
  1. the assignment becomes ORS + AR with ``adding`` = AR and ``removing`` = RR, written to
     the topic's znode first, so that a new controller can resume;
  2. the leader epoch is bumped and LeaderAndIsr goes to every replica (AR start
     following); replicas dropped by a superseded reassignment are stopped and deleted.
Phase B, once RS ⊆ ISR (checked on submit, on AlterPartition and on broker startup):
  1. the assignment becomes RS in memory;
  2. a leader outside RS (or dead) is replaced by the first target replica live and in
     sync, otherwise the leader epoch is bumped;
  3. RR leave the ISR and get StopReplica(delete);
  4. the final assignment RS (no adding/removing) is written last, and the partition is
     removed from ``/admin/reassign_partitions``; UpdateMetadata to every broker.
A cancellation (target None) is a reassignment back to ORS. A leader that a new
reassignment drops (an added replica of a superseded one that became leader) stays, as a
removing replica, until a target replica takes over.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.controller_context import ControllerContext, ReplicaAssignment
from broker_py.controller.partition_state_machine import Election
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)


class PartitionReassignment:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def context(self) -> ControllerContext:
        return self.controller.context

    def _validate(
        self, tp: TopicPartition, target: list[int] | None
    ) -> tuple[int, str | None] | None:
        ctx = self.context
        if tp not in ctx.assignments or ctx.is_queued_for_deletion(tp.topic):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp.topic}-{tp.partition} does not exist"
        if target is None:
            if not ctx.assignments[tp].is_being_reassigned:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            return None
        if not target:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Empty replica list specified in partition reassignment.",
            )
        if len(set(target)) != len(target):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {target}",
            )
        if any(r < 0 for r in target):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Invalid broker id in replica list: {target}",
            )
        if not all(ctx.is_live(r) for r in target):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that may not exist: {target}",
            )
        return None

    def submit(
        self, reassignments: dict[TopicPartition, list[int] | None], from_zk: bool = False
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        ctx = self.context
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        for tp, target in sorted(reassignments.items()):
            error = self._validate(tp, target)
            if error is not None:
                results[tp] = error
                continue
            current = ctx.assignments[tp]
            goal = list(current.origin_replicas) if target is None else target
            new = ReplicaAssignment.for_reassignment(current, goal)
            results[tp] = (ErrorCode.NONE, None)
            if new == current and not current.is_being_reassigned:
                continue  # already there
            self._on_partition_reassignment(tp, new)
        self.controller.batch.send(self.controller.channel)
        return results

    def is_complete(self, tp: TopicPartition) -> bool:
        state = self.context.leadership.get(tp)
        return state is not None and all(
            r in state.isr for r in self.context.assignments[tp].target_replicas
        )

    def resume(self, tp: TopicPartition) -> None:
        """Re-checks an in-flight reassignment (after failover, ISR change or broker start)."""
        assignment = self.context.assignments.get(tp)
        if assignment is None or not assignment.is_being_reassigned:
            return
        if self.is_complete(tp):
            self._complete(tp, assignment.replicas)
            self.controller.batch.send(self.controller.channel)
            self.sync_zk_request()

    def _on_partition_reassignment(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        ctx = self.context
        controller = self.controller
        psm = controller.partition_state_machine
        old = ctx.assignments[tp]
        state = ctx.leadership.get(tp)
        if state is not None and state.leader >= 0 and state.leader not in new.replicas:
            # The leader (a replica of a superseded reassignment) stays until a target
            # replica can take over, as one being removed.
            new = ReplicaAssignment(
                new.replicas + (state.leader,), new.adding, new.removing + (state.leader,)
            )
        ctx.assignments[tp] = new
        if self.is_complete(tp):
            self._complete(tp, tuple(dict.fromkeys(old.replicas + new.replicas)))
            return
        controller.write_topic_assignment(tp.topic)
        for replica in (r for r in old.replicas if r not in new.replicas):
            psm.remove_replica_from_isr(replica, [tp])
            controller.batch.add_stop_replica([replica], tp, delete=True)
        psm.update_leader_epoch([tp])
        log.info(
            "reassigning %s-%d to %s (adding %s, removing %s)",
            tp.topic,
            tp.partition,
            list(new.target_replicas),
            list(new.adding),
            list(new.removing),
        )

    def _complete(self, tp: TopicPartition, previous_replicas: tuple[int, ...]) -> None:
        ctx = self.context
        controller = self.controller
        psm = controller.partition_state_machine
        target = ctx.assignments[tp].target_replicas
        ctx.assignments[tp] = ReplicaAssignment.of(target)
        state = ctx.leadership.get(tp)
        if state is None or state.leader not in target or not ctx.is_live(state.leader):
            psm.to_online([tp], Election.REASSIGNMENT)
        else:
            psm.update_leader_epoch([tp])
        for replica in (r for r in previous_replicas if r not in target):
            psm.remove_replica_from_isr(replica, [tp])
            controller.batch.add_stop_replica([replica], tp, delete=True)
        controller.write_topic_assignment(tp.topic)
        controller.batch.add_update_metadata(ctx.live_brokers, [tp])
        controller.topic_deletion.on_reassignment_done(tp.topic)
        log.info("reassignment of %s-%d to %s complete", tp.topic, tp.partition, list(target))

    def sync_zk_request(self) -> None:
        """Drops finished or refused partitions from ``/admin/reassign_partitions``."""
        controller = self.controller
        ctx = self.context
        request = controller.store.reassignment_request()
        if not request:
            return
        remaining = {
            tp: r
            for tp, r in request.items()
            if tp in ctx.assignments and ctx.assignments[tp].is_being_reassigned
        }
        if not remaining:
            controller.store.controller_delete_reassignment_request(ctx.epoch_zk_version)
        elif remaining != request:
            controller.store.request_reassignment(remaining)
