"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe.

Each handler turns the request into a call on the group coordinator's
:class:`~broker_py.coordinator.group.share_group_coordinator.ShareGroupCoordinator` and
its result into the response; the sans-IO manager holds the rules.

As Kafka's KafkaApis: while share groups are not enabled (group.share.enable=false; on by
default, as Kafka 4.2 serves them) ShareGroupHeartbeat and ShareGroupDescribe
answer UNSUPPORTED_VERSION. Then authorization and coordinator errors are those of
:mod:`.modern_groups` (a described group's topics are those its members are assigned).
One group-id namespace: a heartbeat or describe naming a classic or consumer group gets
GROUP_ID_NOT_FOUND "Group X is not a share group.".
"""

from __future__ import annotations

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.coordinator.group.modern.share.manager import ShareHeartbeatRequest
from broker_py.coordinator.group.modern.share.simple_assignor import NAME as SIMPLE_ASSIGNOR
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
from logstore.protocol.messages.share_group import (
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)


def _enabled(apis) -> bool:
    coordinator = apis.group_coordinator
    return coordinator is not None and coordinator.share_groups.enabled


def _other_type(apis, group_id: str) -> str | None:
    """The type of a classic or consumer group holding ``group_id``, if one does."""
    kind = apis.group_coordinator.group_type_of(group_id)
    return None if kind in (None, "share") else kind


# ---- ShareGroupHeartbeat ----


def _error_response(error: ErrorCode, message: str | None = None):
    return error_response(ShareGroupHeartbeatResponse, error, message)


def handle_share_group_heartbeat(apis, request, connection):
    body = request.body
    if not _enabled(apis):
        return _error_response(ErrorCode.UNSUPPORTED_VERSION)
    error = heartbeat_refusal(apis, connection, body.group_id, body.subscribed_topic_names)
    if error is not None:
        return _error_response(error)
    if body.group_id and _other_type(apis, body.group_id) is not None:
        return _error_response(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {body.group_id} is not a share group."
        )
    heartbeat = ShareHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        rack_id=body.rack_id,
        subscribed_topic_names=(
            None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names)
        ),
        client_id=_client_id(request),
        client_host=_client_host(connection),
    )
    result = apis.group_coordinator.share_groups.heartbeat(heartbeat)
    return heartbeat_answer(ShareGroupHeartbeatResponse, result)


# ---- ShareGroupDescribe ----


def _described_assignment(assignment: Assignment, names):
    return described_assignment(ShareGroupDescribeResponse, assignment, names)


def _describe(apis, connection, group_id: str, include_operations: bool, names):
    Described = ShareGroupDescribeResponse.DescribedGroup
    error = describe_refusal(apis, connection, group_id)
    if error is not None:
        return Described(error_code=int(error), group_id=group_id)
    group = apis.group_coordinator.share_groups.group(group_id)
    if group is None:
        other_type = _other_type(apis, group_id) is not None
        return group_not_found(Described, group_id, "share", other_type)
    members = []
    used: set[str] = set()
    for member in group.members.values():
        used.update(names[t] for t in member.assigned_partitions if t in names)
        members.append(
            ShareGroupDescribeResponse.Member(
                member_id=member.member_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                assignment=_described_assignment(member.assigned_partitions, names),
            )
        )
    assignor = SIMPLE_ASSIGNOR
    return described_group(
        apis, connection, Described, group_id, group, assignor, members, used, include_operations
    )


def handle_share_group_describe(apis, request, connection):
    body = request.body
    if not _enabled(apis):
        return ShareGroupDescribeResponse(
            groups=[
                ShareGroupDescribeResponse.DescribedGroup(
                    group_id=g,
                    error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                    error_message=ErrorCode.UNSUPPORTED_VERSION.description,
                )
                for g in body.group_ids
            ]
        )
    names = apis.group_coordinator.share_groups.topic_names()
    return ShareGroupDescribeResponse(
        groups=[
            _describe(apis, connection, g, body.include_authorized_operations, names)
            for g in body.group_ids
        ]
    )


HANDLERS = {
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
}
