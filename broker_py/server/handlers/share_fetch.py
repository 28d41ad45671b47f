"""ShareFetch (78) and ShareAcknowledge (79): a share group's members reading and
acknowledging records (KIP-932), as Kafka 4.1's ``KafkaApis`` answers them.

Both answer UNSUPPORTED_VERSION while share groups are off (group.share.enable), as
ShareGroupHeartbeat does. Then, for the whole request: INVALID_REQUEST without a group id
or member id; GROUP_AUTHORIZATION_FAILED without READ on the group; the share session's
errors (:mod:`broker_py.server.share.share_session_cache`: SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST). Per partition:
UNKNOWN_TOPIC_ID for a topic id the metadata does not know, TOPIC_AUTHORIZATION_FAILED
without READ on the topic, NOT_LEADER_OR_FOLLOWER (with the current leader and its
endpoint) where this broker does not lead the partition.

A ShareFetch first applies its acknowledgements (``acknowledge_error_code`` per
partition: INVALID_REQUEST, INVALID_RECORD_STATE, or the state write's error), then
acquires records from every partition of the session
(:class:`~broker_py.server.share.share_partition_manager.SharePartitionManager`), waiting
up to ``max_wait_ms`` while none can be acquired or the log holds fewer than ``min_bytes``
from where the partitions would be read. An initial request (epoch 0) answers
each of its partitions; a later one those with records, an error or acknowledgements.
Epoch -1 closes the session after the acknowledgements: the member's acquired records in
its partitions are released, as when the connection that opened the session closes.
``batch_size`` cuts the acquired ranges at log batch boundaries (Kafka's in-flight
batches). ``acquisition_lock_timeout_ms`` is the group's ``share.record.lock.duration.ms``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from broker_py.config.group_config import SHARE_RECORD_LOCK_DURATION_MS
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import _group_allowed
from broker_py.server.leader_hints import LeaderHints
from broker_py.server.share.share_partition import AcknowledgementBatch
from broker_py.server.share.share_partition_manager import PartitionFetch
from broker_py.server.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.share_fetch import (
    ShareAcknowledgeResponse,
    ShareFetchResponse,
)

# (topic id, partition index)
TopicIdPartition = tuple[uuid.UUID, int]
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def _enabled(apis) -> bool:
    coordinator = apis.group_coordinator
    return (
        coordinator is not None
        and coordinator.share_groups.enabled
        and apis.share_partition_manager is not None
    )


def _refused(apis, connection, body):
    """The whole request's error, or None."""
    if not _enabled(apis):
        return ErrorCode.UNSUPPORTED_VERSION
    if not body.group_id or not body.member_id:
        return ErrorCode.INVALID_REQUEST
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


def _topic_errors(apis, connection, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, ErrorCode]:
    """UNKNOWN_TOPIC_ID or TOPIC_AUTHORIZATION_FAILED per topic id that has one."""
    out = {}
    for topic_id in set(topic_ids):
        topic = apis.metadata_cache.by_id(topic_id)
        if topic is None:
            out[topic_id] = ErrorCode.UNKNOWN_TOPIC_ID
        elif not auth_helper.authorize(
            apis, connection, AclOperation.READ, ResourceType.TOPIC, topic.name
        ):
            out[topic_id] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return out


def _ack_batches(partition) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]


def _leader(apis, hints: LeaderHints, topic_id: uuid.UUID, index: int, error: ErrorCode):
    default = (-1, -1)
    if error != NOT_LEADER:
        return default
    topic = apis.metadata_cache.by_id(topic_id)
    found = hints.current_leader(topic.name, index) if topic is not None else None
    return found or default


async def _acknowledge_all(apis, body, topic_errors, acks) -> dict[TopicIdPartition, ErrorCode]:
    out = {}
    manager = apis.share_partition_manager
    for tp, batches in acks.items():
        error = topic_errors.get(tp[0])
        if error is None:
            error = await manager.acknowledge(body.group_id, body.member_id, tp, batches)
        out[tp] = error
    return out


def _acks_of(topics) -> dict[TopicIdPartition, list[AcknowledgementBatch]]:
    return {
        (t.topic_id, p.partition_index): _ack_batches(p)
        for t in topics
        for p in t.partitions
        if p.acknowledgement_batches
    }


# ---- ShareFetch ----


def handle_share_fetch(apis, request, connection):
    body = request.body
    R = ShareFetchResponse
    error = _refused(apis, connection, body)
    if error is not None:
        return R(error_code=int(error), error_message=error.description)
    return _share_fetch(apis, body, connection)


