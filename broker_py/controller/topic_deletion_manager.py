"""Topic deletion (Kafka's ``TopicDeletionManager``), on the controller's thread.

A topic queued in ``/admin/delete_topics`` is deleted in this order:
1. UpdateMetadata with leader -2 for its partitions to every live broker (clients stop
   seeing it);
2. its partitions go Offline then NonExistent;
3. every replica gets StopReplica(delete=false) then StopReplica(delete=true);
4. when every replica confirmed the deletion, the topic's znodes are removed.

A replica on a dead broker, or one whose deletion failed, makes the topic ineligible:
deletion pauses until that broker starts again, and resumes then (also after a
controller failover, which re-reads the queue).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_py.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker_py.controller.controller_context import ControllerContext
    from broker_py.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def context(self) -> ControllerContext:
        return self.controller.context

    def enqueue(self, topics: set[str]) -> None:
        ctx = self.context
        for topic in sorted(topics):
            if topic not in ctx.topic_ids or topic in ctx.topics_to_delete:
                continue
            ctx.topics_to_delete.add(topic)
            if any(ctx.assignments[tp].is_being_reassigned for tp in ctx.partitions_of(topic)):
                ctx.topics_ineligible_for_deletion.add(
                    topic
                )  # resumes when the reassignment completes
        self.resume()

    def resume(self) -> None:
        """Starts or finishes the deletion of every eligible queued topic."""
        ctx = self.context
        controller = self.controller
        for topic in sorted(ctx.topics_to_delete):
            if topic in ctx.topics_ineligible_for_deletion:
                continue
            pending = ctx.deletion_pending.get(topic)
            if pending is None:
                self._start(topic)
            elif not pending:
                self._complete(topic)
        controller.batch.send(controller.channel)

    def _start(self, topic: str) -> None:
        ctx = self.context
        controller = self.controller
        partitions = ctx.partitions_of(topic)
        controller.batch.add_update_metadata(ctx.live_brokers, partitions)  # leader -2
        controller.partition_state_machine.to_offline(partitions)
        controller.partition_state_machine.to_non_existent(partitions)
        pending: set[tuple[TopicPartition, int]] = set()
        for tp in partitions:
            for replica in ctx.replicas(tp):
                pending.add((tp, replica))
        ctx.deletion_pending[topic] = pending
        self._send_stop_replicas(topic, {b for _, b in pending})
        if not pending:
            self._complete(topic)

    def _send_stop_replicas(self, topic: str, brokers: set[int]) -> None:
        ctx = self.context
        batch = self.controller.batch
        for tp, replica in sorted(ctx.deletion_pending.get(topic, ())):
            if replica not in brokers:
                continue
            if ctx.is_live(replica):
                batch.add_stop_replica([replica], tp, delete=False)
                batch.add_stop_replica([replica], tp, delete=True)
            else:
                ctx.topics_ineligible_for_deletion.add(topic)

    def _complete(self, topic: str) -> None:
        ctx = self.context
        log.info("deleting topic %s: every replica is gone", topic)
        self.controller.store.controller_delete_topic(ctx.epoch_zk_version, topic)
        ctx.remove_topic(topic)

    def on_stop_replica_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        ctx = self.context
        for tp, error in errors.items():
            pending = ctx.deletion_pending.get(tp.topic)
            if pending is None:
                continue
            if error == 0:
                pending.discard((tp, broker_id))
            else:
                log.warning(
                    "broker %d failed to delete %s-%d (error %d); deletion of %s paused",
                    broker_id,
                    tp.topic,
                    tp.partition,
                    error,
                    tp.topic,
                )
                ctx.topics_ineligible_for_deletion.add(tp.topic)
        self.resume()

    def on_brokers_failed(self, broker_ids: set[int]) -> None:
        ctx = self.context
        for topic, pending in ctx.deletion_pending.items():
            if any(b in broker_ids for _, b in pending):
                ctx.topics_ineligible_for_deletion.add(topic)

    def on_brokers_started(self, broker_ids: set[int]) -> None:
        """Retries the deletion of topics paused by replicas on these brokers."""
        ctx = self.context
        for topic in sorted(ctx.topics_ineligible_for_deletion):
            pending = ctx.deletion_pending.get(topic)
            if pending is None:
                continue
            if any(b in broker_ids for _, b in pending) and all(ctx.is_live(b) for _, b in pending):
                ctx.topics_ineligible_for_deletion.discard(topic)
                self._send_stop_replicas(topic, {b for _, b in pending})
        self.resume()

    def on_reassignment_done(self, topic: str) -> None:
        ctx = self.context
        if topic in ctx.topics_ineligible_for_deletion and topic not in ctx.deletion_pending:
            if not any(ctx.assignments[tp].is_being_reassigned for tp in ctx.partitions_of(topic)):
                ctx.topics_ineligible_for_deletion.discard(topic)
