"""CreateTopics, DeleteTopics and CreatePartitions, through the controller
(:mod:`broker_py.server.topic_admin_manager`).

With an authorizer, creating a topic needs CREATE on the cluster or on the topic (and
the configs come back only with DESCRIBE_CONFIGS on it), deleting DELETE and adding
partitions ALTER on the topic; TOPIC_AUTHORIZATION_FAILED otherwise.

Only the coordinators' topics (``__consumer_offsets``, ``__transaction_state``) are
internal and refused by DeleteTopics; a user topic such as ``__events`` is deleted like
any other. CreatePartitions with explicit assignments needs exactly one per added
partition (INVALID_REPLICA_ASSIGNMENT, "Attempted to add N additional partition(s),
but only M assignment(s) were specified."); null assignments let the broker place them.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode


def handle_create_topics(apis, request, connection):
    return apis.topic_admin_manager.create_topics(apis, request, connection)


# DeleteTopics before v3 has no TOPIC_DELETION_DISABLED: Kafka answers those versions
# INVALID_REQUEST when delete.topic.enable is false.
_FIRST_DELETION_DISABLED_VERSION = 3


async def handle_delete_topics(apis, request, connection):
    response = await apis.topic_admin_manager.delete_topics(apis, request, connection)
    if request.api_version < _FIRST_DELETION_DISABLED_VERSION:
        for result in response.responses:
            if result.error_code == ErrorCode.TOPIC_DELETION_DISABLED:
                result.error_code = int(ErrorCode.INVALID_REQUEST)
    return response


def handle_create_partitions(apis, request, connection):
    return apis.topic_admin_manager.create_partitions(apis, request, connection)


HANDLERS = {
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
}
