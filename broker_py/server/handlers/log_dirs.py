"""DescribeLogDirs and AlterReplicaLogDirs: the broker's log dirs and what each holds.

Every partition here is a leader with no followers, so a partition's offset lag (log
end offset minus high watermark) is 0. A partition moving to another dir is also
listed there as a future log (``is_future_key``), its lag the messages written since
its copy began. AlterReplicaLogDirs answers as Kafka's ReplicaManager does:
LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``, REPLICA_NOT_AVAILABLE
for a partition this broker does not hold, nothing to do for a partition already in
that dir, and otherwise starts the move (``broker_py/log/log_dir_mover.py``) and answers
at once. A partition already moving elsewhere is redirected, as Kafka replaces a
future replica: that move stops, its future log goes, and the partition moves to the
new dir from wherever it is (to its own dir: it stays).

With an authorizer, DescribeLogDirs needs DESCRIBE on the cluster (without it the answer
lists no dir, with CLUSTER_AUTHORIZATION_FAILED from v3) and AlterReplicaLogDirs ALTER
(each partition gets CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
import os

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.log_dirs import AlterReplicaLogDirsResponse, DescribeLogDirsResponse

log = logging.getLogger(__name__)


def _requested(apis, topics) -> set[tuple[str, int]]:
    """The (topic, partition) pairs asked for that this broker holds; all if ``topics`` is null."""
    held = set(apis.replica_manager.keys())
    if topics is None:
        return held
    return {(t.topic, p) for t in topics for p in t.partitions} & held


def handle_describe_log_dirs(apis, request, connection):
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results=[]
        )
    wanted = _requested(apis, request.body.topics)
    manager = apis.log_manager
    results = []
    for log_dir in manager.log_dirs:
        by_topic: dict[str, list] = {}
        for topic, index in sorted(wanted):
            partition = apis.replica_manager.get_partition(topic, index)
            if partition is None:
                continue
            if manager.dir_of(topic, index) == log_dir:
                by_topic.setdefault(topic, []).append(
                    DescribeLogDirsResponse.DescribeLogDirsPartition(
                        partition_index=index,
                        partition_size=partition.size_bytes,
                        offset_lag=0,
                        is_future_key=False,
                    )
                )
            move = apis.log_dir_mover.moves.get((topic, index))
            if move is not None and move.dest_dir == log_dir and not move.stopped.is_set():
                by_topic.setdefault(topic, []).append(
                    DescribeLogDirsResponse.DescribeLogDirsPartition(
                        partition_index=index,
                        partition_size=move.copied_bytes(),
                        offset_lag=partition.log_end_offset - move.copied_to,
                        is_future_key=True,
                    )
                )
        try:
            fs = os.statvfs(log_dir)
            total, usable, error = (
                fs.f_blocks * fs.f_frsize,
                fs.f_bavail * fs.f_frsize,
                ErrorCode.NONE,
            )
        except OSError as e:
            log.warning("log dir %s: %s", log_dir, e)
            total, usable, error = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=int(error),
                log_dir=log_dir,
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


def _alter_one(apis, path: str, topic: str, index: int) -> ErrorCode:
    manager = apis.log_manager
    dest = os.path.abspath(path)
    if dest not in manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    current = manager.dir_of(topic, index)
    if current is None or (topic, index) not in apis.replica_manager:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    move = apis.log_dir_mover.moves.get((topic, index))
    if move is not None and not move.stopped.is_set():
        if move.dest_dir == dest:
            return ErrorCode.NONE
        log.info("%s-%d was moving to %s; now to %s", topic, index, move.dest_dir, dest)
    if current != dest or move is not None:
        apis.log_dir_mover.start(topic, index, dest)
    return ErrorCode.NONE


def handle_alter_replica_log_dirs(apis, request, connection):
    by_topic: dict[str, list] = {}
    allowed = auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER)
    for d in request.body.dirs:
        for t in d.topics:
            for index in t.partitions:
                error = (
                    _alter_one(apis, d.path, t.name, index)
                    if allowed
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                by_topic.setdefault(t.name, []).append(
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
