"""Fetch: whole batches from each partition, long-polling for ``min_bytes``.

Record bytes never pass through Python: each partition's records are a
:class:`DeferredRecords` placeholder holding a ``logstore.FileSlice``, which the
network layer sends with ``sendfile(2)``. The rest of the frame is written by
``logstore.encode_fetch_response``, and the handler answers with the frame's chunks,
the placeholders in place (``protocol.frame.splice_records``).

Limits follow Kafka: a partition returns at most ``partition_max_bytes`` and the
response at most ``max_bytes`` (v3+), except that the first partition with data
returns at least one whole batch so a consumer can always make progress. Reads stop
at the high watermark (read_uncommitted) or the last stable offset (read_committed).
A read_committed response lists the aborted transactions that overlap the records it
returns, from the partition's transaction index; the consumer drops their batches.

With an authorizer, a topic the connection may not READ gets TOPIC_AUTHORIZATION_FAILED.

Fetch sessions (v7+, KIP-227) are kept in ``broker.fetch_sessions``: an incremental
request reads every partition of its session and its response carries only the
partitions with news (:mod:`broker_py.server.fetch_context`).
"""

from __future__ import annotations

import asyncio
import time

import logstore

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.error_codes import ErrorCode
from broker_py.server.fetch_context import FetchContext, PartitionRead, new_context
from broker_py.server.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, NULL_UUID, CachedPartition
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import splice_records
from logstore.protocol.types import DeferredRecords

READ_COMMITTED = 1
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
OFFSET_OUT_OF_RANGE = int(ErrorCode.OFFSET_OUT_OF_RANGE)
KAFKA_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


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
    """One pass over ``partitions``: (a PartitionRead each, bytes found, partitions read)."""
    remaining = body.max_bytes if version >= 3 else 2**31 - 1
    read_committed = body.isolation_level == READ_COMMITTED
    no_data = [] if read_committed else None
    first_with_data = True
    total = 0
    touched = []
    out = []
    for fp in partitions:
        name = _topic_name(broker, fp, version) if version >= 13 else fp.topic
        if name is not None and name in denied:
            out.append(PartitionRead(fp, TOPIC_AUTHORIZATION_FAILED, -1, -1))
            continue
        if name is None:
            out.append(PartitionRead(fp, UNKNOWN_TOPIC_ID, -1, -1))
            continue
        fp.topic = name
        partition = broker.partitions.get((name, fp.partition))
        if partition is None:
            out.append(PartitionRead(fp, UNKNOWN_TOPIC_OR_PARTITION, -1, -1))
            continue
        touched.append(partition)
        log = partition.log
        high_watermark = log.log_end_offset
        error = partition.leader_epoch_error(fp.current_leader_epoch)
        if error != ErrorCode.NONE:
            out.append(PartitionRead(fp, int(error), high_watermark, log.log_start_offset, partition=partition))
            continue
        if fp.fetch_offset == high_watermark:  # caught up: nothing to read
            out.append(PartitionRead(fp, 0, high_watermark, log.log_start_offset, b"", no_data, partition))
            continue
        try:
            slice_ = log.read_slice(
                fp.fetch_offset,
                max(0, min(fp.max_bytes, remaining)),
                max_offset=partition.last_stable_offset if read_committed else high_watermark,
                min_one_batch=first_with_data,
            )
        except logstore.OffsetOutOfRangeError:
            out.append(PartitionRead(fp, OFFSET_OUT_OF_RANGE, high_watermark, log.log_start_offset, partition=partition))
            continue
        except logstore.LogStoreError:
            out.append(PartitionRead(fp, KAFKA_STORAGE_ERROR, high_watermark, log.log_start_offset, partition=partition))
            continue
        if slice_ is None:
            out.append(PartitionRead(fp, 0, high_watermark, log.log_start_offset, b"", no_data, partition))
            continue
        first_with_data = False
        remaining -= slice_.length
        total += slice_.length
        aborted = None
        if read_committed:
            aborted = [
                (t.producer_id, t.first_offset) for t in partition.aborted_transactions(fp.fetch_offset, slice_.last_offset + 1)
            ]
        records = DeferredRecords(slice_.length, slice_)
        out.append(PartitionRead(fp, 0, high_watermark, log.log_start_offset, records, aborted, partition))
    return out, total, touched


def _response(context: FetchContext, reads: list[PartitionRead], request) -> list:
    """The response frame for ``reads``, filtered by the context, as chunks with the
    records in place (encoded by ``logstore.encode_fetch_response``); consecutive
    partitions of one topic share a topic entry."""
    version = request.api_version
    error_code, session_id, selected = context.respond(reads)
    topics: list[tuple] = []
    records: list[DeferredRecords] = []
    parts: list[tuple] = []
    last_key = None
    for read in selected:
        fp = read.fetch
        key = fp.topic_id if version >= 13 else fp.topic
        if not topics or key != last_key:
            parts = []
            topics.append((fp.topic or "", fp.topic_id.int, parts))
            last_key = key
        partition = read.partition
        parts.append((
            fp.partition, read.error_code, read.high_watermark,
            partition.last_stable_offset if partition is not None else -1,
            read.log_start_offset, read.aborted, len(read.records),
        ))
        if read.records:
            records.append(read.records)
    head, records_at = logstore.encode_fetch_response(request.correlation_id, version, error_code, session_id, topics)
    return splice_records(head, records_at, records)


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
    reads, total, touched = _read(broker, body, version, partitions, denied)
    if total >= body.min_bytes or body.max_wait_ms <= 0 or not touched:
        return _response(context, reads, request)
    # Appends happen on this thread, and nothing yields between the read and here, so
    # the events taken now are set by any append the read did not see.
    events = [p.append_event() for p in touched]
    return _long_poll(broker, request, context, deadline, events, denied)


def _denied_topics(broker, connection, partitions: list[CachedPartition], version: int) -> set[str]:
    """The requested topics the connection may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    if broker.authorizer is None:
        return set()
    names = {name for fp in partitions if (name := _topic_name(broker, fp, version)) is not None}
    return auth_helper.denied(broker, connection, AclOperation.READ, ResourceType.TOPIC, sorted(names))


async def _long_poll(broker, request, context: FetchContext, deadline: float, events: list, denied: set[str]) -> list:
    body, version = request.body, request.api_version
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            waiters = [asyncio.ensure_future(e.wait()) for e in events]
            try:
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
        reads, total, touched = _read(broker, body, version, context.partitions, denied)
        if total >= body.min_bytes or deadline - time.monotonic() <= 0 or not touched:
            return _response(context, reads, request)
        events = [p.append_event() for p in touched]


HANDLERS = {ApiKey.FETCH: handle_fetch}
