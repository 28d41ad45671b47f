"""The requests a controller decision produces (Kafka's ``ControllerBrokerRequestBatch``).

A decision adds partitions to the batch; :meth:`ControllerRequestBatch.send` then builds
one request per broker from the context as it is at that moment and hands them to the
:class:`ControllerChannel`, LeaderAndIsr first, then UpdateMetadata, then StopReplica:
per broker the channel keeps that order, so a broker never sees metadata that is newer
than its own replicas' state.

The requests are plain data (below); the channel turns them into Kafka's messages.
UpdateMetadata carries leader -2 (``LEADER_DURING_DELETE``) for a topic queued for
deletion, which removes it from the brokers' caches.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Protocol

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.controller_context import ControllerContext
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.controller.leader_and_isr import LEADER_DURING_DELETE


@dataclasses.dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    is_new: bool
    leader_recovery_state: int = 0


@dataclasses.dataclass(frozen=True)
class UpdateMetadataPartitionState:
    partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class StopReplicaPartitionState:
    partition: TopicPartition
    leader_epoch: int  # -2 (deletion) or the current epoch; -1 skips the broker's check
    delete: bool


@dataclasses.dataclass(frozen=True)
class LeaderAndIsrRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: dict[str, uuid.UUID]
    live_leaders: tuple[BrokerRegistration, ...]
    full: bool = False  # Type 1 (FULL): every partition the broker hosts


@dataclasses.dataclass(frozen=True)
class UpdateMetadataRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[UpdateMetadataPartitionState, ...]
    topic_ids: dict[str, uuid.UUID]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclasses.dataclass(frozen=True)
class StopReplicaRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartitionState, ...]


ControllerRequest = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


class ControllerChannel(Protocol):
    def add_broker(self, registration: BrokerRegistration) -> None:
        """Opens a queue to a broker that joined (or re-registered)."""

    def remove_broker(self, broker_id: int) -> None:
        """Drops the queue to a broker that left, with whatever it still held."""

    def send(
        self,
        broker_id: int,
        request: ControllerRequest,
        on_response: Callable[[object], None] | None = None,
    ) -> None:
        """Queues ``request`` for ``broker_id`` (in order per broker). ``on_response`` gets
        a ``dict[TopicPartition, int]`` of per-partition errors (LeaderAndIsr, StopReplica)
        or the error code (UpdateMetadata); it runs on another thread."""


class ControllerRequestBatch:
    def __init__(self, controller_id: int, context: ControllerContext) -> None:
        self.controller_id = controller_id
        self.context = context
        self._leader_and_isr: dict[int, dict[TopicPartition, bool]] = defaultdict(
            dict
        )  # broker -> tp -> is_new
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = defaultdict(
            dict
        )  # broker -> tp -> delete
        self._metadata_brokers: set[int] = set()
        self._metadata_partitions: set[TopicPartition] = set()
        self.on_stop_replica_response: Callable[[int, dict[TopicPartition, int]], None] | None = (
            None
        )
        self.on_update_metadata_response: Callable[[int, set[str], object], None] | None = None
        # (broker id, broker epoch sent to, per-partition errors) of each LeaderAndIsr.
        self.on_leader_and_isr_response: Callable[[int, int, object], None] | None = None

    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._stop_replica or self._metadata_brokers)

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        """LeaderAndIsr of ``tp``'s current state to the live ones of ``broker_ids``, and
        UpdateMetadata of it to every live broker (Kafka does both together)."""
        if tp not in self.context.leadership:
            return
        for broker_id in broker_ids:
            if broker_id >= 0 and self.context.is_live(broker_id):
                self._leader_and_isr[broker_id][tp] = (
                    self._leader_and_isr[broker_id].get(tp, False) or is_new
                )
        self.add_update_metadata(self.context.live_brokers, [tp])

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for broker_id in broker_ids:
            if self.context.is_live(broker_id):
                self._stop_replica[broker_id][tp] = (
                    self._stop_replica[broker_id].get(tp, False) or delete
                )

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        self._metadata_brokers.update(b for b in broker_ids if self.context.is_live(b))
        self._metadata_partitions.update(partitions)

    def _leader_and_isr_state(self, tp: TopicPartition, is_new: bool) -> LeaderAndIsrPartitionState:
        state = self.context.leadership[tp]
        assignment = self.context.assignments[tp]
        return LeaderAndIsrPartitionState(
            tp,
            state.controller_epoch,
            state.leader,
            state.leader_epoch,
            tuple(state.isr),
            state.partition_epoch,
            assignment.replicas,
            assignment.adding,
            assignment.removing,
            is_new,
            state.leader_recovery_state,
        )

    def _metadata_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        state = self.context.leadership.get(tp)
        assignment = self.context.assignments.get(tp)
        if state is None or assignment is None:
            return None
        leader = (
            LEADER_DURING_DELETE if self.context.is_queued_for_deletion(tp.topic) else state.leader
        )
        return UpdateMetadataPartitionState(
            tp,
            state.controller_epoch,
            leader,
            state.leader_epoch,
            tuple(state.isr),
            state.partition_epoch,
            assignment.replicas,
            tuple(self.context.offline_replicas(tp)),
        )

    def send(self, channel: ControllerChannel) -> None:
        ctx = self.context
        epoch = ctx.epoch
        live = tuple(ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
        for broker_id, partitions in sorted(self._leader_and_isr.items()):
            states = tuple(
                self._leader_and_isr_state(tp, is_new)
                for tp, is_new in sorted(partitions.items())
                if tp in ctx.leadership
            )
            leaders = {s.leader for s in states}
            request = LeaderAndIsrRequestData(
                self.controller_id,
                epoch,
                ctx.broker_epoch(broker_id),
                states,
                {
                    s.partition.topic: ctx.topic_ids[s.partition.topic]
                    for s in states
                    if s.partition.topic in ctx.topic_ids
                },
                tuple(r for r in live if r.id in leaders),
            )
            on_response = None
            if self.on_leader_and_isr_response is not None:
                on_response = (lambda hook, b, e: lambda response: hook(b, e, response))(
                    self.on_leader_and_isr_response, broker_id, request.broker_epoch
                )
            channel.send(broker_id, request, on_response)
        if self._metadata_brokers:
            metadata_states = tuple(
                s
                for tp in sorted(self._metadata_partitions)
                if (s := self._metadata_state(tp)) is not None
            )
            topics = {s.partition.topic for s in metadata_states}
            topic_ids = {t: ctx.topic_ids[t] for t in topics if t in ctx.topic_ids}
            for broker_id in sorted(self._metadata_brokers):
                metadata_request = UpdateMetadataRequestData(
                    self.controller_id,
                    epoch,
                    ctx.broker_epoch(broker_id),
                    metadata_states,
                    topic_ids,
                    live,
                )
                callback = None
                if self.on_update_metadata_response is not None:
                    callback = (lambda hook, b, t: lambda response: hook(b, t, response))(
                        self.on_update_metadata_response, broker_id, topics
                    )
                channel.send(broker_id, metadata_request, callback)
        for broker_id, partitions in sorted(self._stop_replica.items()):
            stop_states = tuple(
                StopReplicaPartitionState(
                    tp,
                    -2
                    if delete
                    else ctx.leadership[tp].leader_epoch
                    if tp in ctx.leadership
                    else -1,
                    delete,
                )
                for tp, delete in sorted(partitions.items())
            )
            stop_request = StopReplicaRequestData(
                self.controller_id, epoch, ctx.broker_epoch(broker_id), stop_states
            )
            callback = None
            if any(s.delete for s in stop_states) and self.on_stop_replica_response is not None:
                callback = (lambda hook, b: lambda response: hook(b, response))(
                    self.on_stop_replica_response, broker_id
                )
            channel.send(broker_id, stop_request, callback)
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._metadata_brokers.clear()
        self._metadata_partitions.clear()
