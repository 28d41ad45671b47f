"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and offsets for times.

A follower (``replica_id`` ≥ 0) gets the leader's log end for "latest", not its high
watermark. A client asking "latest" (or a time) from a new leader whose high watermark
is still below the start of its epoch gets OFFSET_NOT_AVAILABLE (the committed end is
not known yet), as from Kafka.

With an authorizer, a topic the connection may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED.

v0 answers up to ``max_num_offsets`` offsets in ``old_style_offsets``, newest first, by
Kafka's ``legacyFetchOffsetsBefore`` (:meth:`Partition.legacy_fetch_offsets_before`):
the segments' first offsets and the log end, by when each was last written. A
consumer never sees an offset past the high watermark. A negative timestamp a version
does not know (-3 before v7, -4 before v8, -5 before v9, any other) gets UNSUPPORTED_VERSION."""

from __future__ import annotations

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
            f"{partition.name}: the high watermark {partition.high_watermark} is below the "
            f"start of leader epoch {partition.leader_epoch} at "
            f"{partition.leader_epoch_start_offset}"
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
                    old_style = partition.legacy_fetch_offsets_before(
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
