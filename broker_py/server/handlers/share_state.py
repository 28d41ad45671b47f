"""The share coordinator's APIs (KIP-932): InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary, served by
:class:`~broker_py.coordinator.share.share_coordinator.ShareCoordinator`.

Share-partition leaders send them to the coordinator of each ``(group, topic id,
partition)`` key; like Kafka, each needs CLUSTER_ACTION on the cluster (every partition
answers CLUSTER_AUTHORIZATION_FAILED otherwise). Every partition of a request is one
key, answered on its own, in request order. A request without a group id gets an
empty answer, as Kafka's ShareCoordinatorService gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from broker_py.coordinator.share.share_coordinator import ShareCoordinator
from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey, StateBatch
from broker_py.coordinator.share.share_coordinator_shard import Outcome
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.share_state import (
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateResponse,
)

# (coordinator, key, the request's partition data) -> the partition's outcome
Operation = Callable[[ShareCoordinator, SharePartitionKey, Any], Awaitable[Outcome]]


def _serve(
    apis: Any,
    request: Any,
    connection: Any,
    response: Any,
    operation: Operation,
    extra: Callable[[Outcome], dict[str, Any]],
) -> Any:
    body = request.body
    result_cls = response.SCHEMA.fields[0].type.element.cls
    partition_cls = result_cls.SCHEMA.fields[1].type.element.cls

    def answer(outcomes: list[list[Outcome]]) -> Any:
        return response(
            results=[
                result_cls(
                    topic_id=topic.topic_id,
                    partitions=[
                        partition_cls(
                            partition=p.partition,
                            error_code=int(o.error),
                            error_message=o.message if o.error != ErrorCode.NONE else None,
                            **(extra(o) if o.error == ErrorCode.NONE else {}),
                        )
                        for p, o in zip(topic.partitions, per_topic, strict=True)
                    ],
                )
                for topic, per_topic in zip(body.topics, outcomes, strict=True)
            ]
        )

    def everywhere(error: ErrorCode, message: str) -> Any:
        return answer([[Outcome([], error, message) for _ in t.partitions] for t in body.topics])

    if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return everywhere(error, error.description)
    coordinator = apis.share_coordinator
    if coordinator is None:
        return everywhere(ErrorCode.COORDINATOR_NOT_AVAILABLE, "Share coordinator is not enabled.")
    if not body.group_id:
        return response(results=[])

    async def run() -> Any:
        outcomes = await asyncio.gather(
            *(
                asyncio.gather(
                    *(
                        operation(
                            coordinator,
                            SharePartitionKey(body.group_id, topic.topic_id, p.partition),
                            p,
                        )
                        for p in topic.partitions
                    )
                )
                for topic in body.topics
            )
        )
        return answer([list(o) for o in outcomes])

    return run()


def _none(o: Outcome) -> dict[str, Any]:
    return {}


def handle_initialize(apis, request, connection):
    return _serve(
        apis,
        request,
        connection,
        InitializeShareGroupStateResponse,
        lambda c, k, p: c.initialize_state(k, p.state_epoch, p.start_offset),
        _none,
    )


def handle_read(apis, request, connection):
    batch_cls = ReadShareGroupStateResponse.StateBatch

    def extra(o: Outcome) -> dict[str, Any]:
        return {
            "state_epoch": o.state_epoch,
            "start_offset": o.start_offset,
            "state_batches": [
                batch_cls(
                    first_offset=b.first_offset,
                    last_offset=b.last_offset,
                    delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count,
                )
                for b in o.state_batches
            ],
        }

    return _serve(
        apis,
        request,
        connection,
        ReadShareGroupStateResponse,
        lambda c, k, p: c.read_state(k, p.leader_epoch),
        extra,
    )


def handle_write(apis, request, connection):
    def write(c: ShareCoordinator, k: SharePartitionKey, p: Any) -> Awaitable[Outcome]:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches
        ]
        return c.write_state(k, p.state_epoch, p.leader_epoch, p.start_offset, batches)

    return _serve(apis, request, connection, WriteShareGroupStateResponse, write, _none)


def handle_delete(apis, request, connection):
    return _serve(
        apis,
        request,
        connection,
        DeleteShareGroupStateResponse,
        lambda c, k, p: c.delete_state(k),
        _none,
    )


def handle_read_summary(apis, request, connection):
    return _serve(
        apis,
        request,
        connection,
        ReadShareGroupStateSummaryResponse,
        lambda c, k, p: c.read_state_summary(k, p.leader_epoch),
        lambda o: {
            "state_epoch": o.state_epoch,
            "leader_epoch": o.leader_epoch,
            "start_offset": o.start_offset,
        },
    )


HANDLERS = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_summary,
}
