"""Fetch: whole batches from each partition, long-polling for ``min_bytes``.

The handler decodes the request, authorizes its topics, and encodes the response; the
replica manager reads the partitions, records a follower's fetch state and parks the
fetch until it has ``min_bytes`` (:meth:`ReplicaManager.fetch_messages`,
:mod:`broker_py.replication.local_log_read`).

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
returns; the consumer drops their batches.

With an authorizer, a topic the connection may not READ gets TOPIC_AUTHORIZATION_FAILED.

Client quotas (consumers only, never a follower): a consumer under a
``consumer_byte_rate`` reads at most what the quota allows over its windows in one
response (Kafka's ``getMaxValueInQuotaWindow``); the bytes read count against it
(:func:`broker_py.server.quota.request_throttle.record_bytes`), and a consumer over it
(or over its request quota) is answered at once with no partitions and the throttle
time, the bytes taken back, its session left as it was, as Kafka answers it.

Fetch sessions (v7+, KIP-227) are kept in ``apis.fetch_sessions``: an incremental
request reads every partition of its session and its response carries only the
partitions with news (:mod:`broker_py.server.fetch_context`).

Fetch v0-v3 answer in message format v0 (v0-v1) or v1 (v2-v3), as Kafka's
down-conversion does (``logstore.down_convert_slice``): stored v2 batches are
converted when the response is built, so those responses cannot use ``sendfile``.
The conversion is bounded like any read: each partition's output by its share of the
limits (and at least one message), the response's by ``max_bytes`` (v3) and by
``DOWN_CONVERSION_MAX_BYTES``, so the memory a response holds is bounded too. Control
batches and headers are dropped; a zstd batch gets UNSUPPORTED_COMPRESSION_TYPE, and a
topic with ``message.downconversion.enable=false`` UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import asyncio
import dataclasses

import logstore
from broker_py.log.storage_errors import kafka_error
from broker_py.replication.fetch_data import FetchParams, FetchPartitionData, ToConvert
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.fetch_context import (
    FetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    new_context,
)
from broker_py.server.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    NULL_UUID,
    CachedPartition,
)
from broker_py.server.handlers.follower_fetch import handle_follower_fetch
from broker_py.server.leader_hints import (
    FETCH_ENDPOINTS_MIN_VERSION,
    FETCH_HINT_ERRORS,
    FETCH_MIN_VERSION,
    LeaderHints,
)
from broker_py.server.quota.request_throttle import client_of, record_bytes
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame
from logstore.protocol.frame import splice_records
from logstore.protocol.types import DeferredRecords

READ_COMMITTED = 1
# Fetch v0-v3 read message format v0/v1, converted down from the stored v2 batches.
LAST_MESSAGE_SET_VERSION = 3
# The most bytes a down-converted response holds (Kafka's fetch.max.bytes default):
# conversion builds the records in memory, and v0-v2 requests set no response limit.
DOWN_CONVERSION_MAX_BYTES = 55 * 1024 * 1024
# Reads past batches that convert to nothing (control batches) before answering empty.
_DOWN_CONVERSION_READS = 8
# Fetch below v3 sets no response limit.
NO_LIMIT = 2**31 - 1
UNSUPPORTED_COMPRESSION_TYPE = int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)


def _fetch_data(apis, body, version: int) -> list[CachedPartition]:
    """The request's partitions with their parameters, in request order."""
    out = []
    for ft in body.topics:
        if version >= 13:
            topic = apis.metadata_cache.by_id(ft.topic_id)
            name, topic_id = (topic.name if topic else None), ft.topic_id
        else:
            name, topic_id = ft.topic, NULL_UUID
        for fp in ft.partitions:
            out.append(
                CachedPartition(
                    name,
                    topic_id,
                    fp.partition,
                    fp.fetch_offset,
                    fp.partition_max_bytes,
                    fp.current_leader_epoch if version >= 9 else -1,
                    fp.log_start_offset if version >= 5 else -1,
                    fp.last_fetched_epoch if version >= 12 else -1,
                )
            )
    return out


def _forgotten(body, version: int) -> list[tuple]:
    if version < 7:
        return []
    if version >= 13:
        return [(ft.topic_id, p) for ft in body.forgotten_topics_data for p in ft.partitions]
    return [(ft.topic, p) for ft in body.forgotten_topics_data for p in ft.partitions]


def _topic_name(apis, fp: CachedPartition, version: int) -> str | None:
    """The partition's topic name: for v13+ looked up by id on every read (None when no
    topic has it, e.g. deleted since the session took it), else as the request named it."""
    if version >= 13:
        topic = apis.metadata_cache.by_id(fp.topic_id)
        return topic.name if topic else None
    return fp.topic