async def _share_fetch(apis, body, connection):
    R = ShareFetchResponse
    manager = apis.share_partition_manager
    key = (body.group_id, body.member_id)
    wanted = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
    acks = _acks_of(body.topics)
    epoch = body.share_session_epoch
    update = manager.sessions.fetch(
        key, epoch, wanted, forgotten, bool(acks), apis.time.milliseconds()
    )
    for released_key, released in update.released:
        manager.session_ended(released_key)
        await manager.release(released_key[0], released_key[1], released)
    if update.error != ErrorCode.NONE:
        return R(error_code=int(update.error), error_message=update.error.description)
    if epoch == INITIAL_EPOCH:
        manager.session_opened(key, connection)
    session_partitions = list(update.partitions)
    topic_errors = _topic_errors(
        apis, connection, [tp[0] for tp in session_partitions] + [tp[0] for tp in acks]
    )
    ack_errors = await _acknowledge_all(apis, body, topic_errors, acks)
    fetched: dict[TopicIdPartition, PartitionFetch] = {}
    if epoch == FINAL_EPOCH:
        manager.session_ended(key)
        await manager.release(body.group_id, body.member_id, manager.sessions.close(key))
    else:
        to_fetch = [tp for tp in session_partitions if tp[0] not in topic_errors]
        for tp in session_partitions:
            if tp[0] in topic_errors:
                fetched[tp] = PartitionFetch(topic_errors[tp[0]])
        if to_fetch:
            max_records = body.max_records if body.max_records > 0 else 0x7FFFFFFF
            fetched.update(
                await manager.fetch(
                    body.group_id,
                    body.member_id,
                    to_fetch,
                    body.max_wait_ms,
                    body.max_bytes,
                    max_records,
                    body.min_bytes,
                    body.batch_size,
                )
            )
    hints = LeaderHints(apis, connection)
    by_topic: dict[uuid.UUID, list] = {}
    order = list(dict.fromkeys([*session_partitions, *ack_errors]))
    for tp in order:
        result = fetched.get(tp)
        ack_error = ack_errors.get(tp)
        if (
            epoch != INITIAL_EPOCH
            and ack_error is None
            and (result is None or (result.error == ErrorCode.NONE and not result.acquired))
        ):
            continue
        result = result or PartitionFetch()
        error = result.error
        leader_error = error if error == NOT_LEADER else (ack_error or ErrorCode.NONE)
        leader_id, leader_epoch = _leader(apis, hints, tp[0], tp[1], leader_error)
        by_topic.setdefault(tp[0], []).append(
            R.PartitionData(
                partition_index=tp[1],
                error_code=int(error),
                error_message=result.error_message,
                acknowledge_error_code=int(ack_error or ErrorCode.NONE),
                current_leader=R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
                # never null: librdkafka's ShareFetch parser rejects null records
                records=result.records if result.records is not None else b"",
                acquired_records=[
                    R.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in result.acquired
                ],
            )
        )
    lock_ms = apis.group_configs.values(body.group_id)[SHARE_RECORD_LOCK_DURATION_MS]
    return R(
        error_code=0,
        acquisition_lock_timeout_ms=lock_ms,
        responses=[
            R.ShareFetchableTopicResponse(topic_id=topic_id, partitions=parts)
            for topic_id, parts in by_topic.items()
        ],
        node_endpoints=_endpoints(R, hints),
    )


def _endpoints(R, hints: LeaderHints) -> list:
    return [
        R.NodeEndpoint(node_id=n, host=h, port=p, rack=r)
        for n, h, p, r in hints.node_endpoints() or []
    ]


# ---- ShareAcknowledge ----


def handle_share_acknowledge(apis, request, connection):
    body = request.body
    R = ShareAcknowledgeResponse
    error = _refused(apis, connection, body)
    if error is not None:
        return R(error_code=int(error), error_message=error.description)
    return _share_acknowledge(apis, body, connection)


async def _share_acknowledge(apis, body, connection):
    R = ShareAcknowledgeResponse
    manager = apis.share_partition_manager
    key = (body.group_id, body.member_id)
    update = manager.sessions.acknowledge(key, body.share_session_epoch, apis.time.milliseconds())
    if update.error != ErrorCode.NONE:
        return R(error_code=int(update.error), error_message=update.error.description)
    acks = _acks_of(body.topics)
    topic_errors = _topic_errors(apis, connection, [tp[0] for tp in acks])
    ack_errors = await _acknowledge_all(apis, body, topic_errors, acks)
    if update.closing:
        manager.session_ended(key)
        await manager.release(body.group_id, body.member_id, manager.sessions.close(key))
    hints = LeaderHints(apis, connection)
    by_topic: dict[uuid.UUID, list] = {}
    for tp, error in ack_errors.items():
        leader_id, leader_epoch = _leader(apis, hints, tp[0], tp[1], error)
        by_topic.setdefault(tp[0], []).append(
            R.PartitionData(
                partition_index=tp[1],
                error_code=int(error),
                current_leader=R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
            )
        )
    return R(
        error_code=0,
        responses=[
            R.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=parts)
            for topic_id, parts in by_topic.items()
        ],
        node_endpoints=_endpoints(R, hints),
    )


HANDLERS = {
    ApiKey.SHARE_FETCH: handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
}
