"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments: where a
partition's replicas live and which one leads. In a cluster they are the controller's
(:mod:`broker_py.server.zk_admin_manager`); below is the single broker.

A single broker is the only replica, the leader and the preferred leader of each of its
partitions, so, as Kafka answers for a partition already led by its preferred replica:
- an election is never needed (ELECTION_NOT_NEEDED; with every partition asked for,
  the answer lists none);
- a reassignment to this broker alone is already done, one naming another broker is
  INVALID_REPLICA_ASSIGNMENT (no such broker is registered), and cancelling is
  NO_REASSIGNMENT_IN_PROGRESS;
- no reassignment is ever in progress.

With an authorizer, ElectLeaders and AlterPartitionReassignments need ALTER on the
cluster, ListPartitionReassignments DESCRIBE (CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.elect_leaders import ElectLeadersResponse
from logstore.protocol.messages.partition_reassignments import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)

PREFERRED, UNCLEAN = 0, 1


def handle_elect_leaders(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.elect_leaders(apis, request, connection)
    body = request.body
    election_type = body.election_type if request.api_version >= 1 else PREFERRED
    valid = election_type in (PREFERRED, UNCLEAN)
    allowed = auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER)
    if body.topic_partitions is None:
        # Every partition: only those that needed an election are listed.
        wanted: list[tuple[str, int]] = [] if valid else sorted(apis.replica_manager.keys())
    else:
        wanted = list(dict.fromkeys((t.topic, p) for t in body.topic_partitions for p in t.partitions))
    by_topic: dict[str, list] = {}
    for topic, index in wanted:
        if not allowed:
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not authorized"
        elif not valid:
            error, message = ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}"
        elif (topic, index) in apis.replica_manager:
            error, message = ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED.description
        else:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist"
        by_topic.setdefault(topic, []).append(
            ElectLeadersResponse.PartitionResult(partition_id=index, error_code=int(error), error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED if not allowed else ErrorCode.NONE if valid else ErrorCode.INVALID_REQUEST),
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=rs) for t, rs in by_topic.items()
        ],
    )


def _reassign(apis, topic: str, index: int, replicas: list[int] | None) -> tuple[ErrorCode, str | None]:
    if (topic, index) not in apis.replica_manager:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist"
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {topic}-{index} is in progress"
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list cannot be empty"
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the replica list {replicas} contains duplicates"
    unknown = [r for r in replicas if r != apis.broker_id]
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the replica list names broker {unknown[0]}, but no such broker is registered"
    return ErrorCode.NONE, None


def handle_alter_partition_reassignments(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.alter_partition_reassignments(apis, request, connection)
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER):
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            error_message="ALTER on the cluster is not authorized", responses=[],
        )  # fmt: skip
    responses = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            error, message = _reassign(apis, t.name, p.partition_index, p.replicas)
            parts.append(
                AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=int(error), error_message=message
                )
            )
        responses.append(AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)


def handle_list_partition_reassignments(apis, request, connection):
    if apis.zk_support is not None:
        return apis.admin_manager.list_partition_reassignments(apis, request, connection)
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            error_message="DESCRIBE on the cluster is not authorized", topics=[],
        )  # fmt: skip
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


HANDLERS = {
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
}
