"""Metadata: brokers, the controller and topic/partition leadership.

Requested topics that do not exist are created when ``auto.create.topics.enable``
is on and the request allows it (v4+ ``allow_auto_topic_creation``; always before v4).
As in Kafka, the request that creates a topic answers it with LEADER_NOT_AVAILABLE
and no partitions, even on a broker alone where the logs exist at once: the client
asks again, and in a cluster the leader only exists once the controller has elected it.
``is_internal`` is set for the coordinators' topics only (``__consumer_offsets``,
``__transaction_state``), not for every name starting with ``__``.
A null topic list (v1+), or an empty one at v0, means every topic.

DescribeTopicPartitions (KIP-966) pages through the same view: topics in name order from
the request's cursor, at most ``min(response_partition_limit,
max.request.partition.size.limit)`` partitions, and ``next_cursor`` at the first partition
left out. An empty topic list means every topic the connection may DESCRIBE (topics
that fail are left out); named topics it may not DESCRIBE come last, with
TOPIC_AUTHORIZATION_FAILED and a zero topic id; a cursor naming a topic missing from a
non-empty list is INVALID_REQUEST. It creates no topic.

With an authorizer, the list of every topic holds those the connection may DESCRIBE; a
requested topic it may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED, and so does a
missing one it could have auto-created without CREATE on the cluster or the topic.
"""

from __future__ import annotations

import uuid

from broker_py.common.internal_topics import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    is_internal_topic,
)
from broker_py.common.topic import TopicInfo, validate_topic_name
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import CLUSTER_NAME, AclOperation, ResourceType
from broker_py.utils.in_steps import for_each
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import InvalidRequestError, InvalidTopicError, KafkaError
from logstore.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsResponse,
)
from logstore.protocol.messages.metadata import MetadataResponse

NULL_UUID = uuid.UUID(int=0)


def _partition_response(apis, topic: str, index: int) -> MetadataResponse.MetadataResponsePartition:
    state = apis.metadata_cache.partition_state(topic, index)
    if state is None:
        raw = getattr(apis.metadata_cache, "raw_partition_state", lambda t, i: None)(topic, index)
        return MetadataResponse.MetadataResponsePartition(
            error_code=int(ErrorCode.LEADER_NOT_AVAILABLE),
            partition_index=index,
            leader_id=-1,
            leader_epoch=-1 if raw is None else raw.leader_epoch,
            replica_nodes=[] if raw is None else list(raw.replicas),
            isr_nodes=[] if raw is None else list(raw.isr),
            offline_replicas=[] if raw is None else list(raw.offline_replicas),
        )
    return MetadataResponse.MetadataResponsePartition(
        error_code=0,
        partition_index=index,
        leader_id=state.leader,
        leader_epoch=state.leader_epoch,
        replica_nodes=state.replicas,
        isr_nodes=state.isr,
        offline_replicas=state.offline_replicas,
    )


def topic_response(
    apis, topic: TopicInfo, connection, with_operations: bool
) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        topic_authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.TOPIC, topic.name, with_operations
        ),
        partitions=[_partition_response(apis, topic.name, p) for p in range(topic.partitions)],
    )


def brokers(apis, connection=None) -> list[MetadataResponse.MetadataResponseBroker]:
    """Every live broker, at the listener the request came on."""
    return [
        MetadataResponse.MetadataResponseBroker(node_id=n.id, host=n.host, port=n.port, rack=n.rack)
        for n in apis.metadata_cache.alive_nodes(apis.advertised_listener(connection))
    ]


# Shared by every error entry (never changed once built): a request may name a million
# unknown topic ids, each answered with its own entry.
_NO_PARTITIONS: tuple = ()
_NO_TAGGED_FIELDS: dict = {}


