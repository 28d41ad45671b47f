"""Consumer groups on the consumer protocol (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe.

Each handler turns the request into a call on the group coordinator's
:class:`~broker_py.coordinator.group.consumer_group_coordinator.ConsumerGroupCoordinator`
and its result into the response; the coordinator and its sans-IO manager hold the rules.

Authorization, as Kafka's KafkaApis: ConsumerGroupHeartbeat needs READ on the group and
DESCRIBE on every topic it subscribes to by name (else TOPIC_AUTHORIZATION_FAILED), and a
regex it makes the group resolve matches only topics the client may DESCRIBE;
ConsumerGroupDescribe DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the others)
and DESCRIBE on every topic its members are assigned, or the group is answered with
TOPIC_AUTHORIZATION_FAILED and no members.

Coordinator errors come first, as for the classic APIs: COORDINATOR_NOT_AVAILABLE before
the coordinator runs, COORDINATOR_LOAD_IN_PROGRESS while the group's offsets partition
loads, NOT_COORDINATOR when another broker leads it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker_py.coordinator.group.modern.member import Assignment
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import _client_host, _client_id, _group_allowed
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)

_TOPICS_NOT_AUTHORIZED = (
    "The described group uses topics that the client is not authorized to describe."
)


def _coordinator_error(apis, group_id: str) -> ErrorCode | None:
    coordinator = apis.group_coordinator
    if coordinator is None or not coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return coordinator.manager.coordinator_error(group_id)


# ---- ConsumerGroupHeartbeat ----


def _owned(topic_partitions) -> Assignment | None:
    """The request's owned partitions as topic id -> partitions (None: unchanged)."""
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, set[int]] = {}
    for tp in topic_partitions:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {t: frozenset(p) for t, p in out.items() if p}


def _heartbeat_response(response: HeartbeatResponse) -> ConsumerGroupHeartbeatResponse:
    assignment = None
    if response.assignment is not None:
        assignment = ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponse.TopicPartitions(
                    topic_id=topic_id, partitions=sorted(partitions)
                )
                for topic_id, partitions in sorted(response.assignment.items())
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        error_code=int(response.error_code),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
        assignment=assignment,
    )


def _error_response(error: ErrorCode):
    """Kafka's answer to a heartbeat refused before the coordinator: the error with its
    exception's default message."""
    return ConsumerGroupHeartbeatResponse(
        error_code=int(error), error_message=error.description, member_epoch=0
    )


def handle_consumer_group_heartbeat(apis, request, connection):
    body = request.body
    version = request.api_version
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return _error_response(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if body.subscribed_topic_names and auth_helper.denied(
        apis,
        connection,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        set(body.subscribed_topic_names),
    ):
        # Kafka: a client may not subscribe to topics it may not see.
        return _error_response(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = _coordinator_error(apis, body.group_id)
    if error is not None:
        return _error_response(error)
    if apis.group_coordinator.share_groups.group(body.group_id) is not None:
        # One group-id namespace: a share group is not a consumer group.
        return ConsumerGroupHeartbeatResponse(
            error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
            error_message=f"Group {body.group_id} is not a consumer group.",
        )
    heartbeat = HeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=(
            None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names)
        ),
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor,
        topic_partitions=_owned(body.topic_partitions),
        client_id=_client_id(request),
        client_host=_client_host(connection),
    )
    describable = None
    if apis.authorizer is not None:

        def describable(topic: str) -> bool:
            return auth_helper.authorize(
                apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, topic
            )

    result = apis.group_coordinator.consumer_groups.heartbeat(heartbeat, version, describable)
    if isinstance(result, HeartbeatResponse):
        return _heartbeat_response(result)
    return _when_written(result)


async def _when_written(pending) -> ConsumerGroupHeartbeatResponse:
    return _heartbeat_response(await pending)


# ---- ConsumerGroupDescribe ----


def _described_assignment(assignment: Assignment, names: Mapping[uuid.UUID, str]):
    return ConsumerGroupDescribeResponse.Assignment(
        topic_partitions=[
            ConsumerGroupDescribeResponse.TopicPartitions(
                topic_id=topic_id, topic_name=names[topic_id], partitions=sorted(partitions)
            )
            for topic_id, partitions in sorted(assignment.items())
            if topic_id in names
        ]
    )


def _describe(apis, connection, group_id: str, include_operations: bool, names):
    Described = ConsumerGroupDescribeResponse.DescribedGroup
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return Described(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=group_id)
    if not group_id:
        return Described(error_code=int(ErrorCode.INVALID_GROUP_ID), group_id=group_id)
    error = _coordinator_error(apis, group_id)
    if error is not None:
        return Described(error_code=int(error), group_id=group_id)
    coordinator = apis.group_coordinator.consumer_groups
    group = coordinator.group(group_id)
    if group is None:
        classic = apis.group_coordinator.manager.get_group(group_id)
        message = (
            f"Group {group_id} not found."
            if classic is None and apis.group_coordinator.share_groups.group(group_id) is None
            else f"Group {group_id} is not a consumer group."
        )
        return Described(
            error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message, group_id=group_id
        )
    members = []
    used: set[str] = set()
    for member in group.members.values():
        target = group.target_assignment.get(member.member_id, {})
        for assignment in (member.assigned_partitions, target):
            used.update(names[t] for t in assignment if t in names)
        members.append(
            ConsumerGroupDescribeResponse.Member(
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=_described_assignment(member.assigned_partitions, names),
                target_assignment=_described_assignment(target, names),
                member_type=0 if member.uses_classic_protocol else 1,
            )
        )
    if auth_helper.denied(apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, used):
        return Described(
            error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            error_message=_TOPICS_NOT_AUTHORIZED,
            group_id=group_id,
        )
    return Described(
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=coordinator.manager.assignor_name(group_id),
        members=members,
        authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.GROUP, group_id, include_operations
        ),
    )


def handle_consumer_group_describe(apis, request, connection):
    body = request.body
    coordinator = apis.group_coordinator
    names = {} if coordinator is None else coordinator.consumer_groups.topic_names()
    groups: Iterable[str] = body.group_ids
    return ConsumerGroupDescribeResponse(
        groups=[
            _describe(apis, connection, g, body.include_authorized_operations, names)
            for g in groups
        ]
    )


HANDLERS = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
}
