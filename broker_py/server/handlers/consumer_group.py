"""Consumer groups on the consumer protocol (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe.

Each handler turns the request into a call on the group coordinator's
:class:`~broker_py.coordinator.group.consumer_group_coordinator.ConsumerGroupCoordinator`
and its result into the response; the coordinator and its sans-IO manager hold the rules.

Authorization and coordinator errors, as Kafka's KafkaApis, are those of
:mod:`.modern_groups`; besides, a regex a heartbeat makes the group resolve matches only
topics the client may DESCRIBE, and a described group's topics are those of its members'
assignments and target assignments.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.member import Assignment
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import _client_host, _client_id
from broker_py.server.handlers.modern_groups import (
    describe_refusal,
    described_assignment,
    described_group,
    error_response,
    group_not_found,
    heartbeat_answer,
    heartbeat_refusal,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)

# ---- ConsumerGroupHeartbeat ----


def _owned(topic_partitions) -> Assignment | None:
    """The request's owned partitions as topic id -> partitions (None: unchanged)."""
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, set[int]] = {}
    for tp in topic_partitions:
        out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {t: frozenset(p) for t, p in out.items() if p}


def handle_consumer_group_heartbeat(apis, request, connection):
    body = request.body
    version = request.api_version
    error = heartbeat_refusal(apis, connection, body.group_id, body.subscribed_topic_names)
    if error is not None:
        return error_response(ConsumerGroupHeartbeatResponse, error)
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
    return heartbeat_answer(ConsumerGroupHeartbeatResponse, result)


# ---- ConsumerGroupDescribe ----


def _described_assignment(assignment: Assignment, names):
    return described_assignment(ConsumerGroupDescribeResponse, assignment, names)


def _describe(apis, connection, group_id: str, include_operations: bool, names):
    Described = ConsumerGroupDescribeResponse.DescribedGroup
    error = describe_refusal(apis, connection, group_id)
    if error is not None:
        return Described(error_code=int(error), group_id=group_id)
    coordinator = apis.group_coordinator.consumer_groups
    group = coordinator.group(group_id)
    if group is None:
        classic = apis.group_coordinator.manager.get_group(group_id)
        other_type = (
            classic is not None or apis.group_coordinator.share_groups.group(group_id) is not None
        )
        return group_not_found(Described, group_id, "consumer", other_type)
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
    assignor = coordinator.manager.assignor_name(group_id)
    return described_group(
        apis, connection, Described, group_id, group, assignor, members, used, include_operations
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
