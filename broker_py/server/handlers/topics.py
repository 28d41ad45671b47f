"""CreateTopics, DeleteTopics and CreatePartitions.

With an authorizer, creating a topic needs CREATE on the cluster or on the topic (and
the configs come back only with DESCRIBE_CONFIGS on it), deleting DELETE and adding
partitions ALTER on the topic; TOPIC_AUTHORIZATION_FAILED otherwise. In a cluster the
three act through the controller (:mod:`broker_py.server.zk_admin_manager`).
"""

from __future__ import annotations

import uuid

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import InvalidReplicaAssignmentError, InvalidRequestError, KafkaError
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.topic_admin import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)

NULL_UUID = uuid.UUID(int=0)
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DEFAULT = 5


def handle_create_topics(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.create_topics(apis, request, connection)
    body = request.body
    results = []
    seen: dict[str, int] = {}
    for t in body.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in body.topics:
        result = CreateTopicsResponse.CreatableTopicResult(name=t.name, topic_id=NULL_UUID, error_code=0, error_message=None)
        try:
            if seen[t.name] > 1:
                raise InvalidRequestError(f"topic {t.name} appears more than once in the request")
            if not auth_helper.authorize_cluster(apis, connection, AclOperation.CREATE):
                auth_helper.ensure(apis, connection, AclOperation.CREATE, ResourceType.TOPIC, t.name)
            num_partitions, replication_factor = t.num_partitions, t.replication_factor
            if t.assignments:
                if num_partitions != -1 or replication_factor != -1:
                    raise InvalidRequestError("assignments are given together with a partition count or replication factor")
                if sorted(a.partition_index for a in t.assignments) != list(range(len(t.assignments))):
                    raise InvalidReplicaAssignmentError("assigned partitions must be 0..N-1")
                if any(a.broker_ids != [apis.broker_id] for a in t.assignments):
                    raise InvalidReplicaAssignmentError(f"only broker {apis.broker_id} exists")
                num_partitions, replication_factor = len(t.assignments), 1
            configs = {c.name: c.value for c in t.configs}
            topic = apis.admin_manager.create_topic(t.name, num_partitions, replication_factor, configs, validate_only=body.validate_only)
            result.topic_id = topic.topic_id
            result.num_partitions = topic.partitions
            result.replication_factor = 1
            if not auth_helper.authorize(apis, connection, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name):
                result.topic_config_error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                results.append(result)
                continue
            effective = apis.admin_manager.effective_config(topic)
            result.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=k,
                    value=v,
                    read_only=False,
                    config_source=CONFIG_SOURCE_TOPIC if k in topic.configs else CONFIG_SOURCE_DEFAULT,
                    is_sensitive=False,
                )
                for k, v in sorted(effective.items())
            ]
        except KafkaError as e:
            result.error_code, result.error_message = int(e.errno), str(e)
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def handle_delete_topics(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.delete_topics(apis, request, connection)
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    results = []
    for name, topic_id in wanted:
        result = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id or NULL_UUID, error_code=0, error_message=None)
        try:
            if name is None:
                topic = apis.metadata_cache.by_id(topic_id)
                if topic is None:
                    result.error_code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                    results.append(result)
                    continue
                name = result.name = topic.name
            auth_helper.ensure(apis, connection, AclOperation.DELETE, ResourceType.TOPIC, name)
            if name.startswith("__"):
                raise InvalidRequestError(f"internal topic {name} cannot be deleted")
            topic = apis.admin_manager.delete_topic(name)
            result.topic_id = topic.topic_id
        except KafkaError as e:
            result.error_code, result.error_message = int(e.errno), str(e)
        results.append(result)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def handle_create_partitions(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.create_partitions(apis, request, connection)
    body = request.body
    results = []
    for t in body.topics:
        result = CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        try:
            auth_helper.ensure(apis, connection, AclOperation.ALTER, ResourceType.TOPIC, t.name)
            if t.assignments and any(a.broker_ids != [apis.broker_id] for a in t.assignments):
                raise InvalidReplicaAssignmentError(f"only broker {apis.broker_id} exists")
            apis.admin_manager.create_partitions(t.name, t.count, validate_only=body.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = int(e.errno), str(e)
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


HANDLERS = {
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
}
