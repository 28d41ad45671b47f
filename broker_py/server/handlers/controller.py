"""The controller's APIs: LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) from the
controller to every broker, ControlledShutdown (7) and AlterPartition (56) from brokers
to the controller.

All need CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). A
request from an older controller epoch than this broker has seen gets
STALE_CONTROLLER_EPOCH, one carrying a broker epoch older than this broker's own
registration STALE_BROKER_EPOCH (-1 skips that check). A broker outside a cluster
(no ``zookeeper.connect``) has no controller: the first three answer
STALE_CONTROLLER_EPOCH, the last two NOT_CONTROLLER.
"""

from __future__ import annotations

import logging

from broker_py.common.topic import TopicInfo
from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_requests import (
    leader_and_isr_from_wire,
    leader_and_isr_response,
    stop_replica_from_wire,
    stop_replica_response,
    update_metadata_from_wire,
    update_metadata_response,
)
from broker_py.replication.replica_manager import LogConfig
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.controller import AlterPartitionResponse, ControlledShutdownResponse

log = logging.getLogger(__name__)


def _refusal(apis, connection, broker_epoch: int) -> ErrorCode | None:
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    zk = apis.zk_support
    if zk is None:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    if broker_epoch != -1 and broker_epoch < zk.broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    return None


def _topic_info(apis, data, topic: str, index: int) -> TopicInfo:
    return TopicInfo(
        topic,
        data.topic_ids.get(topic) or _known_id(apis, topic),
        index + 1,
        apis.metadata_cache.topic_configs.setdefault(topic, {}),
    )


def log_config(apis, data) -> LogConfig:
    """How the replica manager opens the log of a partition ``data`` (a LeaderAndIsr)
    names: the topic (its id as the controller sent it) and its effective configs."""

    def config(topic: str, index: int) -> tuple[TopicInfo, dict[str, str]]:
        info = _topic_info(apis, data, topic, index)
        return info, apis.log_config_manager.effective_config(info)

    return config


def apply_leader_and_isr(
    apis, data, failures: dict | None = None, opened: dict | None = None
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """Leads or follows the partitions of a LeaderAndIsr (their topics' configs already in
    the metadata cache) through the replica manager, which opens their logs as they are
    first named (``opened``: those it opened already); a log that cannot be opened gets
    its error code, and its exception in ``failures`` when given."""
    return apis.replica_manager.become_leader_or_follower(
        data, log_config(apis, data), opened, failures
    )


def apply_update_metadata(apis, data) -> ErrorCode:
    cache = apis.metadata_cache
    if data.controller_epoch < cache.controller_epoch:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    cache.update_metadata(data)
    return ErrorCode.NONE


def apply_stop_replica(apis, data) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    error, errors = apis.replica_manager.stop_replicas(data)
    deleted = {
        s.partition.topic
        for s in data.partitions
        if s.delete and errors.get(s.partition) == ErrorCode.NONE
    }
    for topic in deleted:
        if not any(t == topic for t, _ in apis.replica_manager.keys()):
            for callback in apis.topic_admin_manager.on_topic_deleted:
                callback(topic)
    return error, errors


async def handle_leader_and_isr(apis, request, connection):
    data = leader_and_isr_from_wire(request.body, request.api_version)
    refused = _refusal(apis, connection, data.broker_epoch)
    if refused is not None:
        return leader_and_isr_response(refused, {}, {})
    await apis.zk_support.load_topic_configs({s.partition.topic for s in data.partitions})
    opened = await apis.replica_manager.open_new_logs(data, log_config(apis, data))
    error, errors = apply_leader_and_isr(apis, data, opened=opened)
    if errors:
        moved = sum(1 for e in errors.values() if e == ErrorCode.NONE)
        log.info(
            "LeaderAndIsr from controller %d (epoch %d): %d partitions applied",
            data.controller_id,
            data.controller_epoch,
            moved,
        )
    return leader_and_isr_response(error, {tp: int(e) for tp, e in errors.items()}, data.topic_ids)


def _known_id(apis, topic: str):
    info = apis.metadata_cache.get(topic)
    return None if info is None else info.topic_id


async def handle_update_metadata(apis, request, connection):
    data = update_metadata_from_wire(request.body, request.api_version)
    refused = _refusal(apis, connection, data.broker_epoch)
    if refused is not None:
        return update_metadata_response(refused)
    await apis.zk_support.load_topic_configs({s.partition.topic for s in data.partitions})
    return update_metadata_response(apply_update_metadata(apis, data))


def handle_stop_replica(apis, request, connection):
    data = stop_replica_from_wire(request.body, request.api_version)
    refused = _refusal(apis, connection, data.broker_epoch)
    if refused is not None:
        return stop_replica_response(refused, {})
    error, errors = apply_stop_replica(apis, data)
    return stop_replica_response(error, {tp: int(e) for tp, e in errors.items()})


async def handle_controlled_shutdown(apis, request, connection):
    body = request.body
    zk = apis.zk_support
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(
            error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), remaining_partitions=[]
        )
    if zk is None or not zk.is_controller:
        return ControlledShutdownResponse(
            error_code=int(ErrorCode.NOT_CONTROLLER), remaining_partitions=[]
        )
    try:
        code, remaining = await zk.ask_controller(
            lambda reply: ev.ControlledShutdown(body.broker_id, body.broker_epoch, reply),
            apis.config["request.timeout.ms"],
        )
    except TimeoutError:
        return ControlledShutdownResponse(
            error_code=int(ErrorCode.REQUEST_TIMED_OUT), remaining_partitions=[]
        )
    return ControlledShutdownResponse(
        error_code=int(code),
        remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(
                topic_name=tp.topic, partition_index=tp.partition
            )
            for tp in sorted(remaining)
        ],
    )


