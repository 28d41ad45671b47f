"""The share coordinator's APIs through their handlers, in process: CLUSTER_ACTION on the
cluster is required (every partition answers CLUSTER_AUTHORIZATION_FAILED otherwise, and
FindCoordinator SHARE too), as Kafka's KafkaApis checks it."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.handlers import groups, share_state
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.share_state import (
    DeleteShareGroupStateRequest,
    ReadShareGroupStateRequest,
)

CONNECTION = SimpleNamespace(principal="User:a", host="127.0.0.1")
TOPIC = uuid.UUID(int=7)


class Authorizer:
    def __init__(self, allowed: set[AclOperation]) -> None:
        self.allowed = allowed

    def authorize(self, principal, host, operation, resource_type, name):
        return operation in self.allowed


def _apis(allowed: set[AclOperation]):
    return SimpleNamespace(authorizer=Authorizer(allowed), share_coordinator=None, zk_support=None)


def test_cluster_action_is_required():
    R = ReadShareGroupStateRequest
    body = R(
        group_id="g",
        topics=[
            R.ReadStateData(
                topic_id=TOPIC,
                partitions=[
                    R.PartitionData(partition=0, leader_epoch=1),
                    R.PartitionData(partition=1, leader_epoch=1),
                ],
            )
        ],
    )
    denied = share_state.handle_read(_apis(set()), SimpleNamespace(body=body), CONNECTION)
    (result,) = denied.results
    assert result.topic_id == TOPIC
    assert [(p.partition, p.error_code) for p in result.partitions] == [
        (0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        (1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ]
    # Allowed, but this broker runs no share coordinator.
    D = DeleteShareGroupStateRequest
    body = D(
        group_id="g",
        topics=[D.DeleteStateData(topic_id=TOPIC, partitions=[D.PartitionData(partition=0)])],
    )
    allowed = _apis({AclOperation.CLUSTER_ACTION})
    answer = share_state.handle_delete(allowed, SimpleNamespace(body=body), CONNECTION)
    (p,) = answer.results[0].partitions
    assert p.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_find_coordinator_share_needs_cluster_action():
    key = "g:AAAAAAAAAAAAAAAAAAAABw:0"
    error = groups._find_coordinator(_apis(set()), key, groups.COORDINATOR_KEY_SHARE, CONNECTION)
    assert error[0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allowed = _apis({AclOperation.CLUSTER_ACTION})
    assert groups._find_coordinator(allowed, "bad", 2, CONNECTION)[0] == ErrorCode.INVALID_REQUEST
    assert groups._find_coordinator(allowed, key, 2, CONNECTION, version=5)[0] == (
        ErrorCode.INVALID_REQUEST
    )
    assert groups._find_coordinator(allowed, key, 2, CONNECTION)[0] == (
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    )
