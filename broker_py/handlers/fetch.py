"""Fetch: whole batches from each partition, long-polling for ``min_bytes``.

Record bytes never pass through Python: each partition's records are a
:class:`DeferredRecords` placeholder holding a ``logstore.FileSlice``, which the
network layer sends with ``sendfile(2)``.

Limits follow Kafka: a partition returns at most ``partition_max_bytes`` and the
response at most ``max_bytes`` (v3+), except that the first partition with data
returns at least one whole batch so a consumer can always make progress. Reads stop
at the high watermark (read_uncommitted) or the last stable offset (read_committed).
A read_committed response lists the aborted transactions that overlap the records it
returns, from the partition's transaction index; the consumer drops their batches.

With an authorizer, a topic the connection may not READ gets TOPIC_AUTHORIZATION_FAILED.

Fetch sessions (v7+) are not kept: every response has session id 0, which tells the
client to send full fetch requests.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import logstore

from broker_py import auth_helper
from broker_py.acl_binding import AclOperation, ResourceType
from broker_py.error_codes import ErrorCode
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.fetch import FetchResponse
from broker_py.protocol.types import DeferredRecords

READ_COMMITTED = 1
NULL_UUID = uuid.UUID(int=0)


def _partition_data(index: int, error: ErrorCode, partition=None, records=b"", aborted=None) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(
        partition_index=index,
        error_code=int(error),
        high_watermark=partition.high_watermark if partition else -1,
        last_stable_offset=partition.last_stable_offset if partition else -1,
        log_start_offset=partition.log_start_offset if partition else -1,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=records,
    )


def _read(broker, body, version: int, denied: set[str]):
    """One pass over the requested partitions: (response topics, bytes found, partitions read)."""
    remaining = body.max_bytes if version >= 3 else 2**31 - 1
    first_with_data = True
    total = 0
    touched = []
    out = []
    for ft in body.topics:
        if version >= 13:
            topic = broker.metadata.by_id(ft.topic_id)
            name = topic.name if topic else None
        else:
            name = ft.topic
            topic = broker.metadata.get(name)
        parts = []
        for fp in ft.partitions:
            if name in denied:
                parts.append(_partition_data(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                parts.append(_partition_data(fp.partition, error))
                continue
            partition = broker.partitions.get((name, fp.partition))
            if partition is None:
                parts.append(_partition_data(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            touched.append(partition)
            error = partition.leader_epoch_error(fp.current_leader_epoch if version >= 9 else -1)
            if error != ErrorCode.NONE:
                parts.append(_partition_data(fp.partition, error, partition))
                continue
            read_committed = body.isolation_level == READ_COMMITTED
            bound = partition.last_stable_offset if read_committed else partition.high_watermark
            try:
                slice_ = partition.log.read_slice(
                    fp.fetch_offset,
                    max(0, min(fp.partition_max_bytes, remaining)),
                    max_offset=bound,
                    min_one_batch=first_with_data,
                )
            except logstore.OffsetOutOfRangeError:
                parts.append(_partition_data(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, partition))
                continue
            except logstore.LogStoreError:
                parts.append(_partition_data(fp.partition, ErrorCode.KAFKA_STORAGE_ERROR, partition))
                continue
            if slice_ is None:
                parts.append(_partition_data(fp.partition, ErrorCode.NONE, partition, aborted=[] if read_committed else None))
                continue
            first_with_data = False
            remaining -= slice_.length
            total += slice_.length
            aborted = None
            if read_committed:
                aborted = [
                    FetchResponse.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in partition.aborted_transactions(fp.fetch_offset, slice_.last_offset + 1)
                ]
            parts.append(_partition_data(fp.partition, ErrorCode.NONE, partition, DeferredRecords(slice_.length, slice_), aborted))
        out.append(FetchResponse.FetchableTopicResponse(topic=name or "", topic_id=ft.topic_id if version >= 13 else NULL_UUID, partitions=parts))
    return out, total, touched


def _requested_partitions(broker, body, version: int, denied: set[str]) -> list:
    found = []
    for ft in body.topics:
        topic = broker.metadata.by_id(ft.topic_id) if version >= 13 else broker.metadata.get(ft.topic)
        if topic is not None and topic.name not in denied:
            found.extend(p for fp in ft.partitions if (p := broker.partitions.get((topic.name, fp.partition))) is not None)
    return found


def handle_fetch(broker, request, connection):
    """The response at once when it has ``min_bytes`` (or must not wait); otherwise a
    coroutine that long-polls for appends until ``max_wait_ms``."""
    body = request.body
    version = request.api_version
    if version >= 7 and body.session_id != 0:
        return FetchResponse(error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), session_id=0, responses=[])
    deadline = time.monotonic() + max(0, body.max_wait_ms) / 1000
    denied = _denied_topics(broker, connection, body, version)
    # Events are taken before reading, so an append after the read still wakes the poll.
    events = [p.append_event() for p in _requested_partitions(broker, body, version, denied)]
    topics, total, _ = _read(broker, body, version, denied)
    if total >= body.min_bytes or body.max_wait_ms <= 0 or not events:
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
    return _long_poll(broker, body, version, deadline, events, denied)


def _denied_topics(broker, connection, body, version: int) -> set[str]:
    """The requested topics the connection may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    if broker.authorizer is None:
        return set()
    names = []
    for ft in body.topics:
        if version >= 13:
            topic = broker.metadata.by_id(ft.topic_id)
            if topic is not None:
                names.append(topic.name)
        else:
            names.append(ft.topic)
    return auth_helper.denied(broker, connection, AclOperation.READ, ResourceType.TOPIC, names)


async def _long_poll(broker, body, version: int, deadline: float, events: list, denied: set[str]) -> FetchResponse:
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            waiters = [asyncio.ensure_future(e.wait()) for e in events]
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
        events = [p.append_event() for p in _requested_partitions(broker, body, version, denied)]
        topics, total, _ = _read(broker, body, version, denied)
        if total >= body.min_bytes or deadline - time.monotonic() <= 0 or not events:
            return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)


HANDLERS = {ApiKey.FETCH: handle_fetch}
