"""One replica fetcher (Kafka's ``AbstractFetcherThread`` + ``ReplicaFetcherThread``):
an asyncio task that fetches a set of follower partitions from one leader broker, in a
loop of Fetch requests, and applies each partition's answer.

Per partition, by the error the leader answers:
- NONE with DivergingEpoch: cut the log where :mod:`broker_py.cluster.truncation`
  says, fetch again from the new log end with the log's new last epoch;
- NONE: append the batches as they are (offsets and epochs kept), then take the
  leader's high watermark (bounded by the own log end) and log start offset;
- OFFSET_OUT_OF_RANGE: ask the leader's log end; if it is below the own log end (only
  after an unclean election) cut to it, else start at the leader's log start when the
  own log end is below it;
- FENCED_LEADER_EPOCH: this broker follows an old epoch; the partition leaves the
  fetcher until the controller's next LeaderAndIsr adds it back;
- anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH: the leader has not
  applied its LeaderAndIsr yet; a storage error; the connection): back off
  ``replica.fetch.backoff.ms`` and retry.

An answer is applied only if the partition's fetch state is still the one the request
was built from (a LeaderAndIsr in between replaces it). A follower never truncates to
its high watermark: only by epoch, or to the leader's log end when out of range.

Replication throttle (KIP-73, Kafka's ``shouldFollowerThrottle``): a partition the
follower's throttle lists, and not caught up to the leader's high watermark at its last
answer, is left out of the Fetch while that throttle is over its rate; when every ready
partition is left out the fetcher waits ``replica.fetch.backoff.ms``. The record bytes of
throttled partitions are counted against it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker_py.cluster.truncation import EpochEndOffset, offset_truncation_state
from broker_py.replication.follower_fetch_codec import FetchedPartition
from broker_py.replication.leader_end_point import (
    EARLIEST,
    LATEST,
    PartitionFetchState,
    RemoteLeaderEndPoint,
    TopicPartition,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition
    from broker_py.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class ReplicaFetcherThread:
    def __init__(
        self,
        name: str,
        leader_id: int,
        leader: RemoteLeaderEndPoint,
        replica_manager: ReplicaManager,
        backoff_ms: int,
    ) -> None:
        self.name = name
        self.leader_id = leader_id
        self.leader = leader
        self.replica_manager = replica_manager
        self.backoff_s = backoff_ms / 1000
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- partitions (called on the event loop) ----

    def add_partitions(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        self.partitions.update(states)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    @property
    def idle(self) -> bool:
        return not self.partitions

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.leader.close()

    # ---- the loop ----

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until <= now}
            if not ready:
                self._changed.clear()
                wake = (
                    min((s.delayed_until for s in self.partitions.values()), default=now + 60) - now
                )
                try:
                    await asyncio.wait_for(self._changed.wait(), max(wake, 0.001))
                except TimeoutError:
                    pass
                continue
            ready = self._unthrottled(ready)
            if not ready:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), self.backoff_s)
                except TimeoutError:
                    pass
                continue
            try:
                await self._fetch(ready)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: fetch failed", self.name)
                self._delay(ready)
                await asyncio.sleep(self.backoff_s)

    def _unthrottled(
        self, ready: dict[TopicPartition, PartitionFetchState]
    ) -> dict[TopicPartition, PartitionFetchState]:
        """``ready`` less the partitions the follower's throttle holds back now."""
        quota = self.replica_manager.follower_quota
        held = {tp for tp, s in ready.items() if not s.in_sync and quota.is_throttled(tp)}
        if not held or not quota.is_quota_exceeded():
            return ready
        return {tp: s for tp, s in ready.items() if tp not in held}

    def _log_start_offset(self, tp: TopicPartition) -> int:
        partition = self.replica_manager.get_partition(*tp)
        return -1 if partition is None else partition.log_start_offset

    async def _fetch(self, ready: dict[TopicPartition, PartitionFetchState]) -> None:
        request = self.leader.build_fetch(ready, self._log_start_offset)
        try:
            answers = await self.leader.fetch(request)
        except (KafkaError, OSError, TimeoutError) as e:
            log.info("%s: fetch from broker %d failed: %s", self.name, self.leader_id, e)
            self._delay(ready)
            await asyncio.sleep(self.backoff_s)
            return
        out_of_range: list[tuple[TopicPartition, PartitionFetchState, Partition]] = []
        for tp, state in ready.items():
            data = answers.get(tp)
            if data is None or self.partitions.get(tp) is not state:
                continue  # not answered, or replaced by a LeaderAndIsr meanwhile
            partition = self.replica_manager.get_partition(*tp)
            if (
                partition is None
                or partition.is_leader
                or partition.leader_epoch != state.current_leader_epoch
            ):
                continue
            error = (
                # the member of that value (mypy reads a call of ErrorCode.__new__, mypy#10573)
                ErrorCode(data.error_code)  # type: ignore[call-arg]
                if data.error_code in ErrorCode._value2member_map_
                else ErrorCode.UNKNOWN_SERVER_ERROR
            )
            try:
                if error == ErrorCode.NONE:
                    self._process_partition_data(partition, state, data)
                elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, state, partition))
                elif error == ErrorCode.FENCED_LEADER_EPOCH:
                    log.info(
                        "%s: %s is fenced at leader epoch %d; waiting for the controller",
                        self.name,
                        partition.name,
                        state.current_leader_epoch,
                    )
                    self.partitions.pop(tp, None)
                else:
                    if error not in (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.UNKNOWN_LEADER_EPOCH,
                    ):
                        log.info("%s: fetching %s: %s", self.name, partition.name, error.name)
                    self._delay({tp: state})
            except KafkaError as e:
                log.warning("%s: %s: %s", self.name, partition.name, e)
                self._delay({tp: state})
        for tp, state, partition in out_of_range:
            try:
                await self._handle_out_of_range(tp, state, partition)
            except (KafkaError, OSError, TimeoutError) as e:
                log.info(
                    "%s: %s out of range, and asking the leader failed: %s",
                    self.name,
                    partition.name,
                    e,
                )
                self._delay({tp: state})

    def _delay(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        until = asyncio.get_running_loop().time() + self.backoff_s
        for state in states.values():
            state.delayed_until = until

    # ---- applying answers ----

    def _process_partition_data(
        self, partition: Partition, state: PartitionFetchState, data: FetchedPartition
    ) -> None:
        diverging = data.diverging_epoch
        if diverging is not None and (diverging.epoch != -1 or diverging.end_offset != -1):
            self._truncate_on_diverging(
                partition, state, EpochEndOffset(diverging.epoch, diverging.end_offset)
            )
            return
        records = data.records
        if records:
            partition.append_records_to_follower(records)
            state.fetch_offset = partition.log_end_offset
            state.last_fetched_epoch = _latest_epoch(partition)
            quota = self.replica_manager.follower_quota
            if quota.is_throttled((partition.topic, partition.index)):
                quota.record(len(records))
        state.lag = max(0, data.high_watermark - state.fetch_offset)
        state.in_sync = state.lag == 0
        self.replica_manager.update_follower_high_watermark(
            partition, data.high_watermark, data.log_start_offset
        )

    def _truncate_on_diverging(
        self, partition: Partition, state: PartitionFetchState, leader: EpochEndOffset
    ) -> None:
        plog = partition.log
        target = offset_truncation_state(
            leader, lambda e: EpochEndOffset(*plog.end_offset_for_epoch(e)), plog.log_end_offset
        )
        if target.offset < plog.log_end_offset:
            log.info(
                "%s: truncating %s from %d to %d (leader's epoch %d ends at %d)",
                self.name,
                partition.name,
                plog.log_end_offset,
                target.offset,
                leader.epoch,
                leader.end_offset,
            )
        partition.truncate_to(target.offset)
        state.fetch_offset = partition.log_end_offset
        state.last_fetched_epoch = -1 if leader.epoch == -1 else _latest_epoch(partition)

    async def _handle_out_of_range(
        self, tp: TopicPartition, state: PartitionFetchState, partition: Partition
    ) -> None:
        leader_end = await self.leader.list_offset(tp, state.current_leader_epoch, LATEST)
        if self.partitions.get(tp) is not state:
            return
        end = partition.log_end_offset
        if leader_end < end:
            log.warning(
                "%s: the leader of %s ends at %d, below this replica's %d"
                " (an unclean election): truncating",
                self.name,
                partition.name,
                leader_end,
                end,
            )
            partition.truncate_to(leader_end)
        else:
            leader_start = await self.leader.list_offset(tp, state.current_leader_epoch, EARLIEST)
            if self.partitions.get(tp) is not state:
                return
            if leader_start > partition.log_end_offset:
                log.info(
                    "%s: %s ends at %d, below the leader's log start %d: starting over there",
                    self.name,
                    partition.name,
                    partition.log_end_offset,
                    leader_start,
                )
                partition.truncate_fully_and_start_at(leader_start)
        state.fetch_offset = partition.log_end_offset
        state.last_fetched_epoch = _latest_epoch(partition)


def _latest_epoch(partition: Partition) -> int:
    latest = partition.log.latest_epoch
    return -1 if latest is None else latest
