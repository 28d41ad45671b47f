"""A follower's sessionless Fetch (v12+), answered without the generic codec.

The request arrives as a :class:`~logstore.protocol.follower_fetch_frame.FollowerFetchFrame`
(read by the storage engine in one call); its partitions go to the replica manager as
small :class:`FollowerPartition` records, and the response is written by
``logstore.encode_fetch_response`` with the records spliced in
(``protocol.frame.splice_records``), sent by ``sendfile`` or joined to the frame as the
network layer decides. What it answers is what :mod:`.fetch` answers the same request:

- no fetch session: the response's error 0 and session id 0, every partition in
  request order, consecutive partitions of one topic under one topic entry;
- a topic id (v13+) unknown here: UNKNOWN_TOPIC_ID; with an authorizer, every topic
  TOPIC_AUTHORIZATION_FAILED unless the connection may CLUSTER_ACTION the cluster;
- per partition, the replica manager's read (:mod:`broker_py.replication.local_log_read`):
  NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, OFFSET_OUT_OF_RANGE..., the diverging
  epoch, the follower's fetch state recorded (high watermark, ISR), the leader's
  replication throttle; a partition answering NOT_LEADER_OR_FOLLOWER or
  FENCED_LEADER_EPOCH names its current leader, and from v16 the response carries
  those leaders' endpoints;
- the follower's fetch parks until ``min_bytes`` or ``max_wait_ms``, as any fetch, and
  is answered by a :class:`~broker_py.network.pending_response.PendingResponse`: sent
  from the purgatory's check that completes it, not by a task woken a turn later;
- no client quota (a follower is never throttled by one).
"""

from __future__ import annotations

import asyncio
import functools
import uuid

import logstore
from broker_py.network.pending_response import PendingResponse
from broker_py.replication.fetch_data import FetchParams, FetchPartitionData
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.leader_hints import (
    FETCH_ENDPOINTS_MIN_VERSION,
    FETCH_HINT_ERRORS,
    LeaderHints,
)
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame
from logstore.protocol.frame import splice_records

TOPIC_ID_MIN_VERSION = 13


class FollowerPartition:
    """One partition of a follower's fetch, as the replica manager reads it
    (:class:`~broker_py.replication.fetch_data.FetchInfo`). ``topic`` is None for a
    topic id unknown here; ``topic_id`` is the id as an int (0 below v13)."""

    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "fetcher_log_start_offset",
        "last_fetched_epoch",
        "max_bytes",
        "partition",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str | None,
        topic_id: int,
        partition: int,
        current_leader_epoch: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        log_start_offset: int,
        max_bytes: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.current_leader_epoch = current_leader_epoch
        self.fetch_offset = fetch_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.fetcher_log_start_offset = log_start_offset
        self.max_bytes = max_bytes


def partitions(apis, request: FollowerFetchFrame) -> list[FollowerPartition]:
    """The request's partitions in request order, topic ids (v13+) resolved to names."""
    out = []
    by_id = request.api_version >= TOPIC_ID_MIN_VERSION
    for topic, parts in request.topics:
        if by_id:
            assert isinstance(topic, int)
            info = apis.metadata_cache.by_id(uuid.UUID(int=topic))
            name, topic_id = (info.name if info is not None else None), topic
        else:
            assert isinstance(topic, str)
            name, topic_id = topic, 0
        for p in parts:
            out.append(FollowerPartition(name, topic_id, *p))
    return out


def _denied(apis, connection, infos: list[FollowerPartition]) -> set[str]:
    """Every topic named, unless the connection may CLUSTER_ACTION the cluster."""
    if apis.authorizer is None or auth_helper.authorize_cluster(
        apis, connection, AclOperation.CLUSTER_ACTION
    ):
        return set()
    return {fp.topic for fp in infos if fp.topic is not None}


def response(apis, request: FollowerFetchFrame, reads: list[FetchPartitionData], connection):
    """The response frame as chunks, the records in place."""
    version = request.api_version
    if apis.metrics is not None:
        apis.metrics.on_fetch_response(0, reads, reads)
    by_id = version >= TOPIC_ID_MIN_VERSION
    topics: list[tuple] = []
    records = []
    parts: list[tuple] = []
    last_key = None
    hints = None
    for read in reads:
        fp = read.fetch
        assert isinstance(fp, FollowerPartition)
        key = fp.topic_id if by_id else fp.topic
        if not topics or key != last_key:
            parts = []
            topics.append((fp.topic or "", fp.topic_id, parts))
            last_key = key
        error = read.error_code
        leader = None
        if error in FETCH_HINT_ERRORS and fp.topic:
            if hints is None:
                hints = LeaderHints(apis, connection)
            leader = hints.current_leader(fp.topic, fp.partition)
        partition = read.partition
        parts.append(
            (
                fp.partition,
                error,
                read.high_watermark,
                partition.last_stable_offset if partition is not None else -1,
                read.log_start_offset,
                None,
                len(read.records),
                -1,
                read.diverging,
                leader,
            )
        )
        if read.records:
            records.append(read.records)
    endpoints = (
        hints.node_endpoints()
        if hints is not None and version >= FETCH_ENDPOINTS_MIN_VERSION
        else None
    )
    head, records_at = logstore.encode_fetch_response(
        request.correlation_id, version, 0, 0, topics, 0, node_endpoints=endpoints
    )
    return splice_records(head, records_at, records)


def handle_follower_fetch(apis, request: FollowerFetchFrame, connection):
    """The response at once when the read has ``min_bytes`` (or must not wait);
    otherwise a :class:`PendingResponse` completed, in the event-loop turn whose
    appends gave the fetch its bytes, or at ``max_wait_ms``, with the last read."""
    infos = partitions(apis, request)
    params = FetchParams(
        request.replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        denied=_denied(apis, connection, infos),
    )
    pending = PendingResponse()

    def done(reads: list[FetchPartitionData]) -> None:
        pending.complete(functools.partial(response, apis, request, reads, connection))

    result = apis.replica_manager.fetch_messages(params, infos, on_done=done)
    if result is None:
        return pending
    if isinstance(result, asyncio.Future):  # a caller that wrapped fetch_messages
        return _when_done(apis, request, result, connection)
    return response(apis, request, result, connection)


async def _when_done(apis, request: FollowerFetchFrame, pending, connection):
    return response(apis, request, await pending, connection)
