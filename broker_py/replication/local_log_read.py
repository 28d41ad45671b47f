"""One read of a fetch's partitions from this broker's logs (Kafka's
``ReplicaManager.readFromLocalLog``).

Limits follow Kafka: a partition returns at most its ``max_bytes`` and the read at most
``FetchParams.max_bytes``, except that the first partition with data returns at least
one whole batch so a fetcher can always make progress.

A consumer reads up to the high watermark (read_committed: the last stable offset) of
the leader, or, from Fetch v11, of a follower (KIP-392); a read_committed read lists
the aborted transactions its records overlap, from the partition's transaction index.
With a replica selector, the leader may send a consumer to another replica
(``preferred_read_replica``), answered at once.

A follower (``replica_id`` ≥ 0) reads up to the log end and gets a DivergingEpoch
where its log disagrees with the leader's; otherwise its fetch offset is recorded as
its log end offset (which may move the high watermark and the ISR). A follower outside
the ISR gets no records of a partition the leader's replication throttle lists while
that throttle is over its rate (Kafka's ``shouldLeaderThrottle``, KIP-73); an in-sync
follower is never held back, so acks=all is not slowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_py.replication import replica_selector
from broker_py.replication.fetch_data import (
    FetchInfo,
    FetchParams,
    FetchPartitionData,
    LogReadResult,
    ToConvert,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.types import DeferredRecords

if TYPE_CHECKING:
    from broker_py.cluster.partition import Partition
    from broker_py.replication.replica_manager import ReplicaManager

TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
KAFKA_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


def read_from_local_log(
    manager: ReplicaManager, params: FetchParams, infos: list[FetchInfo]
) -> LogReadResult:
    if params.replica_id >= 0:
        return _read_for_follower(manager, params, infos)
    return _read_for_consumer(manager, params, infos)


def _read_for_follower(
    manager: ReplicaManager, params: FetchParams, infos: list[FetchInfo]
) -> LogReadResult:
    remaining = params.max_bytes
    denied = params.denied
    follower = params.replica_id
    first_with_data = True
    total = 0
    touched: list[Partition] = []
    out: list[FetchPartitionData] = []
    held = manager.partitions
    for fp in infos:
        if fp.topic is None or fp.topic in denied:
            out.append(
                FetchPartitionData(
                    fp, UNKNOWN_TOPIC_ID if fp.topic is None else TOPIC_AUTHORIZATION_FAILED, -1, -1
                )
            )
            continue
        partition = held.get((fp.topic, fp.partition))
        if partition is None:
            out.append(
                FetchPartitionData(
                    fp,
                    KAFKA_STORAGE_ERROR
                    if (fp.topic, fp.partition) in manager.offline_partitions
                    else UNKNOWN_TOPIC_OR_PARTITION,
                    -1,
                    -1,
                )
            )
            continue
        touched.append(partition)
        error = partition.leader_epoch_error(fp.current_leader_epoch)
        if error != ErrorCode.NONE:
            out.append(
                FetchPartitionData(
                    fp,
                    int(error),
                    partition.high_watermark,
                    partition.log_start_offset,
                    partition=partition,
                )
            )
            continue
        try:
            diverging, slice_ = partition.read_for_follower(
                fp.fetch_offset,
                fp.last_fetched_epoch,
                max(0, min(fp.max_bytes, remaining)),
                first_with_data,
            )
        except KafkaError as e:
            out.append(
                FetchPartitionData(
                    fp,
                    int(e.errno),
                    partition.high_watermark,
                    partition.log_start_offset,
                    partition=partition,
                )
            )
            continue
        if diverging is None:
            manager.update_follower_fetch_state(
                partition, follower, fp.fetch_offset, fp.fetcher_log_start_offset
            )
        records: bytes | DeferredRecords = b""
        if slice_ is not None and _leader_throttled(manager, partition, follower):
            slice_ = None
        if slice_ is not None:
            first_with_data = False
            remaining -= slice_.length
            total += slice_.length
            records = DeferredRecords(slice_.length, slice_)
        out.append(
            FetchPartitionData(
                fp,
                0,
                partition.high_watermark,
                partition.log_start_offset,
                records,
                None,
                partition,
                None if diverging is None else (diverging.epoch, diverging.end_offset),
            )
        )
    return LogReadResult(out, total, touched)


def _leader_throttled(manager: ReplicaManager, partition: Partition, follower: int) -> bool:
    """Whether ``follower``'s read of ``partition`` is held back by the leader's throttle."""
    if follower in partition.isr:
        return False
    quota = manager.leader_quota
    return quota.is_throttled((partition.topic, partition.index)) and quota.is_quota_exceeded()


def _read_for_consumer(
    manager: ReplicaManager, params: FetchParams, infos: list[FetchInfo]
) -> LogReadResult:
    remaining = params.max_bytes
    legacy = params.down_convert
    if legacy:
        remaining = min(remaining, params.down_convert_max_bytes)
    read_committed = params.read_committed
    no_data: list[tuple[int, int]] | None = [] if read_committed else None
    denied = params.denied
    topic_name = params.topic_name
    first_with_data = True
    total = 0
    touched: list[Partition] = []
    out: list[FetchPartitionData] = []
    held = manager.partitions
    selector = params.selector
    redirected = False
    for fp in infos:
        name = fp.topic if topic_name is None else topic_name(fp)
        if name is not None and name in denied:
            out.append(FetchPartitionData(fp, TOPIC_AUTHORIZATION_FAILED, -1, -1))
            continue
        if name is None:
            out.append(FetchPartitionData(fp, UNKNOWN_TOPIC_ID, -1, -1))
            continue
        fp.topic = name
        partition = held.get((name, fp.partition))
        if partition is None:
            out.append(FetchPartitionData(fp, _not_held_error(manager, name, fp.partition), -1, -1))
            continue
        touched.append(partition)
        high_watermark = partition.high_watermark
        log_start_offset = partition.log_start_offset
        if fp.current_leader_epoch >= 0 or partition.leader_id != partition.local_broker_id:
            # A consumer naming its rack (v11+) may read from a follower, up to its high watermark.
            error = partition.leader_epoch_error(
                fp.current_leader_epoch, leader_only=params.leader_only
            )
            if (
                error == ErrorCode.NONE
                and not partition.is_leader
                and fp.fetch_offset > partition.log_end_offset
            ):
                # A follower behind the consumer (or a former leader just truncated) sends
                # it back to the leader rather than out of range, which would reset it.
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if error != ErrorCode.NONE:
                out.append(
                    FetchPartitionData(
                        fp, int(error), high_watermark, log_start_offset, partition=partition
                    )
                )
                continue
        if selector is not None and partition.is_leader:
            preferred = _preferred_read_replica(manager, params, partition, fp.fetch_offset)
            if preferred >= 0:
                out.append(
                    FetchPartitionData(
                        fp,
                        0,
                        high_watermark,
                        log_start_offset,
                        b"",
                        no_data,
                        partition,
                        None,
                        preferred,
                    )
                )
                redirected = True  # answered at once, as Kafka does
                continue
        if fp.fetch_offset == high_watermark:  # caught up: nothing to read
            out.append(
                FetchPartitionData(fp, 0, high_watermark, log_start_offset, b"", no_data, partition)
            )
            continue
        try:
            slice_ = partition.read_records(
                fp.fetch_offset,
                max(0, min(fp.max_bytes, remaining)),
                read_committed,
                first_with_data,
            )
        except KafkaError as e:
            out.append(
                FetchPartitionData(
                    fp, int(e.errno), high_watermark, log_start_offset, partition=partition
                )
            )
            continue
        if slice_ is None:
            out.append(
                FetchPartitionData(fp, 0, high_watermark, log_start_offset, b"", no_data, partition)
            )
            continue
        first_with_data = False
        remaining -= slice_.length
        total += slice_.length
        if legacy:
            limit = max(slice_.length, min(fp.max_bytes, remaining + slice_.length))
            out.append(
                FetchPartitionData(
                    fp,
                    0,
                    high_watermark,
                    log_start_offset,
                    ToConvert(slice_, limit),
                    None,
                    partition,
                )
            )
            continue
        aborted = None
        if read_committed:
            aborted = [
                (t.producer_id, t.first_offset)
                for t in partition.aborted_transactions(fp.fetch_offset, slice_.last_offset + 1)
            ]
        records = DeferredRecords(slice_.length, slice_)
        out.append(
            FetchPartitionData(fp, 0, high_watermark, log_start_offset, records, aborted, partition)
        )
    if redirected:
        total = max(total, params.min_bytes)
    return LogReadResult(out, total, touched)


def _not_held_error(manager: ReplicaManager, topic: str, index: int) -> int:
    """KAFKA_STORAGE_ERROR for a partition in an offline log dir; NOT_LEADER_OR_FOLLOWER
    for a partition the cluster has elsewhere (Kafka's answer: the client refreshes its
    metadata), else UNKNOWN_TOPIC_OR_PARTITION."""
    if (topic, index) in manager.offline_partitions:
        return KAFKA_STORAGE_ERROR
    exists = manager.partition_exists
    return (
        NOT_LEADER_OR_FOLLOWER
        if exists is not None and exists(topic, index)
        else UNKNOWN_TOPIC_OR_PARTITION
    )


def _preferred_read_replica(
    manager: ReplicaManager, params: FetchParams, partition: Partition, fetch_offset: int
) -> int:
    """KIP-392: the follower the consumer should read from, or -1 for this leader."""
    racks = params.replica_racks(partition) if params.replica_racks is not None else {}
    leader, followers = replica_selector.candidates(
        partition, fetch_offset, racks, manager.time.milliseconds()
    )
    chosen = replica_selector.select(params.selector, params.client_rack, leader, followers)
    return -1 if chosen == leader.broker_id else chosen
