"""DescribeLogDirs and AlterReplicaLogDirs: the broker's log dirs and what each holds.

Every partition here is a leader with no followers, so a partition's offset lag (log
end offset minus high watermark) is 0 and no log is a future log. AlterReplicaLogDirs
answers as Kafka's ReplicaManager does: LOG_DIR_NOT_FOUND for a path that is not one
of ``log.dirs``, REPLICA_NOT_AVAILABLE for a partition this broker does not hold, and
nothing to do for a partition already in that dir. Moving a partition to another dir
(Kafka copies it into a future log while it stays online) is not implemented: such a
partition gets KAFKA_STORAGE_ERROR and stays where it is.
"""

from __future__ import annotations

import logging
import os

from broker_py.error_codes import ErrorCode
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.log_dirs import AlterReplicaLogDirsResponse, DescribeLogDirsResponse

log = logging.getLogger(__name__)


def _requested(broker, topics) -> set[tuple[str, int]]:
    """The (topic, partition) pairs asked for that this broker holds; all if ``topics`` is null."""
    held = set(broker.partitions)
    if topics is None:
        return held
    return {(t.topic, p) for t in topics for p in t.partitions} & held


def handle_describe_log_dirs(broker, request, connection):
    wanted = _requested(broker, request.body.topics)
    manager = broker.log_manager
    results = []
    for log_dir in manager.log_dirs:
        by_topic: dict[str, list] = {}
        for topic, index in sorted(wanted):
            if manager.dir_of(topic, index) != log_dir:
                continue
            partition = broker.partitions[(topic, index)]
            by_topic.setdefault(topic, []).append(
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=index, partition_size=partition.log.size_bytes, offset_lag=0, is_future_key=False
                )
            )
        try:
            fs = os.statvfs(log_dir)
            total, usable, error = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize, ErrorCode.NONE
        except OSError as e:
            log.warning("log dir %s: %s", log_dir, e)
            total, usable, error = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=int(error),
                log_dir=log_dir,
                topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


def _alter_one(broker, path: str, topic: str, index: int) -> ErrorCode:
    manager = broker.log_manager
    if os.path.abspath(path) not in manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    current = manager.dir_of(topic, index)
    if current is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if current == os.path.abspath(path):
        return ErrorCode.NONE
    log.warning("cannot move %s-%d from %s to %s: moving a partition between log dirs is not supported", topic, index, current, path)
    return ErrorCode.KAFKA_STORAGE_ERROR


def handle_alter_replica_log_dirs(broker, request, connection):
    by_topic: dict[str, list] = {}
    for d in request.body.dirs:
        for t in d.topics:
            for index in t.partitions:
                error = _alter_one(broker, d.path, t.name, index)
                by_topic.setdefault(t.name, []).append(
                    AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=int(error))
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
    )


HANDLERS = {ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs, ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs}
