"""The controller (Kafka's ``KafkaController`` in ZooKeeper mode): one broker at a time,
elected through the store, turns metadata changes into partition state changes and
requests to brokers.

Sans-IO: it is driven by :meth:`KafkaController.process`, one event at a time (the
:mod:`~broker_py.controller.controller_event_manager` runs it on its own thread), reads
and writes only through a :class:`~broker_py.controller.controller_store.ControllerStore`,
and its only output besides store writes is requests handed to a
:class:`~broker_py.controller.controller_request_batch.ControllerChannel`. Time comes from
an injected clock.

Invariants:
- Only an active controller acts; every store write carries its epoch's zkVersion, and a
  write that finds the epoch moved makes it resign (ControllerMovedError).
- On failover, UpdateMetadata with the full state goes to every live broker before any
  LeaderAndIsr.
- Leader epochs only grow: every leader change and every controller-made ISR removal
  writes leader_epoch + 1, conditionally on the partition epoch.
- A clean election takes its leader from the ISR; only a topic with
  ``unclean.leader.election.enable`` (or an UNCLEAN ElectLeaders) elects outside it.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_context import (
    ControllerContext,
    PartitionState,
    ReplicaAssignment,
)
from broker_py.controller.controller_request_batch import ControllerChannel, ControllerRequestBatch
from broker_py.controller.controller_stats import ControllerStats
from broker_py.controller.controller_store import (
    ControllerMovedError,
    ControllerStore,
    PartitionEpochMismatch,
)
from broker_py.controller.partition_reassignment import PartitionReassignment
from broker_py.controller.partition_state_machine import Election, PartitionStateMachine
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.controller.topic_deletion_manager import TopicDeletionManager
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.controller.leader_and_isr import LeaderIsrAndControllerEpoch

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 300_000

    @staticmethod
    def from_broker_config(config: BrokerConfig) -> ControllerConfig:
        return ControllerConfig(
            config["unclean.leader.election.enable"],
            config["delete.topic.enable"],
            config["auto.leader.rebalance.enable"],
            config["leader.imbalance.per.broker.percentage"],
            config["leader.imbalance.check.interval.seconds"] * 1000,
        )


class KafkaController:
    def __init__(
        self,
        broker_id: int,
        store: ControllerStore,
        channel: ControllerChannel,
        config: ControllerConfig = ControllerConfig(),
        time: Time = SYSTEM_TIME,
        unclean_default: Callable[[], bool] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channel = channel
        self.config = config
        self.time = time
        self._unclean_default = unclean_default or (
            lambda: self.config.unclean_leader_election_enable
        )
        self.active = False
        self.active_controller_id: int | None = None
        self._create_waiters: list[ev.CreateTopics] = []
        # Hands an event to the queue this controller is driven from (set by its driver).
        self.enqueue: Callable[[object], None] = lambda event: None
        # Event timers for the metrics endpoint (LeaderElectionRateAndTimeMs).
        self.stats = ControllerStats()
        self._reset()

    def _reset(self) -> None:
        self.context = ControllerContext()
        self.batch = ControllerRequestBatch(self.broker_id, self.context)
        self.batch.on_stop_replica_response = self._stop_replica_response
        self.batch.on_update_metadata_response = self._update_metadata_response
        self.batch.on_leader_and_isr_response = self._leader_and_isr_response
        self.partition_state_machine = PartitionStateMachine(
            self.context, self.store, self.batch, self._unclean_default
        )
        self.topic_deletion = TopicDeletionManager(self)
        self.reassignment = PartitionReassignment(self)

    # ---- the event loop's entry point ----

    def process(self, event: object) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"unknown controller event {event!r}")
        started = self.time.monotonic()
        was_active = self.active
        try:
            handler(self, event)
            if self.active:
                # An election or ISR change may have finished a reassignment.
                for tp in self.context.reassignments_in_progress():
                    self.reassignment.resume(tp)
        except ControllerMovedError as e:
            log.warning(
                "controller %d lost its place while handling %s: %s",
                self.broker_id,
                type(event).__name__,
                e,
            )
            self._resign()
            self._fail_api_event(event, ErrorCode.NOT_CONTROLLER)
        finally:
            if self.active:
                self._check_create_waiters()
            self.stats.record(event, self.time.monotonic() - started, was_active)

    def _fail_api_event(self, event: object, error: int) -> None:
        if isinstance(event, ev.ControlledShutdown):
            event.reply(error, set())
        elif isinstance(event, ev.AlterPartition):
            event.reply(error, {})
        elif isinstance(event, ev.ApiPartitionReassignment):
            event.reply(error, {})
        elif isinstance(event, ev.ListPartitionReassignments):
            event.reply(error, {})
        elif isinstance(event, ev.ReplicaLeaderElection) and event.reply is not None:
            event.reply({tp: (error, None) for tp in event.partitions or ()})
        elif isinstance(event, ev.CreateTopics):
            event.reply(set())

    def _stop_replica_response(self, broker_id: int, response: object) -> None:
        errors = response if isinstance(response, dict) else {}
        self.enqueue(ev.TopicDeletionStopReplicaResponse(broker_id, errors))

    def _update_metadata_response(self, broker_id: int, topics: set[str], response: object) -> None:
        self.enqueue(
            ev.UpdateMetadataResponseReceived(
                broker_id, frozenset(topics), response if isinstance(response, int) else 0
            )
        )

    def _leader_and_isr_response(self, broker_id: int, broker_epoch: int, response: object) -> None:
        errors = response if isinstance(response, dict) else {}
        self.enqueue(ev.LeaderAndIsrResponseReceived(broker_id, broker_epoch, errors))

    # ---- election and failover ----

    def _startup(self, _event: object) -> None:
        self._elect()

    def _elect(self) -> None:
        current = self.store.controller_id()
        if current == self.broker_id and not self.active:
            # Our session holds /controller but this controller stopped acting on it (the
            # session was suspended): give it up and run the election again.
            self.store.resign_controller()
            current = self.store.controller_id()
        if current is not None:
            self.active_controller_id = current
            if current != self.broker_id and self.active:
                self._resign()
            return
        try:
            epoch = self.store.elect_controller(self.broker_id, self.time.milliseconds())
        except ControllerMovedError:
            self.active_controller_id = self.store.controller_id()
            log.info("broker %s is the controller", self.active_controller_id)
            return
        self.active_controller_id = self.broker_id
        self._on_controller_failover(epoch.epoch, epoch.zk_version)

    def _controller_change(self, _event: object) -> None:
        current = self.store.controller_id()
        if self.active and current != self.broker_id:
            self._resign()
        self.active_controller_id = current
        if current is None:
            self._elect()

    def _expire(self, _event: object) -> None:
        if self.active:
            self._resign()
        self.active_controller_id = None

    def _resign(self) -> None:
        if self.active:
            log.info(
                "broker %d resigns as controller (epoch %d)", self.broker_id, self.context.epoch
            )
        self.active = False
        for waiter in self._create_waiters:
            waiter.reply(set())
        self._create_waiters.clear()
        for broker_id in list(self.context.live_brokers):
            self.channel.remove_broker(broker_id)
        self._reset()

    def _on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        self._reset()
        ctx = self.context
        ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
        ctx.config_loader = self.store.topic_configs
        self.active = True
        ctx.live_brokers = self.store.live_brokers()
        for registration in ctx.live_brokers.values():
            self.channel.add_broker(registration)
        self._load_topics(self.store.all_topics())
        all_partitions = list(ctx.assignments)
        ctx.leadership.update(self.store.partition_states(all_partitions))
        queued = self.store.topics_to_delete()
        ctx.topics_to_delete = queued & ctx.all_topics()
        # Offline replicas are learned from the LeaderAndIsr answers below, not from old
        # notifications (Kafka deletes them at failover).
        self.store.controller_delete_log_dir_event_notifications(
            epoch_zk_version, self.store.log_dir_event_notifications()
        )
        # UpdateMetadata (the live brokers and this controller) to every broker before any
        # LeaderAndIsr; partition states follow with the LeaderAndIsr (Kafka 2.4+).
        self.batch.add_update_metadata(ctx.live_brokers, [])
        self.batch.send(self.channel)
        for tp in all_partitions:
            if tp in ctx.leadership and not ctx.is_queued_for_deletion(tp.topic):
                self.batch.add_leader_and_isr(ctx.replicas(tp), tp)
        self.partition_state_machine.initialize_states()
        self.partition_state_machine.trigger_online_partition_state_change()
        # Replicas on brokers that are gone leave the ISRs (Kafka's OfflineReplica at startup).
        for b in sorted({r for tp in all_partitions for r in ctx.offline_replicas(tp)}):
            partitions = [
                tp for tp in ctx.partitions_on_broker(b) if not ctx.is_queued_for_deletion(tp.topic)
            ]
            self.partition_state_machine.remove_replica_from_isr(b, partitions)
        self.batch.send(self.channel)
        for tp in ctx.reassignments_in_progress():
            self.reassignment.resume(tp)
        self._zk_partition_reassignment(None)
        self.topic_deletion.resume()
        self._zk_preferred_replica_election(None)
        self.batch.send(self.channel)

    def _load_topics(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Adds topics from the store to the context; returns their partitions."""
        ctx = self.context
        added: list[TopicPartition] = []
        for topic, assignment in sorted(self.store.topic_assignments(topics).items()):
            topic_id = assignment.topic_id
            if topic_id is None:  # a topic written before topic ids: give it one
                topic_id = uuid.uuid4()
                self.store.controller_set_topic_assignment(
                    ctx.epoch_zk_version, topic, dataclasses.replace(assignment, topic_id=topic_id)
                )
            partitions = {
                index: ReplicaAssignment.of(
                    replicas, assignment.adding.get(index, ()), assignment.removing.get(index, ())
                )
                for index, replicas in assignment.partitions.items()
            }
            ctx.add_topic(topic, topic_id, partitions)
            self.store.watch_topic(topic)
            added.extend(TopicPartition(topic, index) for index in partitions)
        return sorted(added)

    def write_topic_assignment(self, topic: str) -> None:
        """Writes the context's assignment of ``topic`` to the store."""
        ctx = self.context
        parts, adding, removing = {}, {}, {}
        for tp in ctx.partitions_of(topic):
            a = ctx.assignments[tp]
            parts[tp.partition] = list(a.replicas)
            if a.adding:
                adding[tp.partition] = list(a.adding)
            if a.removing:
                removing[tp.partition] = list(a.removing)
        self.store.controller_set_topic_assignment(
            ctx.epoch_zk_version,
            topic,
            TopicAssignment(ctx.topic_ids[topic], parts, adding, removing),
        )

    # ---- brokers ----

    def _broker_change(self, _event: object) -> None:
        if not self.active:
            return
        ctx = self.context
        current = self.store.live_brokers()
        new = {b for b in current if b not in ctx.live_brokers}
        dead = {b for b in ctx.live_brokers if b not in current}
        bounced = {
            b
            for b in current
            if b in ctx.live_brokers and current[b].epoch != ctx.live_brokers[b].epoch
        }
        if not (new or dead or bounced):
            return
        log.info("brokers: new %s, dead %s, bounced %s", sorted(new), sorted(dead), sorted(bounced))
        for b in dead | bounced:
            ctx.live_brokers.pop(b, None)
            self.channel.remove_broker(b)
        if dead | bounced:
            self._on_broker_failure(dead | bounced)
        for b in new | bounced:
            ctx.live_brokers[b] = current[b]
            self.channel.add_broker(current[b])
        if new | bounced:
            self._on_broker_startup(new | bounced)

    def _on_broker_startup(self, brokers: set[int]) -> None:
        ctx = self.context
        ctx.shutting_down -= brokers
        for b in brokers:  # a restart recovered its log dirs
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = set(ctx.live_brokers) - brokers
        self.batch.add_update_metadata(existing, [])
        self.batch.add_update_metadata(brokers, list(ctx.assignments))
        self.batch.send(self.channel)
        for b in sorted(brokers):
            for tp in ctx.partitions_on_broker(b):
                if not ctx.is_queued_for_deletion(tp.topic):
                    self.batch.add_leader_and_isr([b], tp)
        self.partition_state_machine.trigger_online_partition_state_change()
        self.batch.send(self.channel)
        for tp in ctx.reassignments_in_progress():
            if any(r in brokers for r in ctx.assignments[tp].replicas):
                self.reassignment.resume(tp)
        self.topic_deletion.on_brokers_started(brokers)
        self.batch.send(self.channel)

    def _on_broker_failure(self, brokers: set[int]) -> None:
        ctx = self.context
        ctx.shutting_down -= brokers
        for b in brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        for pending in ctx.metadata_pending.values():
            pending -= brokers
        led = [
            tp
            for tp, s in ctx.leadership.items()
            if s.leader in brokers and not ctx.is_queued_for_deletion(tp.topic)
        ]
        self.partition_state_machine.to_offline(led)
        self.partition_state_machine.trigger_online_partition_state_change()
        for b in sorted(brokers):
            partitions = [
                tp for tp in ctx.partitions_on_broker(b) if not ctx.is_queued_for_deletion(tp.topic)
            ]
            self.partition_state_machine.remove_replica_from_isr(b, partitions)
        self.topic_deletion.on_brokers_failed(brokers)
        self.batch.add_update_metadata(ctx.live_brokers, [])
        self.batch.send(self.channel)

    # ---- log dir failures (KIP-112) ----

    def _log_dir_event(self, _event: object) -> None:
        """Brokers wrote log dir failure notifications: each is sent a LeaderAndIsr for
        every replica it holds (Kafka's ``onBrokerLogDirFailure``); the replicas it
        answers KAFKA_STORAGE_ERROR for go offline (:meth:`_leader_and_isr_answered`)."""
        if not self.active:
            return
        ctx = self.context
        notifications = self.store.log_dir_event_notifications()
        if not notifications:
            return
        self.store.controller_delete_log_dir_event_notifications(
            ctx.epoch_zk_version, notifications
        )
        brokers = sorted(set(notifications.values()))
        log.info("log dir failure notifications from brokers %s", brokers)
        for b in brokers:
            if not ctx.is_live(b):
                continue
            for tp in ctx.partitions_on_broker(b):
                if not ctx.is_queued_for_deletion(tp.topic):
                    self.batch.add_leader_and_isr([b], tp)
        self.batch.send(self.channel)

    def _leader_and_isr_answered(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        """Kafka's ``processLeaderAndIsrResponseReceived``: the broker's replicas answered
        KAFKA_STORAGE_ERROR are offline, those answered NONE online again."""
        ctx = self.context
        broker_id = event.broker_id
        if not self.active or ctx.broker_epoch(broker_id) != event.broker_epoch:
            return  # sent to an earlier registration of the broker, or no longer ours
        offline = {tp for tp, e in event.errors.items() if e == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, e in event.errors.items() if e == ErrorCode.NONE}
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new = sorted(current - previous)
        if new:
            log.info(
                "replicas on broker %d are offline (failed log dir): %s",
                broker_id,
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in new),
            )
            self._on_replicas_become_offline(broker_id, new)

    def _on_replicas_become_offline(self, broker_id: int, partitions: list[TopicPartition]) -> None:
        """The replicas of ``partitions`` on ``broker_id`` are offline: the partitions it
        led elect a leader among their other in-sync replicas, and it leaves every ISR
        (Kafka's ``onReplicasBecomeOffline``)."""
        ctx = self.context
        partitions = [
            tp
            for tp in partitions
            if tp in ctx.assignments and not ctx.is_queued_for_deletion(tp.topic)
        ]
        led = [
            tp
            for tp in partitions
            if (s := ctx.leadership.get(tp)) is not None and s.leader == broker_id
        ]
        self.partition_state_machine.to_offline(led)
        self.partition_state_machine.trigger_online_partition_state_change()
        self.partition_state_machine.remove_replica_from_isr(broker_id, partitions)
        self.batch.add_update_metadata(ctx.live_brokers, partitions)
        self.batch.send(self.channel)

    # ---- topics ----

    def _topic_change(self, _event: object) -> None:
        if not self.active:
            return
        ctx = self.context
        topics = self.store.all_topics()
        for gone in ctx.all_topics() - topics:
            ctx.remove_topic(gone)
        new = topics - ctx.all_topics()
        if new:
            self._on_new_partition_creation(self._load_topics(new))

    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        ctx = self.context
        self.partition_state_machine.to_new(partitions)
        self.partition_state_machine.to_online(partitions, Election.OFFLINE)
        for tp in partitions:
            ctx.metadata_pending[tp.topic] |= set(ctx.live_brokers)
        self.batch.send(self.channel)

    def _partition_modifications(self, event: ev.PartitionModifications) -> None:
        if (
            not self.active
            or event.topic not in self.context.topic_ids
            or self.context.is_queued_for_deletion(event.topic)
        ):
            return
        ctx = self.context
        assignment = self.store.topic_assignments([event.topic]).get(event.topic)
        if assignment is None:
            return
        added = {}
        for index, replicas in assignment.partitions.items():
            tp = TopicPartition(event.topic, index)
            if tp not in ctx.assignments:
                added[tp] = ReplicaAssignment.of(replicas)
        ctx.assignments.update(added)
        self._on_new_partition_creation(sorted(added))

    def _topic_deletion(self, _event: object) -> None:
        if not self.active:
            return
        queued = self.store.topics_to_delete()
        ctx = self.context
        for topic in queued - ctx.all_topics():
            self.store.controller_delete_topic(ctx.epoch_zk_version, topic)
        if not self.config.delete_topic_enable:
            log.warning("delete.topic.enable is false: ignoring deletion of %s", sorted(queued))
            return
        self.topic_deletion.enqueue(queued & ctx.all_topics())

    def _topic_config(self, event: ev.TopicUncleanLeaderElectionEnable) -> None:
        if not self.active or event.topic not in self.context.topic_ids:
            return
        ctx = self.context
        ctx.topic_configs[event.topic] = self.store.topic_configs(event.topic)
        if ctx.unclean_election_enabled(event.topic, self._unclean_default()):
            self.partition_state_machine.trigger_online_partition_state_change([event.topic])
            self.batch.send(self.channel)

    def _deletion_response(self, event: ev.TopicDeletionStopReplicaResponse) -> None:
        if self.active:
            self.topic_deletion.on_stop_replica_response(event.broker_id, event.errors)

    # ---- CreateTopics completion ----

    def _create_topics(self, event: ev.CreateTopics) -> None:
        if not self.active:
            event.reply(set())
            return
        self._create_waiters.append(event)

    def _metadata_response(self, event: ev.UpdateMetadataResponseReceived) -> None:
        if not self.active:
            return
        for topic in event.topics:
            pending = self.context.metadata_pending.get(topic)
            if pending is not None:
                pending.discard(event.broker_id)

    def topic_ready(self, topic: str) -> bool:
        """Every partition has a state and every live broker acknowledged metadata with it."""
        ctx = self.context
        if topic not in ctx.topic_ids:
            return False
        partitions = ctx.partitions_of(topic)
        return all(tp in ctx.leadership for tp in partitions) and not (
            ctx.metadata_pending.get(topic, set()) & set(ctx.live_brokers)
        )

    def _check_create_waiters(self) -> None:
        keep = []
        for waiter in self._create_waiters:
            ready = {t for t in waiter.topics if self.topic_ready(t)}
            if ready == waiter.topics:
                waiter.reply(ready)
            else:
                keep.append(waiter)
        self._create_waiters = keep

    # ---- elections ----

    def _replica_leader_election(self, event: ev.ReplicaLeaderElection) -> None:
        results = self.elect_leaders(event.partitions, event.unclean) if self.active else None
        if event.reply is not None:
            if results is None:
                event.reply({tp: (ErrorCode.NOT_CONTROLLER, None) for tp in event.partitions or ()})
            else:
                event.reply(results)

    def elect_leaders(
        self, partitions: set[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """ElectLeaders: per partition NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION. With ``partitions``
        None only partitions where an election was due are answered."""
        ctx = self.context
        every = partitions is None
        wanted = sorted(ctx.assignments) if partitions is None else sorted(partitions)
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_elect = []
        for tp in wanted:
            state = ctx.leadership.get(tp)
            if tp not in ctx.assignments or ctx.is_queued_for_deletion(tp.topic) or state is None:
                results[tp] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"{tp.topic}-{tp.partition} does not exist",
                )
                continue
            if unclean:
                if state.leader >= 0 and ctx.is_live(state.leader):
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                    continue
            elif state.leader == ctx.assignments[tp].replicas[0]:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                continue
            elif ctx.assignments[tp].is_being_reassigned:
                results[tp] = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    "the partition is being reassigned",
                )
                continue
            to_elect.append(tp)
        if unclean:
            self.partition_state_machine.to_offline(tp for tp in to_elect)
        outcome = self.partition_state_machine.to_online(
            to_elect, Election.OFFLINE_UNCLEAN if unclean else Election.PREFERRED
        )
        failed_code = (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            if unclean
            else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )
        for tp in to_elect:
            if tp in outcome.elected:
                results[tp] = (ErrorCode.NONE, None)
            else:
                if unclean and ctx.leadership.get(tp) is not None and ctx.leadership[tp].leader < 0:
                    ctx.states[tp] = PartitionState.OFFLINE
                results[tp] = (failed_code, outcome.failed.get(tp, "no eligible leader"))
        self.batch.send(self.channel)
        if every:
            results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
        return results

    def _zk_preferred_replica_election(self, _event: object) -> None:
        if not self.active:
            return
        partitions = self.store.preferred_election_request()
        if not partitions:
            return
        self.elect_leaders(
            {tp for tp in partitions if tp in self.context.assignments}, unclean=False
        )
        self.store.controller_delete_preferred_election_request(self.context.epoch_zk_version)

    def _auto_preferred_election(self, _event: object) -> None:
        if not self.active or not self.config.auto_leader_rebalance_enable:
            return
        due = self.imbalanced_partitions()
        if due:
            log.info("auto leader rebalance: preferred election for %d partitions", len(due))
            self.elect_leaders(due, unclean=False)

    def imbalanced_partitions(self) -> set[TopicPartition]:
        """Partitions whose preferred leader is live and in sync but does not lead, for
        each broker whose share of such partitions exceeds the imbalance percentage."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, assignment in ctx.assignments.items():
            if (
                assignment.replicas
                and tp in ctx.leadership
                and not ctx.is_queued_for_deletion(tp.topic)
            ):
                by_preferred.setdefault(assignment.replicas[0], []).append(tp)
        due: set[TopicPartition] = set()
        for broker, partitions in by_preferred.items():
            misplaced = [tp for tp in partitions if ctx.leadership[tp].leader != broker]
            ratio = len(misplaced) / len(partitions)
            if (
                ratio * 100 > self.config.leader_imbalance_per_broker_percentage
                and ctx.is_live(broker)
                and broker not in ctx.shutting_down
            ):
                due.update(
                    tp
                    for tp in misplaced
                    if broker in ctx.leadership[tp].isr
                    and not ctx.assignments[tp].is_being_reassigned
                )
        return due

    # ---- controlled shutdown ----

    def _controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        if not self.active:
            event.reply(ErrorCode.NOT_CONTROLLER, set())
            return
        ctx = self.context
        b = event.broker_id
        if not ctx.is_live(b):
            event.reply(ErrorCode.BROKER_NOT_AVAILABLE, set())
            return
        if event.broker_epoch != -1 and event.broker_epoch < ctx.broker_epoch(b):
            event.reply(ErrorCode.STALE_BROKER_EPOCH, set())
            return
        ctx.shutting_down.add(b)
        partitions = [
            tp
            for tp in ctx.partitions_on_broker(b)
            if len(ctx.replicas(tp)) > 1
            and tp in ctx.leadership
            and not ctx.is_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in partitions if ctx.leadership[tp].leader == b]
        followed = [tp for tp in partitions if ctx.leadership[tp].leader != b]
        self.partition_state_machine.to_online(led, Election.CONTROLLED_SHUTDOWN)
        self.partition_state_machine.remove_replica_from_isr(b, followed)
        for tp in followed:
            self.batch.add_stop_replica([b], tp, delete=False)
        self.batch.send(self.channel)
        remaining = {tp for tp in ctx.partitions_led_by(b) if len(ctx.replicas(tp)) > 1}
        event.reply(ErrorCode.NONE, remaining)

    # ---- AlterPartition ----

    def _alter_partition(self, event: ev.AlterPartition) -> None:
        if not self.active:
            event.reply(ErrorCode.NOT_CONTROLLER, {})
            return
        ctx = self.context
        if not ctx.is_live(event.broker_id) or (
            event.broker_epoch != -1 and event.broker_epoch != ctx.broker_epoch(event.broker_id)
        ):
            event.reply(ErrorCode.STALE_BROKER_EPOCH, {})
            return
        results: dict[TopicPartition, ev.AlterPartitionResult] = {}
        updates = {}
        # Leaders whose partition epoch is not the controller's (a write they never heard
        # of, e.g. by a controller that died before telling them): they get the current
        # state again, so their next proposal can succeed.
        stale_leaders: list[TopicPartition] = []
        for item in event.items:
            tp = item.partition
            current = ctx.leadership.get(tp)
            if current is not None and item.partition_epoch > current.partition_epoch:
                # The leader heard of a write this controller's view misses: read it.
                fresh = self.store.partition_states([tp]).get(tp)
                if fresh is not None:
                    ctx.leadership[tp] = current = fresh
            if current is None or tp not in ctx.assignments or ctx.is_queued_for_deletion(tp.topic):
                results[tp] = ev.AlterPartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif current.leader != event.broker_id:
                results[tp] = ev.AlterPartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif item.leader_epoch < current.leader_epoch:
                results[tp] = ev.AlterPartitionResult(ErrorCode.FENCED_LEADER_EPOCH)
            elif item.leader_epoch > current.leader_epoch:
                results[tp] = ev.AlterPartitionResult(
                    ErrorCode.FENCED_LEADER_EPOCH
                )  # Kafka's answer to a future epoch
            elif (
                sorted(item.new_isr) == sorted(current.isr)
                and item.leader_recovery_state == current.leader_recovery_state
            ):
                results[tp] = _alter_result(current)  # already applied (a retry)
            elif item.partition_epoch != current.partition_epoch:
                results[tp] = ev.AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
                stale_leaders.append(tp)
            elif (
                any(
                    r not in ctx.assignments[tp].replicas
                    or not ctx.is_live(r)
                    or r in ctx.shutting_down
                    for r in item.new_isr
                )
                or current.leader not in item.new_isr
            ):
                results[tp] = ev.AlterPartitionResult(ErrorCode.INELIGIBLE_REPLICA)
            else:
                updates[tp] = dataclasses.replace(
                    current,
                    isr=list(item.new_isr),
                    leader_recovery_state=item.leader_recovery_state,
                )
        if updates:
            written = self.store.controller_update_partition_states(ctx.epoch_zk_version, updates)
            for tp, outcome in written.items():
                if isinstance(outcome, PartitionEpochMismatch):
                    fresh = self.store.partition_states([tp]).get(tp)
                    if fresh is not None:
                        ctx.leadership[tp] = fresh
                    results[tp] = ev.AlterPartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
                    stale_leaders.append(tp)
                    continue
                ctx.leadership[tp] = dataclasses.replace(updates[tp], partition_epoch=outcome)
                results[tp] = _alter_result(ctx.leadership[tp])
            self.batch.add_update_metadata(
                ctx.live_brokers, [tp for tp in updates if tp in ctx.leadership]
            )
            for tp in updates:
                if tp in ctx.assignments and ctx.assignments[tp].is_being_reassigned:
                    self.reassignment.resume(tp)
        for tp in stale_leaders:
            self.batch.add_leader_and_isr([event.broker_id], tp)
        self.batch.send(self.channel)
        event.reply(ErrorCode.NONE, results)

    # ---- reassignment ----

    def _api_partition_reassignment(self, event: ev.ApiPartitionReassignment) -> None:
        if not self.active:
            event.reply(ErrorCode.NOT_CONTROLLER, {})
            return
        event.reply(ErrorCode.NONE, self.reassignment.submit(event.reassignments))

    def _list_partition_reassignments(self, event: ev.ListPartitionReassignments) -> None:
        if not self.active:
            event.reply(ErrorCode.NOT_CONTROLLER, {})
            return
        ctx = self.context
        wanted = (
            ctx.reassignments_in_progress()
            if event.partitions is None
            else sorted(event.partitions)
        )
        out = {}
        for tp in wanted:
            a = ctx.assignments.get(tp)
            if a is not None and a.is_being_reassigned:
                out[tp] = (list(a.replicas), list(a.adding), list(a.removing))
        event.reply(ErrorCode.NONE, out)

    def _zk_partition_reassignment(self, _event: object) -> None:
        if not self.active:
            return
        request = self.store.reassignment_request()
        if not request:
            return
        results = self.reassignment.submit({tp: list(r) for tp, r in request.items()}, from_zk=True)
        failed = [tp for tp, (code, _) in results.items() if code != ErrorCode.NONE]
        if failed:
            log.warning(
                "reassignments refused: %s",
                {f"{tp.topic}-{tp.partition}": results[tp] for tp in failed},
            )
        self.reassignment.sync_zk_request()


def _alter_result(state: LeaderIsrAndControllerEpoch) -> ev.AlterPartitionResult:
    return ev.AlterPartitionResult(
        ErrorCode.NONE,
        state.leader,
        state.leader_epoch,
        tuple(state.isr),
        state.partition_epoch,
        state.leader_recovery_state,
    )


# Each handler takes the event of its key's type, which a dict's value type cannot say.
_HANDLERS: dict[type, Callable[[KafkaController, Any], None]] = {
    ev.Startup: KafkaController._startup,
    ev.ControllerChange: KafkaController._controller_change,
    ev.Expire: KafkaController._expire,
    ev.BrokerChange: KafkaController._broker_change,
    ev.TopicChange: KafkaController._topic_change,
    ev.PartitionModifications: KafkaController._partition_modifications,
    ev.TopicDeletion: KafkaController._topic_deletion,
    ev.TopicUncleanLeaderElectionEnable: KafkaController._topic_config,
    ev.TopicDeletionStopReplicaResponse: KafkaController._deletion_response,
    ev.UpdateMetadataResponseReceived: KafkaController._metadata_response,
    ev.CreateTopics: KafkaController._create_topics,
    ev.ReplicaLeaderElection: KafkaController._replica_leader_election,
    ev.ZkPreferredReplicaElection: KafkaController._zk_preferred_replica_election,
    ev.AutoPreferredReplicaLeaderElection: KafkaController._auto_preferred_election,
    ev.ControlledShutdown: KafkaController._controlled_shutdown,
    ev.AlterPartition: KafkaController._alter_partition,
    ev.ApiPartitionReassignment: KafkaController._api_partition_reassignment,
    ev.ListPartitionReassignments: KafkaController._list_partition_reassignments,
    ev.ZkPartitionReassignment: KafkaController._zk_partition_reassignment,
    ev.LogDirEventNotification: KafkaController._log_dir_event,
    ev.LeaderAndIsrResponseReceived: KafkaController._leader_and_isr_answered,
}
