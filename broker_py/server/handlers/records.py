"""DeleteRecords and OffsetForLeaderEpoch: the log start and epoch ends of partitions.

With an authorizer, DeleteRecords needs DELETE and OffsetForLeaderEpoch DESCRIBE on the
topic (TOPIC_AUTHORIZATION_FAILED otherwise)."""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.delete_records import DeleteRecordsResponse
from logstore.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse

HIGH_WATERMARK = -1


def handle_delete_records(apis, request, connection):
    body = request.body
    denied = auth_helper.denied(
        apis, connection, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, low = ErrorCode.NONE, -1
            partition = apis.replica_manager.get_partition(t.name, p.partition_index)
            if t.name in denied:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offset = partition.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                try:
                    low = partition.delete_records_on_leader(offset)
                except KafkaError as e:
                    error = e.errno
            parts.append(
                DeleteRecordsResponse.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=int(error)
                )
            )
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def handle_offset_for_leader_epoch(apis, request, connection):
    body = request.body
    denied = auth_helper.denied(
        apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics)
    )
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, epoch, end = ErrorCode.NONE, -1, -1
            partition = apis.replica_manager.get_partition(t.topic, p.partition)
            if t.topic in denied:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif (error := partition.leader_epoch_error(p.current_leader_epoch)) != ErrorCode.NONE:
                pass
            else:
                epoch, end = partition.last_offset_for_leader_epoch(p.leader_epoch)
            parts.append(
                OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=int(error), partition=p.partition, leader_epoch=epoch, end_offset=end
                )
            )
        topics.append(
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts)
        )
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


HANDLERS = {
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
}
