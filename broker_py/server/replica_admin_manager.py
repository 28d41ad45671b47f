"""Admin requests about which replica leads and where replicas are: ElectLeaders,
AlterPartitionReassignments and ListPartitionReassignments (Kafka's ``KafkaApis``
handing them to the controller).

The broker a client reaches checks the client's rights (ALTER or DESCRIBE on the
cluster); a broker that is not the controller forwards the request to the controller and
answers with its answer. On the controller each request is one controller event
(``ReplicaLeaderElection``, ``ApiPartitionReassignment``, ``ListPartitionReassignments``),
answered with REQUEST_TIMED_OUT for what it did not answer within the request's timeout.
A broker alone is its own controller (:mod:`broker_py.server.local_support`).
"""

from __future__ import annotations

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.elect_leaders import ElectLeadersResponse
from logstore.protocol.messages.partition_reassignments import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)


class ReplicaAdminManager:
    def __init__(self, support) -> None:
        self.support = support  # LocalSupport or ZkSupport

    async def forward(self, api_key: ApiKey, body, timeout_ms: int):
        return await self.support.to_controller.send(api_key, body, timeout_ms)

    async def elect_leaders(self, apis, request, connection):
        body = request.body
        unclean = request.api_version >= 1 and body.election_type == 1
        if request.api_version >= 1 and body.election_type not in (0, 1):
            return ElectLeadersResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.INVALID_REQUEST),
                replica_election_results=[],
            )
        if not auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER):
            return ElectLeadersResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                replica_election_results=[],
            )
        if not self.support.is_controller:
            return await self.forward(ApiKey.ELECT_LEADERS, body, body.timeout_ms + 5000)
        wanted = (
            None
            if body.topic_partitions is None
            else {TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}
        )
        try:
            (results,) = await self.support.ask_controller(
                lambda reply: ev.ReplicaLeaderElection(wanted, unclean, reply), body.timeout_ms
            )
        except TimeoutError:
            results = {tp: (ErrorCode.REQUEST_TIMED_OUT, None) for tp in wanted or ()}
        by_topic: dict[str, list] = {}
        for tp, (code, message) in sorted(results.items()):
            by_topic.setdefault(tp.topic, []).append(
                ElectLeadersResponse.PartitionResult(
                    partition_id=tp.partition, error_code=int(code), error_message=message
                )
            )
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=0,
            replica_election_results=[
                ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=rs)
                for t, rs in by_topic.items()
            ],
        )

    async def alter_partition_reassignments(self, apis, request, connection):
        body = request.body
        if not auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER):
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                error_message="ALTER on the cluster is not authorized",
                responses=[],
            )
        if not self.support.is_controller:
            return await self.forward(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, body.timeout_ms + 5000
            )
        wanted = {
            TopicPartition(t.name, p.partition_index): (
                None if p.replicas is None else list(p.replicas)
            )
            for t in body.topics
            for p in t.partitions
        }
        try:
            code, results = await self.support.ask_controller(
                lambda reply: ev.ApiPartitionReassignment(wanted, reply), body.timeout_ms
            )
        except TimeoutError:
            code, results = ErrorCode.REQUEST_TIMED_OUT, {}
        responses = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                error, message = results.get(
                    TopicPartition(t.name, p.partition_index), (code, None)
                )
                parts.append(
                    AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=int(error),
                        error_message=message,
                    )
                )
            responses.append(
                AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                    name=t.name, partitions=parts
                )
            )
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=0, error_message=None, responses=responses
        )

    async def list_partition_reassignments(self, apis, request, connection):
        body = request.body
        if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                error_message="DESCRIBE on the cluster is not authorized",
                topics=[],
            )
        if not self.support.is_controller:
            return await self.forward(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, body, body.timeout_ms + 5000
            )
        wanted = (
            None
            if body.topics is None
            else {TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes}
        )
        try:
            code, found = await self.support.ask_controller(
                lambda reply: ev.ListPartitionReassignments(wanted, reply), body.timeout_ms
            )
        except TimeoutError:
            code, found = ErrorCode.REQUEST_TIMED_OUT, {}
        by_topic: dict[str, list] = {}
        for tp, (replicas, adding, removing) in sorted(found.items()):
            by_topic.setdefault(tp.topic, []).append(
                ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=replicas,
                    adding_replicas=adding,
                    removing_replicas=removing,
                )
            )
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=int(code),
            error_message=None,
            topics=[
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