def handle_metadata(apis, request, connection):
    body = request.body
    version = request.api_version
    allow_create = apis.config["auto.create.topics.enable"] and (
        version < 4 or body.allow_auto_topic_creation
    )
    with_operations = version >= 8 and body.include_topic_authorized_operations
    topics_out = []

    def describable(name: str) -> bool:
        return auth_helper.authorize(
            apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, name
        )

    def creatable(name: str) -> bool:
        return auth_helper.authorize_cluster(
            apis, connection, AclOperation.CREATE
        ) or auth_helper.authorize(apis, connection, AclOperation.CREATE, ResourceType.TOPIC, name)

    def refused(name: str | None, topic_id=NULL_UUID) -> MetadataResponse.MetadataResponseTopic:
        return MetadataResponse.MetadataResponseTopic(
            error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=topic_id
        )

    seen: set = set()

    def answer(req) -> None:
        # Each topic is answered once, however often it is named (Kafka takes the
        # request's names and ids as sets): the work follows the distinct topics.
        key = req.name if req.name is not None else req.topic_id
        if key in seen:
            return
        seen.add(key)
        topic = None
        if req.name is None and req.topic_id not in (None, NULL_UUID):
            topic = apis.metadata_cache.by_id(req.topic_id)
            if topic is None:
                topics_out.append(
                    MetadataResponse.MetadataResponseTopic(
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_ID),
                        name=None,
                        topic_id=req.topic_id,
                        partitions=_NO_PARTITIONS,
                        unknown_tagged_fields=_NO_TAGGED_FIELDS,
                    )
                )
                return
            if not describable(topic.name):
                topics_out.append(refused(None, req.topic_id))
                return
        else:
            name = req.name or ""
            if not describable(name):
                topics_out.append(refused(name))
                return
            topic = apis.metadata_cache.get(name)
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if allow_create and not creatable(name):
                    topics_out.append(refused(name))
                    return
                if allow_create:
                    try:
                        _auto_create(apis, name)
                        error = ErrorCode.LEADER_NOT_AVAILABLE
                    except KafkaError as e:
                        error = e.errno
                topics_out.append(
                    MetadataResponse.MetadataResponseTopic(
                        error_code=int(error),
                        name=name,
                        topic_id=NULL_UUID,
                        is_internal=is_internal_topic(name),
                    )
                )
                return
        topics_out.append(topic_response(apis, topic, connection, with_operations))

    def response() -> MetadataResponse:
        return MetadataResponse(
            brokers=brokers(apis, connection),
            cluster_id=apis.cluster_id,
            controller_id=apis.metadata_cache.controller_id,
            topics=topics_out,
            cluster_authorized_operations=auth_helper.authorized_operations(
                apis,
                connection,
                ResourceType.CLUSTER,
                CLUSTER_NAME,
                8 <= version <= 10 and body.include_cluster_authorized_operations,
            ),
        )

    if body.topics is None or (version == 0 and not body.topics):
        topics_out.extend(
            topic_response(apis, t, connection, with_operations)
            for t in apis.metadata_cache.select()
            if describable(t.name)
        )
        return response()
    return for_each(body.topics, answer, response)


_DtpTopic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_DtpPartition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition


def _missing_topic(name: str) -> _DtpTopic:
    try:
        validate_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except InvalidTopicError:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION
    return _DtpTopic(
        error_code=int(error), name=name, topic_id=NULL_UUID, is_internal=is_internal_topic(name)
    )


def _described_topic(apis, topic: TopicInfo, first: int, limit: int, connection):
    """The topic's partitions ``first`` .. at most ``limit`` of them, and the index of the
    next one left out (-1 when none was)."""
    end = min(topic.partitions, first + limit)
    partitions = []
    for index in range(first, end):
        p = _partition_response(apis, topic.name, index)
        partitions.append(
            _DtpPartition(
                error_code=p.error_code,
                partition_index=index,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                replica_nodes=p.replica_nodes,
                isr_nodes=p.isr_nodes,
                offline_replicas=p.offline_replicas,
            )
        )
    described = _DtpTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.TOPIC, topic.name, True
        ),
    )
    return described, (end if end < topic.partitions else -1)


def handle_describe_topic_partitions(apis, request, connection):
    body = request.body
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not body.topics
    if every_topic:
        names = {t.name for t in apis.metadata_cache.select()}
    else:
        names = {t.name for t in body.topics}
        if cursor is not None and cursor_topic not in names:
            raise InvalidRequestError(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
                f"{cursor_topic}"
            )
    refused = []
    authorized = []
    for name in sorted(n for n in names if n >= cursor_topic):
        if auth_helper.authorize(apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            authorized.append(name)
        elif not every_topic:
            refused.append(
                _DtpTopic(
                    error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    name=name,
                    topic_id=NULL_UUID,
                )
            )
    remaining = min(apis.config["max.request.partition.size.limit"], body.response_partition_limit)
    topics_out = []
    next_cursor = None
    for name in authorized:
        if remaining <= 0:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
            break
        first = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        topic = apis.metadata_cache.get(name)
        if topic is None:
            if not every_topic:
                topics_out.append(_missing_topic(name))
            continue
        described, next_index = _described_topic(apis, topic, max(first, 0), remaining, connection)
        topics_out.append(described)
        if next_index != -1:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(
                topic_name=name, partition_index=next_index
            )
            break
        remaining -= len(described.partitions)
    return DescribeTopicPartitionsResponse(topics=topics_out + refused, next_cursor=next_cursor)


def _auto_create(apis, name: str) -> None:
    """Metadata's auto-creation as Kafka's AutoTopicCreationManager: a coordinator's topic
    with that coordinator's partitions, replication factor and configs (compacted), any
    other topic with the broker's defaults."""
    if name == OFFSETS_TOPIC:
        apis.group_coordinator.ensure_offsets_topic()
    elif name == TRANSACTION_STATE_TOPIC:
        apis.transaction_coordinator.ensure_topic()
    elif name == SHARE_GROUP_STATE_TOPIC and apis.share_coordinator is not None:
        apis.share_coordinator.ensure_topic()
    else:
        apis.topic_admin_manager.auto_create_topic(name)


HANDLERS = {
    ApiKey.METADATA: handle_metadata,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
}
