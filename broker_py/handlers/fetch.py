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

Fetch sessions (v7+, KIP-227) are kept in ``broker.fetch_sessions``: an incremental
request reads every partition of its session and its response carries only the
partitions with news (:mod:`broker_py.fetch_context`).
"""

from __future__ import annotations

import asyncio
import time

import logstore

from broker_py import auth_helper
from broker_py.acl_binding import AclOperation, ResourceType
from broker_py.error_codes import ErrorCode
from broker_py.fetch_context import FetchContext, new_context
from broker_py.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, NULL_UUID, CachedPartition
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.fetch import FetchResponse
from broker_py.protocol.types import DeferredRecords

READ_COMMITTED = 1


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


def _fetch_data(broker, body, version: int) -> list[CachedPartition]:
    """The request's partitions with their parameters, in request order."""
    out = []
    for ft in body.topics:
        if version >= 13:
            topic = broker.metadata.by_id(ft.topic_id)
            name, topic_id = (topic.name if topic else None), ft.topic_id
        else:
            name, topic_id = ft.topic, NULL_UUID
        for fp in ft.partitions:
            out.append(CachedPartition(
                name, topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                fp.current_leader_epoch if version >= 9 else -1,
                fp.log_start_offset if version >= 5 else -1,
            ))
    return out


def _forgotten(body, version: int) -> list[tuple]:
    if version < 7:
        return []
    if version >= 13:
        return [(ft.topic_id, p) for ft in body.forgotten_topics_data for p in ft.partitions]
    return [(ft.topic, p) for ft in body.forgotten_topics_data for p in ft.partitions]


def _topic_name(broker, fp: CachedPartition, version: int) -> str | None:
    """The partition's topic name: for v13+ looked up by id on every read (None when no
    topic has it, e.g. deleted since the session took it), else as the request named it."""
    if version >= 13:
        topic = broker.metadata.by_id(fp.topic_id)
        return topic.name if topic else None
    return fp.topic


def _read(broker, body, version: int, partitions: list[CachedPartition], denied: set[str]):
    """One pass over ``partitions``: ((partition, PartitionData) pairs, bytes found, partitions read)."""
    remaining = body.max_bytes if version >= 3 else 2**31 - 1
    read_committed = body.isolation_level == READ_COMMITTED
    first_with_data = True
    total = 0
    touched = []
    out = []
    for fp in partitions:
        name = _topic_name(broker, fp, version)
        if name is not None and name in denied:
            out.append((fp, _partition_data(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            continue
        if name is None:
            out.append((fp, _partition_data(fp.partition, ErrorCode.UNKNOWN_TOPIC_ID)))
            continue
        fp.topic = name
        partition = broker.partitions.get((name, fp.partition))
        if partition is None:
            out.append((fp, _partition_data(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            continue
        touched.append(partition)
        error = partition.leader_epoch_error(fp.current_leader_epoch)
        if error != ErrorCode.NONE:
            out.append((fp, _partition_data(fp.partition, error, partition)))
            continue
        bound = partition.last_stable_offset if read_committed else partition.high_watermark
        try:
            slice_ = partition.log.read_slice(
                fp.fetch_offset,
                max(0, min(fp.max_bytes, remaining)),
                max_offset=bound,
                min_one_batch=first_with_data,
            )
        except logstore.OffsetOutOfRangeError:
            out.append((fp, _partition_data(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, partition)))
            continue
        except logstore.LogStoreError:
            out.append((fp, _partition_data(fp.partition, ErrorCode.KAFKA_STORAGE_ERROR, partition)))
            continue
        if slice_ is None:
            out.append((fp, _partition_data(fp.partition, ErrorCode.NONE, partition, aborted=[] if read_committed else None)))
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
        out.append((fp, _partition_data(fp.partition, ErrorCode.NONE, partition, DeferredRecords(slice_.length, slice_), aborted)))
    return out, total, touched


def _response(context: FetchContext, updates: list, version: int) -> FetchResponse:
    """The response for ``updates``, filtered by the context; consecutive partitions of
    one topic share a topic entry."""
    error_code, session_id, selected = context.respond(updates)
    topics: list[FetchResponse.FetchableTopicResponse] = []
    last_key = None
    for fp, data in selected:
        key = fp.topic_id if version >= 13 else fp.topic
        if not topics or key != last_key:
            topics.append(FetchResponse.FetchableTopicResponse(
                topic=fp.topic or "", topic_id=fp.topic_id if version >= 13 else NULL_UUID, partitions=[]))
            last_key = key
        topics[-1].partitions.append(data)
    return FetchResponse(throttle_time_ms=0, error_code=error_code, session_id=session_id, responses=topics)


def _requested_partitions(broker, partitions: list[CachedPartition], version: int, denied: set[str]) -> list:
    found = []
    for fp in partitions:
        name = _topic_name(broker, fp, version)
        if name is not None and name not in denied and (p := broker.partitions.get((name, fp.partition))) is not None:
            found.append(p)
    return found


def handle_fetch(broker, request, connection):
    """The response at once when it has ``min_bytes`` (or must not wait); otherwise a
    coroutine that long-polls for appends until ``max_wait_ms``."""
    body = request.body
    version = request.api_version
    context = new_context(
        broker.fetch_sessions, version,
        body.session_id if version >= 7 else INVALID_SESSION_ID,
        body.session_epoch if version >= 7 else FINAL_EPOCH,
        _fetch_data(broker, body, version), _forgotten(body, version),
    )
    partitions = context.partitions
    deadline = time.monotonic() + max(0, body.max_wait_ms) / 1000
    denied = _denied_topics(broker, connection, partitions, version)
    # Events are taken before reading, so an append after the read still wakes the poll.
    events = [p.append_event() for p in _requested_partitions(broker, partitions, version, denied)]
    updates, total, _ = _read(broker, body, version, partitions, denied)
    if total >= body.min_bytes or body.max_wait_ms <= 0 or not events:
        return _response(context, updates, version)
    return _long_poll(broker, body, version, context, deadline, events, denied)


def _denied_topics(broker, connection, partitions: list[CachedPartition], version: int) -> set[str]:
    """The requested topics the connection may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    if broker.authorizer is None:
        return set()
    names = {name for fp in partitions if (name := _topic_name(broker, fp, version)) is not None}
    return auth_helper.denied(broker, connection, AclOperation.READ, ResourceType.TOPIC, sorted(names))


async def _long_poll(broker, body, version: int, context: FetchContext, deadline: float, events: list,
                     denied: set[str]) -> FetchResponse:
    partitions = context.partitions
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            waiters = [asyncio.ensure_future(e.wait()) for e in events]
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
        events = [p.append_event() for p in _requested_partitions(broker, partitions, version, denied)]
        updates, total, _ = _read(broker, body, version, partitions, denied)
        if total >= body.min_bytes or deadline - time.monotonic() <= 0 or not events:
            return _response(context, updates, version)


HANDLERS = {ApiKey.FETCH: handle_fetch}
