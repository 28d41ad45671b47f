"""What the handlers of the modern group protocols share (consumer groups, KIP-848:
:mod:`.consumer_group`; share groups, KIP-932: :mod:`.share_group`, and their offsets
:mod:`.share_group_offsets`): the checks before the coordinator, in Kafka's KafkaApis
order, and the heartbeat and describe answers, whose shapes are the same in both
families (each passes its own response class).

A heartbeat is refused, in order: GROUP_AUTHORIZATION_FAILED without READ on the group,
TOPIC_AUTHORIZATION_FAILED without DESCRIBE on every topic it subscribes to by name (a
client may not subscribe to topics it may not see), then the coordinator's error. A
described group is refused GROUP_AUTHORIZATION_FAILED without DESCRIBE on it,
INVALID_GROUP_ID for an empty id, then the coordinator's error; a group whose members
are assigned topics the client may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED
without members.

Coordinator errors: COORDINATOR_NOT_AVAILABLE before the coordinator runs,
COORDINATOR_LOAD_IN_PROGRESS while the group's offsets partition loads, NOT_COORDINATOR
when another broker leads it.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from broker_py.coordinator.group.modern.member import Assignment
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import _group_allowed
from logstore.protocol.error_codes import ErrorCode

TOPICS_NOT_AUTHORIZED = (
    "The described group uses topics that the client is not authorized to describe."
)


def _coordinator_error(apis, group_id: str) -> ErrorCode | None:
    coordinator = apis.group_coordinator
    if coordinator is None or not coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return coordinator.manager.coordinator_error(group_id)


def heartbeat_refusal(
    apis, connection, group_id: str, subscribed: Iterable[str] | None
) -> ErrorCode | None:
    if not _group_allowed(apis, connection, AclOperation.READ, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if subscribed and auth_helper.denied(
        apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, set(subscribed)
    ):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return _coordinator_error(apis, group_id)


def error_response(response_class: Any, error: ErrorCode, message: str | None = None) -> Any:
    """Kafka's answer to a heartbeat refused before the coordinator: the error with its
    exception's default message (or ``message``)."""
    return response_class(
        error_code=int(error), error_message=message or error.description, member_epoch=0
    )


def heartbeat_response(response_class: Any, response: Any) -> Any:
    """The coordinator's heartbeat response (error, member id and epoch, interval, the
    assignment as topic id -> partitions or None) on the wire."""
    assignment = None
    if response.assignment is not None:
        assignment = response_class.Assignment(
            topic_partitions=[
                response_class.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(response.assignment.items())
            ]
        )
    return response_class(
        error_code=int(response.error_code),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
        assignment=assignment,
    )


def heartbeat_answer(response_class: Any, result: Any) -> Any:
    """The coordinator's heartbeat result on the wire: at once for a response, else (an
    awaitable of one, while the group's records are written) a coroutine that answers
    once it is done."""
    if inspect.isawaitable(result):
        return _when_written(response_class, result)
    return heartbeat_response(response_class, result)


async def _when_written(response_class: Any, pending: Awaitable[Any]) -> Any:
    return heartbeat_response(response_class, await pending)


def described_assignment(
    response_class: Any, assignment: Assignment, names: Mapping[uuid.UUID, str]
) -> Any:
    """An assignment with topic names (topics the metadata no longer has left out)."""
    return response_class.Assignment(
        topic_partitions=[
            response_class.TopicPartitions(
                topic_id=topic_id, topic_name=names[topic_id], partitions=sorted(partitions)
            )
            for topic_id, partitions in sorted(assignment.items())
            if topic_id in names
        ]
    )


def describe_refusal(apis, connection, group_id: str) -> ErrorCode | None:
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    return _coordinator_error(apis, group_id)


def group_not_found(described_class: Any, group_id: str, kind: str, other_type: bool) -> Any:
    """GROUP_ID_NOT_FOUND for an id naming no group of this ``kind`` ("consumer",
    "share"): "Group X not found." or, when a group of another type holds the id (one
    group-id namespace), "Group X is not a <kind> group."."""
    message = (
        f"Group {group_id} is not a {kind} group." if other_type else f"Group {group_id} not found."
    )
    return described_class(
        error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message, group_id=group_id
    )


def described_group(
    apis,
    connection,
    described_class: Any,
    group_id: str,
    group: Any,
    assignor_name: str,
    members: list[Any],
    used: set[str],
    include_operations: bool,
) -> Any:
    """A described group (state, epochs, assignor, ``members``), or TOPIC_AUTHORIZATION_FAILED
    without members when the client may not DESCRIBE one of the topics in ``used``."""
    refused = topics_refused(apis, connection, described_class, group_id, used)
    if refused is not None:
        return refused
    return described_class(
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=assignor_name,
        members=members,
        authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.GROUP, group_id, include_operations
        ),
    )


def topics_refused(apis, connection, described_class: Any, group_id: str, used: set[str]) -> Any:
    """The group answered TOPIC_AUTHORIZATION_FAILED when the client may not DESCRIBE
    one of the topics its members use, else None."""
    if not auth_helper.denied(apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, used):
        return None
    return described_class(
        error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        error_message=TOPICS_NOT_AUTHORIZED,
        group_id=group_id,
    )