def replica_id(body, version: int) -> int:
    """The follower's broker id (v15+: in ``replica_state``); -1 for a consumer."""
    if version >= 15:
        state = body.replica_state
        return -1 if state is None else state.replica_id
    return body.replica_id


def _down_convert_all(
    reads: list[FetchPartitionData], version: int, max_bytes: int, allowed
) -> list[FetchPartitionData]:
    """``reads`` with their records converted down, the whole at most ``max_bytes``
    (and :data:`DOWN_CONVERSION_MAX_BYTES`) unless its first message alone is more.
    A partition held here whose topic does not allow it (``allowed(topic)`` false:
    ``message.downconversion.enable=false``) answers UNSUPPORTED_VERSION, as Kafka's."""
    budget = min(max_bytes, DOWN_CONVERSION_MAX_BYTES)
    first = True
    out = []
    for read in reads:
        if read.partition is not None and not allowed(read.fetch.topic):
            read = dataclasses.replace(
                read,
                error_code=UNSUPPORTED_VERSION,
                high_watermark=-1,
                log_start_offset=-1,
                records=b"",
                aborted=None,
                partition=None,
            )
        elif type(read.records) is ToConvert:
            if budget <= 0 and not first:
                read = dataclasses.replace(read, records=b"")  # the client fetches it next time
            else:
                read = _down_convert(read, version, max(0, min(read.records.limit, budget)))
                budget -= len(read.records)
                first = first and not read.records
        out.append(read)
    return out


def _down_convert(read: FetchPartitionData, version: int, limit: int) -> FetchPartitionData:
    """``read`` with its records as a message set of magic 0 (v0-v1) or 1 (v2-v3), at
    most ``limit`` bytes unless its first message alone is more."""
    todo = read.records
    magic = 0 if version <= 1 else 1
    try:
        data, next_offset, _ = logstore.down_convert_slice(
            todo.slice, magic, read.fetch.fetch_offset, limit
        )
        reads = 1
        while not data and next_offset < read.high_watermark and reads < _DOWN_CONVERSION_READS:
            more = read.partition.read_records(next_offset, todo.limit, False, True)
            if more is None:
                break
            data, next_offset, _ = logstore.down_convert_slice(more, magic, next_offset, limit)
            reads += 1
    except logstore.UnsupportedForMessageFormatError:
        return dataclasses.replace(read, error_code=UNSUPPORTED_COMPRESSION_TYPE, records=b"")
    except logstore.LogStoreError as e:
        error = kafka_error(e, f"{read.fetch.topic}-{read.fetch.partition}").errno
        # Fetch v0-v5 clients do not know KAFKA_STORAGE_ERROR: they refresh metadata on this one.
        if error == ErrorCode.KAFKA_STORAGE_ERROR:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return dataclasses.replace(read, error_code=int(error), records=b"")
    except KafkaError as e:
        return dataclasses.replace(read, error_code=int(e.errno), records=b"")
    return dataclasses.replace(read, records=data)


def _response(
    apis,
    context: FetchContext,
    reads: list[FetchPartitionData],
    request,
    hints: LeaderHints,
    connection=None,
) -> list:
    """The response frame for ``reads``, filtered by the context, as chunks with the
    records in place (encoded by ``logstore.encode_fetch_response``); consecutive
    partitions of one topic share a topic entry. v0-v3 records are converted down
    here, into bytes chunks."""
    version = request.api_version
    if version <= LAST_MESSAGE_SET_VERSION:
        reads = _down_convert_all(
            reads, version, request.body.max_bytes, apis.log_config_manager.down_conversion_enabled
        )
    throttle = 0
    quotas = getattr(apis, "client_quotas", None)
    if quotas is not None and connection is not None and replica_id(request.body, version) < 0:
        size = sum(len(read.records) for read in reads)
        throttle = record_bytes(apis, quotas.fetch, connection, request, size)
        if throttle > 0:
            user, client_id = client_of(connection, request)
            quotas.fetch.unrecord(user, client_id, size, apis.time.milliseconds())
            error_code, session_id = _throttled(context)
            head, _ = logstore.encode_fetch_response(
                request.correlation_id, version, error_code, session_id, [], throttle
            )
            return [head]
    error_code, session_id, selected = context.respond(reads)
    if apis.metrics is not None:
        apis.metrics.on_fetch_response(error_code, reads, selected)
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
        parts.append(
            (
                fp.partition,
                read.error_code,
                read.high_watermark,
                partition.last_stable_offset if partition is not None else -1,
                read.log_start_offset,
                read.aborted,
                len(read.records),
                read.preferred_read_replica,
                read.diverging,
                hints.current_leader(fp.topic, fp.partition)
                if version >= FETCH_MIN_VERSION
                and read.error_code in FETCH_HINT_ERRORS
                and fp.topic
                else None,
            )
        )
        if read.records:
            records.append(read.records)
    endpoints = hints.node_endpoints() if version >= FETCH_ENDPOINTS_MIN_VERSION else None
    head, records_at = logstore.encode_fetch_response(
        request.correlation_id,
        version,
        error_code,
        session_id,
        topics,
        throttle,
        node_endpoints=endpoints,
    )
    return splice_records(head, records_at, records)


