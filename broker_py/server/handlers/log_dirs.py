"""DescribeLogDirs and AlterReplicaLogDirs: the broker's log dirs and what each holds,
and moving a replica to another dir. The replica manager does the work
(:mod:`broker_py.replication.replica_log_dirs`); a handler decodes, authorizes and
encodes.

With an authorizer, DescribeLogDirs needs DESCRIBE on the cluster (without it the answer
lists no dir, with CLUSTER_AUTHORIZATION_FAILED from v3) and AlterReplicaLogDirs ALTER
(each partition gets CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.log_dirs import AlterReplicaLogDirsResponse, DescribeLogDirsResponse


def handle_describe_log_dirs(apis, request, connection):
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results=[]
        )
    topics = request.body.topics
    wanted = None if topics is None else [(t.topic, p) for t in topics for p in t.partitions]
    results = []
    for info in apis.replica_manager.describe_log_dirs(wanted):
        by_topic: dict[str, list] = {}
        for r in info.replicas:
            by_topic.setdefault(r.topic, []).append(
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=r.partition,
                    partition_size=r.size,
                    offset_lag=r.offset_lag,
                    is_future_key=r.is_future,
                )
            )
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=int(info.error),
                log_dir=info.log_dir,
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
                total_bytes=info.total_bytes,
                usable_bytes=info.usable_bytes,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


def handle_alter_replica_log_dirs(apis, request, connection):
    asked = [
        (t.name, index, d.path)
        for d in request.body.dirs
        for t in d.topics
        for index in t.partitions
    ]
    errors = (
        apis.replica_manager.alter_replica_log_dirs(asked)
        if auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER)
        else [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * len(asked)
    )
    by_topic: dict[str, list] = {}
    for (topic, index, _), error in zip(asked, errors):
        by_topic.setdefault(topic, []).append(
            AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                partition_index=index, error_code=int(error)
            )
        )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


HANDLERS = {
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
}
