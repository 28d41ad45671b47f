"""The partitions this broker holds and the one path to them (Kafka's ``ReplicaManager``).

Handlers and coordinators reach a partition only through here:

- :meth:`ReplicaManager.get_partition_or_error`: the partition, or the Kafka error a
  request for it gets (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER);
- :meth:`ReplicaManager.append_records`: appends to each partition's leader log and
  answers once the acks condition holds; acks=all waits in the produce purgatory
  (:class:`DelayedProduce`) until each partition's high watermark passes its records;
  coordinators (``origin=COORDINATOR``) append their own batches the same way, with
  acks=-1;
- :meth:`ReplicaManager.fetch_messages`: answers a fetch at once when it has
  ``min_bytes`` or may not wait, else parks it in the fetch purgatory
  (:class:`DelayedFetch`) until appends bring enough or ``max_wait_ms`` passes;
- :meth:`ReplicaManager.describe_log_dirs` and :meth:`ReplicaManager.alter_replica_log_dirs`:
  the log dirs and the replicas in each, and moves between them
  (:mod:`.replica_log_dirs`).

Every append notifies both purgatories under the partition's key: produces waiting for
its high watermark are checked at once; fetches waiting on it are read again once the
event loop is next free, so one read serves every append made meanwhile and the
producer's answer never waits for a consumer's read. A high watermark that moves without
an append (a follower caught up) reads consumers' waiting fetches again, not followers':
a follower's fetch reads up to the log end, which did not move.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

import logstore
from broker_py.cluster.partition import Partition
from broker_py.cluster.replica import PendingIsrChange
from broker_py.log import offset_checkpoint
from broker_py.log.log_dir_failure_channel import is_log_dir_failure
from broker_py.log.unified_log import UnifiedLog
from broker_py.replication.delayed_fetch import DelayedFetch
from broker_py.replication.delayed_produce import DelayedProduce, ProducePartitionStatus
from broker_py.replication.fetch_data import (
    FetchInfo,
    FetchParams,
    FetchPartitionData,
    LogReadResult,
)
from broker_py.replication.leader_end_point import PartitionFetchState
from broker_py.replication.local_log_read import read_from_local_log
from broker_py.replication.produce_result import ProducePartitionResult
from broker_py.replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker_py.replication.replica_log_dirs import (
    LogDirInfo,
    alter_replica_log_dir,
    describe_log_dirs,
    stop_serving_log_dir,
)
from broker_py.replication.replication_quota_manager import (
    FOLLOWER,
    LEADER,
    ReplicationQuotaManager,
    unthrottled,
)
from broker_py.utils.completion import Completion
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.common.topic import TopicInfo
    from broker_py.common.topic_partition import TopicPartition
    from broker_py.controller.controller_request_batch import (
        LeaderAndIsrRequestData,
        StopReplicaRequestData,
    )
    from broker_py.controller.controller_store import BrokerRegistration
    from broker_py.log.log_dir_mover import LogDirMover
    from broker_py.log.log_manager import LogManager
    from broker_py.replication.replica_fetcher_manager import ReplicaFetcherManager
    from logstore._native import BytesLike

from logstore.protocol.errors import (
    InvalidRequiredAcksError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

CLIENT = "client"
COORDINATOR = "coordinator"

# One partition's records in an append: (partition index, records or None when the
# request carries null, whether a batch carries a producer id or None when unknown).
PartitionRecords = tuple[int, "BytesLike | None", "bool | None"]
# A transaction marker to append: (topic, partition, producer id, producer epoch,
# commit, coordinator epoch).
TxnMarker = tuple[str, int, int, int, bool, int]
# A partition's topic (as the log manager takes it) and the effective configs its log
# opens with.
LogConfig = Callable[[str, int], tuple["TopicInfo", dict[str, str]]]
# An append's answer: each topic's partitions in the order asked.
ProduceResults = list[tuple[str, list[ProducePartitionResult]]]
# What :meth:`ReplicaManager.append` and :meth:`ReplicaManager.append_markers` return:
# the results when ready now, else a future of them.
ProduceAnswer = ProduceResults | asyncio.Future[ProduceResults]
# What :meth:`ReplicaManager.fetch_messages` returns: the reads now, or a future of them.
FetchAnswer = list[FetchPartitionData] | asyncio.Future[list[FetchPartitionData]]
# A partition's verification guard (``ProducerStateManager.verification_guard``).
VerificationGuard = object


class TxnVerifier(Protocol):
    """Asks a producer's transaction coordinator whether its ongoing transaction holds
    each partition (a cluster's ``AddPartitionsToTxnManager``, KIP-890)."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]: ...

    async def close(self) -> None: ...


# Verification failures a producer retries, answered as NOT_ENOUGH_REPLICAS so that
# every client retries the produce without a metadata refresh (as Kafka does).
_VERIFICATION_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def verification_produce_error(error: ErrorCode) -> tuple[ErrorCode, str]:
    """A failed verification as a Produce response answers it: (error, message)."""
    if error == ErrorCode.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error in _VERIFICATION_RETRIABLE:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}",
        )
    return error, error.description


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        min_insync_replicas: Callable[[str], int],
        time: Time = SYSTEM_TIME,
        log_manager: LogManager | None = None,
    ) -> None:
        self.broker_id = broker_id
        # Opens, creates and deletes the logs of the partitions the controller assigns.
        self.log_manager = log_manager
        # Moves partitions' logs between log dirs (AlterReplicaLogDirs); set by the broker
        # once the logs' configs can be had (a move reopens a log with them).
        self.log_dir_mover: LogDirMover | None = None
        self._min_insync_replicas = min_insync_replicas
        self.time = time
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Partitions whose log dir failed (Kafka's HostedPartition.Offline): they answer
        # KAFKA_STORAGE_ERROR until the broker restarts.
        self.offline_partitions: set[tuple[str, int]] = set()
        # The highest controller epoch seen in a LeaderAndIsr or StopReplica.
        self.controller_epoch = -1
        self.produce_purgatory = DelayedOperationPurgatory("Produce", time)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", time)
        # The partitions whose parked fetches are checked at the end of this loop turn:
        # True when the log grew, False when only the high watermark moved (a follower's
        # fetch reads up to the log end, so only consumers' fetches are checked then).
        self._fetch_keys_to_check: dict[tuple[str, int], bool] = {}
        # Sends a leader partition's proposed ISR to the controller (a cluster's
        # AlterPartitionManager.submit); None on a broker alone.
        self.alter_isr: Callable[[Partition, PendingIsrChange], None] | None = None
        # Checks transactional batches against the transaction coordinator (set once it runs).
        self.verify_transaction: Callable[[int, int, str, int], ErrorCode] | None = None
        # Verifies the first batch of a producer's transaction in each partition with its
        # coordinator, wherever it runs (a cluster's AddPartitionsToTxnManager, KIP-890).
        self.txn_verifier: TxnVerifier | None = None
        # Fetches the partitions this broker follows (a cluster's ReplicaFetcherManager);
        # None on a broker alone.
        self.replica_fetcher_manager: ReplicaFetcherManager | None = None
        # Called with (partitions now led, partitions now followed) after each LeaderAndIsr
        # and StopReplica (the coordinators take or drop their internal partitions).
        self.on_leadership_change: list[
            Callable[[list[tuple[str, int]], list[tuple[str, int]]], None]
        ] = []
        # Whether a broker may join an ISR (set in a cluster: alive in the metadata cache).
        self.isr_eligible: Callable[[int], bool] | None = None
        # Topic ids as the controller's LeaderAndIsr named them (the metadata cache may lag).
        self.topic_ids: dict[str, uuid.UUID] = {}
        # Whether the cluster's metadata has a partition (set in a cluster).
        self.partition_exists: Callable[[str, int], bool] | None = None
        # Each log dir's replication-offset-checkpoint as read at start (high watermarks).
        self._hw_checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        # Replication throttles (KIP-73): what this broker sends out-of-sync followers of
        # throttled partitions, and what its fetchers take for them (set by the broker
        # from its configs; these throttle nothing).
        self.leader_quota: ReplicationQuotaManager = unthrottled(
            LEADER, broker_id, self.monotonic_ms
        )
        self.follower_quota: ReplicationQuotaManager = unthrottled(
            FOLLOWER, broker_id, self.monotonic_ms
        )

    def monotonic_ms(self) -> int:
        """The clock of rates (the replication throttles): monotonic, in milliseconds."""
        return int(self.time.monotonic() * 1000)

    # ---- partitions ----

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def get_partition_or_error(self, topic: str, index: int) -> Partition:
        """The partition this broker leads; NotLeaderOrFollowerError when it does not lead
        it (or holds no replica of a partition the cluster has, as Kafka answers),
        UnknownTopicOrPartitionError when no such partition exists."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline_partitions:
                raise KafkaStorageError(f"{topic}-{index} is in an offline log dir")
            if self.partition_exists is not None and self.partition_exists(topic, index):
                raise NotLeaderOrFollowerError(f"this broker holds no replica of {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"{topic}-{index} is not on this broker")
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"this broker does not lead {topic}-{index}")
        return partition

    def online_partitions(self) -> list[Partition]:
        return list(self.partitions.values())

    def keys(self) -> Iterable[tuple[str, int]]:
        return self.partitions.keys()

    def __contains__(self, key: tuple[str, int]) -> bool:
        return key in self.partitions

    def make_leader(
        self,
        topic: str,
        index: int,
        log: UnifiedLog,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
    ) -> Partition:
        """Leads ``topic-index`` over ``log`` in ``leader_epoch`` (a partition held already
        keeps its state and moves to the new epoch)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = Partition(
                topic,
                index,
                log,
                self.broker_id,
                self._on_append,
                lambda: self._min_insync_replicas(topic),
            )
            self.partitions[(topic, index)] = partition
        partition.make_leader(leader_epoch, isr, replicas)
        return partition

    def become_leader_or_follower(
        self,
        request: LeaderAndIsrRequestData,
        log_config: LogConfig,
        opened: dict[tuple[str, int], UnifiedLog] | None = None,
        failures: dict[tuple[str, int], KafkaError] | None = None,
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Applies a controller's LeaderAndIsr (Kafka's ``becomeLeaderOrFollower``): a
        request from an older controller epoch is refused whole (STALE_CONTROLLER_EPOCH);
        per partition, a state whose leader epoch is below the one held (or equal, with no
        newer partition epoch) is ignored with STALE_CONTROLLER_EPOCH; a partition that does
        not list this broker gets UNKNOWN_TOPIC_OR_PARTITION. Otherwise the partition's log is
        taken from ``opened`` (see :meth:`open_new_logs`) or opened or created by the log
        manager with ``log_config`` (KafkaStorageError → KAFKA_STORAGE_ERROR, the exception
        kept in ``failures`` when given) and this broker leads or follows it. Produces and
        fetches waiting on a partition this broker stopped leading are completed
        (NOT_LEADER_OR_FOLLOWER)."""
        if request.controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = request.controller_epoch
        self.topic_ids.update(request.topic_ids)
        errors: dict[TopicPartition, ErrorCode] = {}
        new_leaders: list[tuple[str, int]] = []
        followers: list[tuple[str, int]] = []
        new_followers: dict[tuple[str, int], Partition] = {}
        for state in request.partitions:
            tp = state.partition
            topic, index = tp
            if self.broker_id not in state.replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if (topic, index) in self.offline_partitions:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            partition = self.partitions.get((topic, index))
            if partition is not None and (
                state.leader_epoch < partition.leader_epoch
                or (
                    state.leader_epoch == partition.leader_epoch
                    and state.partition_epoch <= partition.partition_epoch
                )
            ):
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            try:
                if partition is None:
                    partition = Partition(
                        topic,
                        index,
                        self._get_or_create_log(topic, index, log_config, opened, failures),
                        self.broker_id,
                        self._on_append,
                        functools.partial(self._min_insync_replicas, topic),
                    )
                    partition.alter_isr = self.alter_isr
                    partition.isr_eligible = self.isr_eligible
                    partition.high_watermark = min(
                        self._checkpointed_high_watermark(partition), partition.log_end_offset
                    )
                    self.partitions[(topic, index)] = partition
                was_leader = partition.is_leader
                partition.partition_epoch = state.partition_epoch
                if state.leader == self.broker_id:
                    partition.make_leader(
                        state.leader_epoch,
                        list(state.isr),
                        list(state.replicas),
                        self.time.milliseconds(),
                    )
                    new_leaders.append((topic, index))
                    if was_leader:
                        self._on_append(partition)  # waiting produces see the controller's ISR
                else:
                    changed = partition.make_follower(
                        state.leader, state.leader_epoch, list(state.isr), list(state.replicas)
                    )
                    followers.append((topic, index))
                    if was_leader:
                        self.produce_purgatory.check_and_complete((topic, index))
                        self.fetch_purgatory.complete_all((topic, index))
                    fetcher = self.replica_fetcher_manager
                    if changed or (
                        fetcher is not None and fetcher.fetching((topic, index)) is None
                    ):
                        new_followers[(topic, index)] = partition
            except KafkaError as e:
                errors[tp] = e.errno
                continue
            errors[tp] = ErrorCode.NONE
        self._update_fetchers(new_leaders, new_followers, {r.id: r for r in request.live_leaders})
        for callback in self.on_leadership_change:
            callback(new_leaders, followers)
        return ErrorCode.NONE, errors

    def _log_manager(self) -> LogManager:
        if self.log_manager is None:
            raise RuntimeError("this replica manager was made without a log manager")
        return self.log_manager

    def _log_dir_mover(self) -> LogDirMover:
        if self.log_dir_mover is None:
            raise RuntimeError("this replica manager was given no log dir mover")
        return self.log_dir_mover

    def _get_or_create_log(
        self,
        topic: str,
        index: int,
        log_config: LogConfig,
        opened: dict[tuple[str, int], UnifiedLog] | None,
        failures: dict[tuple[str, int], KafkaError] | None,
    ) -> UnifiedLog:
        prepared = None if opened is None else opened.pop((topic, index), None)
        if prepared is not None:
            return prepared
        info, config = log_config(topic, index)
        try:
            return self._log_manager().get_or_create_log(info, index, config)
        except KafkaError as e:
            if failures is not None:
                failures[(topic, index)] = e
            raise

    def open_new_logs_now(
        self, request: LeaderAndIsrRequestData, log_config: LogConfig, threads: int
    ) -> dict[tuple[str, int], UnifiedLog]:
        """As :meth:`open_new_logs`, on ``threads`` worker threads at once, returning when
        all are open (:meth:`LogManager.open_logs_now`): a broker alone at startup."""
        wanted = self._new_logs_wanted(request)
        return self._log_manager().open_logs_now(wanted, log_config, threads) if wanted else {}

    def _new_logs_wanted(self, request: LeaderAndIsrRequestData) -> list[tuple[str, int]]:
        if request.controller_epoch < self.controller_epoch:
            return []
        manager = self._log_manager()
        held = self.partitions
        return [
            s.partition
            for s in request.partitions
            if self.broker_id in s.replicas
            and s.partition not in held
            and s.partition not in self.offline_partitions
            and manager.get(*s.partition) is None
        ]

    async def open_new_logs(
        self, request: LeaderAndIsrRequestData, log_config: LogConfig
    ) -> dict[tuple[str, int], UnifiedLog]:
        """The logs of the partitions ``request`` names for this broker for the first
        time, opened by the log manager off the event loop
        (:meth:`LogManager.open_new_logs`), for :meth:`become_leader_or_follower` to take.
        None is opened for a request from an older controller epoch (it is refused), nor
        for a partition in an offline log dir (it answers KAFKA_STORAGE_ERROR)."""
        wanted = self._new_logs_wanted(request)
        return await self._log_manager().open_new_logs(wanted, log_config) if wanted else {}

    def _update_fetchers(
        self,
        new_leaders: list[tuple[str, int]],
        new_followers: dict[tuple[str, int], Partition],
        live_leaders: dict[int, BrokerRegistration],
    ) -> None:
        """Leaders stop fetching; followers of a new leader or epoch fetch from it,
        starting at their log end with their last epoch (the leader answers
        DivergingEpoch if the log must be cut first)."""
        fetcher = self.replica_fetcher_manager
        if fetcher is None:
            return
        fetcher.remove_fetcher_for_partitions([*new_leaders, *new_followers], shutdown_idle=False)
        fetches: dict[tuple[str, int], tuple[int, PartitionFetchState]] = {}
        for tp, partition in new_followers.items():
            if partition.leader_id >= 0:
                latest = partition.log.latest_epoch
                fetches[tp] = (
                    partition.leader_id,
                    PartitionFetchState(
                        partition.log_end_offset,
                        partition.leader_epoch,
                        -1 if latest is None else latest,
                    ),
                )
        if fetches:
            fetcher.add_fetcher_for_partitions(fetches, live_leaders)
        fetcher.shutdown_idle_fetchers()

    def stop_replicas(
        self, request: StopReplicaRequestData
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Applies a controller's StopReplica: refused whole from an older controller epoch;
        per partition, a leader epoch below the one held (other than -1 and -2, the
        deletion sentinel) gets FENCED_LEADER_EPOCH; otherwise the partition stops being
        served and, with ``delete``, the log manager deletes its log (KafkaStorageError →
        KAFKA_STORAGE_ERROR). A partition not held here is already stopped: NONE."""
        if request.controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = request.controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        for state in request.partitions:
            topic, index = state.partition
            if (topic, index) in self.offline_partitions:
                errors[state.partition] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            partition = self.partitions.get((topic, index))
            if (
                partition is not None
                and state.leader_epoch >= 0
                and state.leader_epoch < partition.leader_epoch
            ):
                errors[state.partition] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if self.replica_fetcher_manager is not None:
                self.replica_fetcher_manager.remove_fetcher_for_partitions([(topic, index)])
            try:
                if state.delete:
                    self.stop_replica(topic, index)
                    self._log_manager().delete_log(topic, index)
                elif partition is not None:
                    partition.leader_id = -1
                    self.produce_purgatory.check_and_complete((topic, index))
                    self.fetch_purgatory.complete_all((topic, index))
            except KafkaError as e:
                errors[state.partition] = e.errno
                continue
            errors[state.partition] = ErrorCode.NONE
        stopped = [
            (s.partition.topic, s.partition.partition)
            for s in request.partitions
            if errors.get(s.partition) == ErrorCode.NONE
        ]
        for callback in self.on_leadership_change:
            callback([], stopped)
        return ErrorCode.NONE, errors

    # ---- log dirs ----

    def handle_log_dir_failure(self, log_dir: str) -> list[tuple[str, int]]:
        """Stops serving the replicas of the failed ``log_dir`` (Kafka's
        ``handleLogDirFailure``; see :func:`stop_serving_log_dir`) and tells the
        leadership listeners they no longer lead them; returns those partitions."""
        offline = stop_serving_log_dir(self, self._log_manager(), self.log_dir_mover, log_dir)
        self._hw_checkpoints.pop(os.path.abspath(log_dir), None)
        for callback in self.on_leadership_change:
            callback([], offline)
        return offline

    def mark_partition_offline(self, key: tuple[str, int]) -> None:
        """The partition's log dir failed: it answers KAFKA_STORAGE_ERROR from now on, and
        produces and fetches waiting on it complete."""
        partition = self.partitions.pop(key, None)
        self.offline_partitions.add(key)
        if partition is not None:
            partition.mark_offline()
            self.produce_purgatory.check_and_complete(key)
            self.fetch_purgatory.complete_all(key)

    def describe_log_dirs(self, partitions: Iterable[tuple[str, int]] | None) -> list[LogDirInfo]:
        """Each log dir with the replicas of ``partitions`` (None: every partition held)
        in it (Kafka's ``describeLogDirs``)."""
        return describe_log_dirs(self, self._log_manager(), self.log_dir_mover, partitions)

    def alter_replica_log_dirs(
        self, assignments: Iterable[tuple[str, int, str]]
    ) -> list[ErrorCode]:
        """Moves each (topic, partition, log dir)'s replica to that dir, in order (Kafka's
        ``alterReplicaLogDirs``): an error or NONE each, the move running on."""
        log_manager, mover = self._log_manager(), self._log_dir_mover()
        return [
            alter_replica_log_dir(self, log_manager, mover, topic, index, path)
            for topic, index, path in assignments
        ]

    # ---- high watermark checkpoints ----

    def _checkpointed_high_watermark(self, partition: Partition) -> int:
        log_dir = os.path.dirname(partition.log.local_log.path)
        entries = self._hw_checkpoints.get(log_dir)
        if entries is None:
            entries = self._hw_checkpoints[log_dir] = offset_checkpoint.read(
                os.path.join(log_dir, offset_checkpoint.REPLICATION_OFFSET_CHECKPOINT)
            )
        return max(0, entries.get(partition.key, 0))

    def high_watermarks_by_dir(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every partition's high watermark, by log dir (taken on the event loop)."""
        by_dir: dict[str, dict[tuple[str, int], int]] = {}
        for partition in self.partitions.values():
            by_dir.setdefault(os.path.dirname(partition.log.local_log.path), {})[partition.key] = (
                partition.high_watermark
            )
        return by_dir

    def checkpoint_high_watermarks(
        self, by_dir: dict[str, dict[tuple[str, int], int]] | None = None
    ) -> None:
        """Writes the high watermarks (default: as they are now) to each log dir's
        replication-offset-checkpoint (Kafka's ``checkpointHighWatermarks``)."""
        if by_dir is None:
            by_dir = self.high_watermarks_by_dir()
        for log_dir, entries in by_dir.items():
            try:
                offset_checkpoint.write(
                    os.path.join(log_dir, offset_checkpoint.REPLICATION_OFFSET_CHECKPOINT), entries
                )
            except OSError as e:
                log.error("writing the high watermark checkpoint of %s: %s", log_dir, e)
                if self.log_manager is not None and is_log_dir_failure(e):
                    self.log_manager.failure_channel.maybe_add_offline_log_dir(
                        log_dir, f"writing the high watermark checkpoint failed: {e}"
                    )

    def maybe_shrink_isr(self, max_lag_ms: int) -> int:
        """Proposes dropping, from the ISR of every partition this broker leads, the
        followers not caught up for ``max_lag_ms``; returns how many partitions proposed."""
        now = self.time.milliseconds()
        return sum(
            1
            for p in list(self.partitions.values())
            if p.is_leader and p.maybe_shrink_isr(now, max_lag_ms)
        )

    def update_follower_fetch_state(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int
    ) -> None:
        """A follower fetched ``partition`` (led here) at ``fetch_offset``: its LEO is known,
        it may join the ISR, and produces and fetches waiting on the high watermark are
        checked if it moved."""
        if partition.update_follower_fetch_state(
            replica_id, fetch_offset, log_start_offset, self.time.milliseconds()
        ):
            self._on_high_watermark(partition)

    def update_follower_high_watermark(
        self, partition: Partition, leader_high_watermark: int, leader_log_start_offset: int
    ) -> None:
        """This broker follows ``partition`` and the leader answered these offsets."""
        if partition.update_follower_high_watermark(leader_high_watermark, leader_log_start_offset):
            self._on_high_watermark(partition)

    def stop_replica(self, topic: str, index: int) -> Partition | None:
        """Stops holding ``topic-index`` (deleted): waiting produces answer
        NOT_LEADER_OR_FOLLOWER and waiting fetches answer what a last read finds."""
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            partition.leader_id = -1
            self.produce_purgatory.check_and_complete((topic, index))
            self.fetch_purgatory.complete_all((topic, index))
        return partition

    def _on_append(self, partition: Partition) -> None:
        key = partition.key
        if key in self.produce_purgatory.watchers:
            self.produce_purgatory.check_and_complete(key)
        if key in self.fetch_purgatory.watchers:
            if not self._fetch_keys_to_check:
                self.time.call_later(0, self._check_fetches)
            self._fetch_keys_to_check[key] = True

    def _on_high_watermark(self, partition: Partition) -> None:
        """The partition's high watermark moved, its log did not grow: waiting produces
        are checked now, consumers' waiting fetches at the end of the loop turn."""
        key = partition.key
        if key in self.produce_purgatory.watchers:
            self.produce_purgatory.check_and_complete(key)
        if key in self.fetch_purgatory.watchers:
            if not self._fetch_keys_to_check:
                self.time.call_later(0, self._check_fetches)
            self._fetch_keys_to_check.setdefault(key, False)

    def _check_fetches(self) -> None:
        keys, self._fetch_keys_to_check = self._fetch_keys_to_check, {}
        for key, grew in keys.items():
            self.fetch_purgatory.check_and_complete(key, None if grew else _reads_to_high_watermark)

    # ---- appends ----

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Iterable[tuple[str, Iterable[PartitionRecords]]],
        response_callback: Callable[[ProduceResults], None],
        origin: str = CLIENT,
    ) -> None:
        """Appends each topic's partition records and calls ``response_callback`` with
        ``[(topic, [ProducePartitionResult, ...]), ...]`` once the acks condition holds:
        at once for acks 0 and 1, or when acks=all is answered for every partition
        (maybe at once as well)."""
        results, waiting = self._append_to_leaders(required_acks, entries, origin)
        if not waiting:
            response_callback(results)
        else:
            self._delay(timeout_ms, results, waiting, response_callback)

    def append(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Sequence[tuple[str, Sequence[PartitionRecords]]],
        origin: str = CLIENT,
        transactional_id: str | None = None,
    ) -> ProduceAnswer:
        """:meth:`append_records` for a caller that returns what it gets: the results
        (a list) when they are ready now, else a future of them. In a cluster the first
        batch of a producer's transaction in a partition is verified with its
        coordinator before it is appended (KIP-890): the answer is then a future."""
        verifier = self.txn_verifier
        if transactional_id and verifier is not None and origin == CLIENT:
            guards = self._start_verifications(entries)
            if guards:
                return asyncio.ensure_future(
                    self._verify_then_append(
                        verifier, timeout_ms, required_acks, entries, transactional_id, guards
                    )
                )
        return self._append_now(timeout_ms, required_acks, entries, origin)

    def _append_now(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Iterable[tuple[str, Iterable[PartitionRecords]]],
        origin: str,
        verified: dict[tuple[str, int], VerificationGuard] | None = None,
        refused: dict[tuple[str, int], tuple[ErrorCode, str]] | None = None,
    ) -> ProduceAnswer:
        results, waiting = self._append_to_leaders(
            required_acks, entries, origin, verified, refused
        )
        return self._answer(timeout_ms, results, waiting)

    def _answer(
        self, timeout_ms: int, results: ProduceResults, waiting: list[ProducePartitionStatus]
    ) -> ProduceAnswer:
        """``results`` now, or a future of them once every waiting partition is answered."""
        if not waiting:
            return results
        done = Completion()
        self._delay(timeout_ms, results, waiting, done)
        # The purgatory only watches (it tries nothing now): the answer is a future.
        answer: asyncio.Future[ProduceResults] = done.result()
        return answer

    def _start_verifications(
        self, entries: Iterable[tuple[str, Iterable[PartitionRecords]]]
    ) -> dict[tuple[str, int], tuple[int, int, VerificationGuard]]:
        """(producer id, epoch, verification guard) of each led partition whose records
        open a transaction there."""
        guards: dict[tuple[str, int], tuple[int, int, VerificationGuard]] = {}
        for topic, partitions in entries:
            for index, records, idempotent in partitions:
                partition = self.partitions.get((topic, index))
                if (
                    idempotent is False
                    or records is None
                    or partition is None
                    or not partition.is_leader
                ):
                    continue  # the append answers for these
                try:
                    batches = logstore.decode_batches(
                        records, records=False, verify_crc=False, allow_partial=False
                    )
                except logstore.LogStoreError:
                    continue
                if not batches or not batches[0].is_transactional:
                    continue
                pid = batches[0].producer_id
                state = partition.log.producer_state
                if not state.in_transaction(pid):
                    guards[(topic, index)] = (
                        pid,
                        batches[0].producer_epoch,
                        state.verification_guard(pid),
                    )
        return guards

    async def _verify_then_append(
        self,
        verifier: TxnVerifier,
        timeout_ms: int,
        required_acks: int,
        entries: Iterable[tuple[str, Iterable[PartitionRecords]]],
        transactional_id: str,
        guards: dict[tuple[str, int], tuple[int, int, VerificationGuard]],
    ) -> ProduceResults:
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for key, (pid, epoch, _) in guards.items():
            by_producer.setdefault((pid, epoch), []).append(key)
        answers: dict[tuple[str, int], ErrorCode] = {}
        for (pid, epoch), keys in by_producer.items():
            answers.update(await verifier.verify(transactional_id, pid, epoch, keys))
        refused = {
            key: verification_produce_error(error)
            for key, error in answers.items()
            if error != ErrorCode.NONE
        }
        verified = {key: guard for key, (_, _, guard) in guards.items() if key not in refused}
        results = self._append_now(timeout_ms, required_acks, entries, CLIENT, verified, refused)
        return results if isinstance(results, list) else await results

    def _delay(
        self,
        timeout_ms: int,
        results: ProduceResults,
        waiting: list[ProducePartitionStatus],
        response_callback: Callable[[ProduceResults], None],
    ) -> None:
        operation = DelayedProduce(timeout_ms, results, waiting, response_callback)
        self.produce_purgatory.watch(operation, {s.partition.key for s in waiting})

    def _append_to_leaders(
        self,
        required_acks: int,
        entries: Iterable[tuple[str, Iterable[PartitionRecords]]],
        origin: str,
        verified: dict[tuple[str, int], VerificationGuard] | None = None,
        refused: dict[tuple[str, int], tuple[ErrorCode, str]] | None = None,
    ) -> tuple[ProduceResults, list[ProducePartitionStatus]]:
        """Appends every partition's records: (the results, the acks=all partitions
        whose high watermark has yet to pass their records). ``refused``: partitions
        answered (error, message) without an append; ``verified``: partitions whose
        transaction was verified under a guard (appended only if it still holds)."""
        results: ProduceResults = []
        waiting: list[ProducePartitionStatus] = []
        held = self.partitions
        for topic, partitions in entries:
            out: list[ProducePartitionResult] = []
            results.append((topic, out))
            if required_acks not in (0, 1, -1):
                acks_error = InvalidRequiredAcksError(f"acks={required_acks}")
                out.extend(
                    ProducePartitionResult(
                        index, int(acks_error.errno), -1, -1, -1, str(acks_error)
                    )
                    for index, _, _ in partitions
                )
                continue
            for index, records, idempotent in partitions:
                if refused and (topic, index) in refused:
                    error, message = refused[(topic, index)]
                    out.append(ProducePartitionResult(index, int(error), -1, -1, -1, message))
                    continue
                try:
                    partition = held.get((topic, index))
                    if partition is None:
                        partition = self.get_partition_or_error(topic, index)  # raises
                    # A coordinator's records are the bytes it encoded, never null.
                    if origin == COORDINATOR and isinstance(records, bytes):
                        base_offset, last_offset = partition.append_records(records)
                        append_time, log_start = -1, partition.log_start_offset
                    else:
                        base_offset, last_offset, append_time, log_start = (
                            partition.append_records_to_leader(
                                records,
                                required_acks,
                                None,
                                idempotent,
                                self._verification(partition, idempotent, verified),
                            )
                        )
                except KafkaError as e:
                    out.append(
                        ProducePartitionResult(
                            index, int(e.errno), -1, -1, -1, str(e), e.record_errors
                        )
                    )
                    continue
                result = ProducePartitionResult(index, 0, base_offset, append_time, log_start)
                out.append(result)
                if required_acks == -1:
                    self._wait_for_acks(partition, result, last_offset + 1, waiting)
        return results, waiting

    @staticmethod
    def _wait_for_acks(
        partition: Partition,
        result: ProducePartitionResult,
        required_offset: int,
        waiting: list[ProducePartitionStatus],
    ) -> None:
        """acks=all for a partition that appended up to ``required_offset``: answered
        now when its high watermark passed it with the ISR full, or when the ISR is
        below ``min.insync.replicas`` or this broker no longer leads (``result`` then
        takes the error); else the partition joins ``waiting``."""
        if partition.high_watermark >= required_offset and partition.isr_full:
            return
        done, error = partition.check_enough_replicas_reached_offset(required_offset)
        if not done:
            waiting.append(ProducePartitionStatus(result, partition, required_offset))
        elif error != ErrorCode.NONE:
            result.fail(error)

    def _verification(
        self,
        partition: Partition,
        idempotent: bool | None,
        verified: dict[tuple[str, int], VerificationGuard] | None,
    ) -> Callable[[int, int], ErrorCode] | None:
        """How the partition's log checks a transactional batch: against the verification
        guard when the transaction was verified for this append (KIP-890); else, in a
        cluster, a producer's transaction must have started here already; else the
        local coordinator's ``verify_transaction``."""
        if idempotent is False:
            return None
        state = partition.log.producer_state
        guard = None if verified is None else verified.get(partition.key)
        if guard is not None:
            return lambda pid, epoch: (
                ErrorCode.NONE if state.verified(pid, guard) else ErrorCode.INVALID_TXN_STATE
            )
        verify = self.verify_transaction
        if self.txn_verifier is not None:
            return lambda pid, epoch: (
                ErrorCode.NONE if state.in_transaction(pid) else ErrorCode.INVALID_TXN_STATE
            )
        if verify is None:
            return None
        topic, index = partition.key
        return lambda pid, epoch: verify(pid, epoch, topic, index)

    def append_markers(self, timeout_ms: int, markers: Iterable[TxnMarker]) -> ProduceAnswer:
        """Appends COMMIT/ABORT markers as leader with acks=all (WriteTxnMarkers, and the
        transaction coordinator's own): ``[(topic, [ProducePartitionResult, ...]), ...]``
        as :meth:`append` answers, now or as a future once every marker is replicated
        to the ISR (or failed)."""
        results: ProduceResults = []
        waiting: list[ProducePartitionStatus] = []
        by_topic: dict[str, list[ProducePartitionResult]] = {}
        for topic, index, producer_id, producer_epoch, commit, coordinator_epoch in markers:
            out = by_topic.get(topic)
            if out is None:
                out = by_topic[topic] = []
                results.append((topic, out))
            try:
                partition = self.get_partition_or_error(topic, index)
                offset, _ = partition.append_marker(
                    producer_id, producer_epoch, commit, coordinator_epoch
                )
            except KafkaError as e:
                out.append(ProducePartitionResult(index, int(e.errno), -1, -1, -1, str(e)))
                continue
            result = ProducePartitionResult(index, 0, offset, -1, partition.log_start_offset)
            out.append(result)
            self._wait_for_acks(partition, result, offset + 1, waiting)
        return self._answer(timeout_ms, results, waiting)

    # ---- fetches ----

    def fetch_messages(
        self,
        params: FetchParams,
        infos: list[FetchInfo],
        on_done: Callable[[list[FetchPartitionData]], None] | None = None,
    ) -> FetchAnswer | None:
        """Reads ``infos`` (Kafka's ``fetchMessages``): a :class:`FetchPartitionData`
        each, in order, at once when the read holds ``params.min_bytes``, may not wait
        or reads no partition held here; otherwise a future of them, completed by
        :class:`DelayedFetch` from a later read as the partitions read grow, or at
        ``params.max_wait_ms``. With ``on_done``, a fetch that waits returns None and
        ``on_done`` gets the reads when it completes (inside the purgatory's check)."""
        first = self.read_from_local_log(params, infos)
        if first.bytes_read >= params.min_bytes or params.max_wait_ms <= 0 or not first.partitions:
            if params.replica_id >= 0:
                self._record_leader_replication(first.reads)
            return first.reads
        if on_done is not None:
            self.fetch_purgatory.watch(
                DelayedFetch(
                    self,
                    params,
                    infos,
                    on_done
                    if params.replica_id < 0
                    else functools.partial(self._answer_follower, on_done),
                ),
                [p.key for p in first.partitions],
            )
            return None
        done = Completion()
        respond: Callable[[list[FetchPartitionData]], None] = (
            done if params.replica_id < 0 else functools.partial(self._answer_follower, done)
        )
        self.fetch_purgatory.watch(
            DelayedFetch(self, params, infos, respond), [p.key for p in first.partitions]
        )
        # The purgatory only watches (it tries nothing now): the answer is a future.
        answer: asyncio.Future[list[FetchPartitionData]] = done.result()
        return answer

    def _answer_follower(
        self, done: Callable[[list[FetchPartitionData]], None], reads: list[FetchPartitionData]
    ) -> None:
        self._record_leader_replication(reads)
        done(reads)

    def _record_leader_replication(self, reads: list[FetchPartitionData]) -> None:
        """The leader's throttle counts the record bytes a follower's answer carries for
        throttled partitions, in sync or not (Kafka's ``sizeOfThrottledPartitions``)."""
        quota = self.leader_quota
        size = sum(
            len(read.records)
            for read in reads
            if read.records and quota.is_throttled((read.fetch.topic or "", read.fetch.partition))
        )
        if size:
            quota.record(size)

    def read_from_local_log(self, params: FetchParams, infos: list[FetchInfo]) -> LogReadResult:
        """One read of ``infos`` as they are now (:mod:`.local_log_read`); a follower's
        fetch offsets are recorded as its log end offsets."""
        return read_from_local_log(self, params, infos)

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()


def _reads_to_high_watermark(operation: DelayedOperation) -> bool:
    """Whether a waiting operation may complete when only a high watermark moved: any
    but a follower's fetch, which reads up to the log end."""
    return not (isinstance(operation, DelayedFetch) and operation.params.replica_id >= 0)