def _throttled(context: FetchContext) -> tuple[int, int]:
    """(error code, session id) of a throttled response, which carries no partitions: an
    incremental session's id (the session left as it was), else no session."""
    if isinstance(context, SessionErrorContext):
        return int(context.error), INVALID_SESSION_ID
    if isinstance(context, IncrementalFetchContext):
        return 0, context.session.id
    return 0, INVALID_SESSION_ID


def handle_fetch(apis, request, connection):
    """The response at once when it has ``min_bytes`` (or must not wait); otherwise a
    coroutine that long-polls for appends until ``max_wait_ms``. A follower's
    sessionless fetch read by the engine is answered by :mod:`.follower_fetch`."""
    if type(request) is FollowerFetchFrame:
        return handle_follower_fetch(apis, request, connection)
    body = request.body
    version = request.api_version
    context = new_context(
        apis.fetch_sessions,
        version,
        body.session_id if version >= 7 else INVALID_SESSION_ID,
        body.session_epoch if version >= 7 else FINAL_EPOCH,
        _fetch_data(apis, body, version),
        _forgotten(body, version),
    )
    partitions = context.partitions
    follower = replica_id(body, version)
    params = _fetch_params(apis, body, version, follower)
    quotas = getattr(apis, "client_quotas", None)
    if follower < 0 and quotas is not None and connection is not None and quotas.fetch.enabled:
        most = quotas.fetch.max_value_in_window(*client_of(connection, request))
        if most is not None:
            params = dataclasses.replace(params, max_bytes=min(params.max_bytes, int(most)))
    params.denied = _denied_topics(apis, connection, partitions, version, follower >= 0)
    if follower >= 0:
        for fp in partitions:
            fp.topic = _topic_name(apis, fp, version)

    def respond(reads: list[FetchPartitionData]):
        return _response(apis, context, reads, request, LeaderHints(apis, connection), connection)

    result = apis.replica_manager.fetch_messages(params, partitions)
    if isinstance(result, asyncio.Future):
        return _when_done(result, respond)
    return respond(result)


def _fetch_params(apis, body, version: int, follower: int) -> FetchParams:
    """The request's parameters as the replica manager reads them."""
    if follower >= 0:
        return FetchParams(follower, body.max_wait_ms, body.min_bytes, body.max_bytes)
    legacy = version <= LAST_MESSAGE_SET_VERSION
    selector = apis.config["replica.selector.class"] if version >= 11 else None
    return FetchParams(
        -1,
        body.max_wait_ms,
        body.min_bytes,
        body.max_bytes if version >= 3 else NO_LIMIT,
        read_committed=body.isolation_level == READ_COMMITTED,
        leader_only=version < 11,
        down_convert=legacy,
        down_convert_max_bytes=DOWN_CONVERSION_MAX_BYTES if legacy else 0,
        topic_name=(lambda fp: _topic_name(apis, fp, version)) if version >= 13 else None,
        selector=selector,
        client_rack=(body.rack_id or "") if selector is not None else "",
        replica_racks=(lambda partition: _replica_racks(apis, partition))
        if selector is not None
        else None,
    )


def _replica_racks(apis, partition) -> dict[int, str | None]:
    """KIP-392: the rack of each replica of ``partition`` that may serve a consumer (the
    alive ones, and this broker)."""
    cache = apis.metadata_cache
    racks = {
        b: (r.info.rack if (r := cache.alive_broker(b)) is not None else None)
        for b in partition.assigned_replicas
    }
    racks = {
        b: rack
        for b, rack in racks.items()
        if cache.alive_broker(b) is not None or b == partition.local_broker_id
    }
    racks.setdefault(partition.local_broker_id, apis.config["broker.rack"])
    return racks


async def _when_done(pending, respond):
    return respond(await pending)


def _denied_topics(
    apis, connection, partitions: list[CachedPartition], version: int, from_follower: bool = False
) -> set[str]:
    """The requested topics the connection may not READ, or, for a follower's fetch,
    all of them unless it may CLUSTER_ACTION the cluster (TOPIC_AUTHORIZATION_FAILED)."""
    if apis.authorizer is None:
        return set()
    names = {name for fp in partitions if (name := _topic_name(apis, fp, version)) is not None}
    if from_follower:
        return (
            set()
            if auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION)
            else names
        )
    return auth_helper.denied(
        apis, connection, AclOperation.READ, ResourceType.TOPIC, sorted(names)
    )


HANDLERS = {ApiKey.FETCH: handle_fetch}
