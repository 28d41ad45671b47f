"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and offsets for times.

A follower (``replica_id`` ≥ 0) gets the leader's log end for "latest", not its high
watermark. A client asking "latest" (or a time) from a new leader whose high watermark
is still below the start of its epoch gets OFFSET_NOT_AVAILABLE (the committed end is
not known yet), as from Kafka.

With an authorizer, a topic the connection may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED.

v0 answers up to ``max_num_offsets`` offsets in ``old_style_offsets``, newest first, by
Kafka's ``legacyFetchOffsetsBefore``: the log's segments as (first offset, last
modified) pairs plus (log end, now) when the active segment holds data; -1 takes the
last pair and those before it, -2 the first, a time the last pair modified at or
before it and those before. A consumer never sees an offset past the high watermark
(the newest ones become the high watermark). A negative timestamp a version does not
know (-3 before v7, -4 before v8, -5 before v9, any other) gets UNSUPPORTED_VERSION."""

from __future__ import annotations

import os

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, OffsetNotAvailableError
from logstore.protocol.messages.list_offsets import ListOffsetsResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1
# The first version that knows each special timestamp (Kafka's timestampMinSupportedVersion).
_FIRST_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def legacy_offsets(
    partition, timestamp: int, max_num_offsets: int, from_consumer: bool, now_ms: int
) -> list[int]:
    """ListOffsets v0's answer (see the module docstring), offsets descending."""
    # Partition has no segment accessor of its own; the log's segment list is read-only here.
    segments = partition.log.local_log.segments()
    pairs = [
        (max(s.base_offset, partition.log_start_offset), _modified_ms(s.log_path)) for s in segments
    ]
    if segments and segments[-1].size > 0:
        pairs.append((partition.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(pairs) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(pairs) - 1
        while start >= 0 and pairs[start][1] > timestamp:
            start -= 1
    offsets = sorted(
        (pairs[i][0] for i in range(start, start - min(max_num_offsets, start + 1), -1)),
        reverse=True,
    )
    if from_consumer:
        hw = partition.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets


def _modified_ms(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0


def lookup(
    partition, timestamp: int, isolation_level: int, replica_id: int = -1
) -> tuple[int, int]:
    """(timestamp, offset) that ListOffsets answers; (-1, -1) when no record qualifies.

    Reads stop at the last stable offset (read_committed) or the high watermark: a
    record found by timestamp at or past that bound does not qualify, as in Kafka."""
    read_committed = isolation_level == READ_COMMITTED
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, partition.log_start_offset
    if replica_id >= 0 and timestamp == LATEST:
        return -1, partition.log_end_offset
    if (
        replica_id < 0
        and partition.is_leader
        and partition.leader_epoch_start_offset > partition.high_watermark
    ):
        raise OffsetNotAvailableError(
            f"{partition.name}: the high watermark {partition.high_watermark} is below the start of "
            f"leader epoch {partition.leader_epoch} at {partition.leader_epoch_start_offset}"
        )
    if timestamp == LATEST:
        return -1, partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == MAX_TIMESTAMP:
        timestamp = partition.largest_timestamp()
        if timestamp < 0:
            return -1, -1
    return partition.fetch_offset_for_timestamp(timestamp, read_committed) or (-1, -1)


def handle_list_offsets(apis, request, connection):
    body = request.body
    denied = auth_helper.denied(
        apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, ts, offset, epoch = ErrorCode.NONE, -1, -1, -1
            old_style: list[int] = []
            partition = apis.replica_manager.get_partition(t.name, p.partition_index)
            if t.name in denied:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif (error := partition.leader_epoch_error(p.current_leader_epoch)) != ErrorCode.NONE:
                pass
            elif p.timestamp < 0 and _FIRST_VERSION.get(p.timestamp, 99) > request.api_version:
                error = ErrorCode.UNSUPPORTED_VERSION
            elif request.api_version == 0:
                try:
                    old_style = legacy_offsets(
                        partition,
                        p.timestamp,
                        p.max_num_offsets,
                        body.replica_id < 0,
                        apis.time.milliseconds(),
                    )
                except KafkaError as e:
                    error = e.errno
            else:
                try:
                    ts, offset = lookup(
                        partition, p.timestamp, body.isolation_level, body.replica_id
                    )
                    epoch = partition.leader_epoch if offset >= 0 else -1
                except KafkaError as e:
                    error = e.errno
            parts.append(
                ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=int(error),
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                    old_style_offsets=old_style,
                )
            )
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


HANDLERS = {ApiKey.LIST_OFFSETS: handle_list_offsets}