def _controller_topic_name(zk, topic_id) -> str | None:
    """The topic the controller knows by ``topic_id`` (its own broker's metadata may lag
    right after it became controller). A read of the event thread's dict: one lookup,
    safe under the GIL."""
    ids = dict(zk.controller.context.topic_ids)
    return next((name for name, tid in ids.items() if tid == topic_id), None)


async def handle_alter_partition(apis, request, connection):
    body = request.body
    version = request.api_version
    zk = apis.zk_support

    def answer(code: ErrorCode):
        return AlterPartitionResponse(throttle_time_ms=0, error_code=int(code), topics=[])

    if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if zk is None or not zk.is_controller:
        return answer(ErrorCode.NOT_CONTROLLER)
    names = {}
    items = []
    unknown_ids = []
    for t in body.topics:
        if version >= 2:
            info = apis.metadata_cache.by_id(t.topic_id)
            name = info.name if info is not None else _controller_topic_name(zk, t.topic_id)
            if name is None:
                unknown_ids.append(t)
                continue
        else:
            name = t.topic_name
        names[name] = t.topic_id
        for p in t.partitions:
            isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
            items.append(
                ev.AlterPartitionItem(
                    TopicPartition(name, p.partition_index),
                    p.leader_epoch,
                    isr,
                    p.partition_epoch,
                    p.leader_recovery_state,
                )
            )
    try:
        code, results = await zk.ask_controller(
            lambda reply: ev.AlterPartition(body.broker_id, body.broker_epoch, items, reply),
            apis.config["request.timeout.ms"],
        )
    except TimeoutError:
        return answer(ErrorCode.REQUEST_TIMED_OUT)
    by_topic: dict[str, list] = {}
    for tp, r in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            AlterPartitionResponse.PartitionData(
                partition_index=tp.partition,
                error_code=int(r.error),
                leader_id=r.leader,
                leader_epoch=r.leader_epoch,
                isr=list(r.isr),
                leader_recovery_state=r.leader_recovery_state,
                partition_epoch=r.partition_epoch,
            )
        )
    topics = [
        AlterPartitionResponse.TopicData(topic_name=t, topic_id=names.get(t), partitions=ps)
        for t, ps in by_topic.items()
    ]
    for t in unknown_ids:
        topics.append(
            AlterPartitionResponse.TopicData(
                topic_name="",
                topic_id=t.topic_id,
                partitions=[
                    AlterPartitionResponse.PartitionData(
                        partition_index=p.partition_index,
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_ID),
                        leader_id=-1,
                        leader_epoch=-1,
                        isr=[],
                        partition_epoch=-1,
                    )
                    for p in t.partitions
                ],
            )
        )
    return AlterPartitionResponse(throttle_time_ms=0, error_code=int(code), topics=topics)


HANDLERS = {
    ApiKey.LEADER_AND_ISR: handle_leader_and_isr,
    ApiKey.UPDATE_METADATA: handle_update_metadata,
    ApiKey.STOP_REPLICA: handle_stop_replica,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.ALTER_PARTITION: handle_alter_partition,
}
