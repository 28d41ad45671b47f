"""CreateTopics, DeleteTopics and CreatePartitions, through the controller
(:mod:`broker_py.server.admin_manager`).

With an authorizer, creating a topic needs CREATE on the cluster or on the topic (and
the configs come back only with DESCRIBE_CONFIGS on it), deleting DELETE and adding
partitions ALTER on the topic; TOPIC_AUTHORIZATION_FAILED otherwise.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey


def handle_create_topics(apis, request, connection):
    return apis.admin_manager.create_topics(apis, request, connection)


def handle_delete_topics(apis, request, connection):
    return apis.admin_manager.delete_topics(apis, request, connection)


def handle_create_partitions(apis, request, connection):
    return apis.admin_manager.create_partitions(apis, request, connection)


HANDLERS = {
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
}
