"""Producer ids and transactions: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit and WriteTxnMarkers.

InitProducerId without a transactional id allocates an id for an idempotent
producer (v3+ may pass its id and epoch to bump the epoch, KIP-360); with one, it
goes to the transaction coordinator. Requests older than KIP-588 (InitProducerId
v0-3, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn v0-1) get INVALID_PRODUCER_EPOCH
where newer ones get PRODUCER_FENCED, as Kafka answers them.

AddPartitionsToTxn v4+ is the broker-to-broker form: a batch of transactions, each
either added or, with ``verify_only``, checked. WriteTxnMarkers is what a
coordinator sends a partition leader; this broker's own coordinator appends its
markers directly, and serves the API for tools that write markers by hand.
"""

from __future__ import annotations

from broker_py.error_codes import ErrorCode
from broker_py.errors import KafkaError
from broker_py.group import OffsetAndMetadata
from broker_py.group_metadata_manager import now_ms
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.transactions import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)
from broker_py.transaction_metadata import MAX_EPOCH

OFFSETS_TOPIC = "__consumer_offsets"


def _fenced_for(version: int, first_version_with_producer_fenced: int, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_producer_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _coordinator(broker):
    coordinator = broker.transaction_coordinator
    return coordinator if coordinator is not None and coordinator.active else None


# ---- InitProducerId ----


def handle_init_producer_id(broker, request, connection):
    body = request.body
    version = request.api_version
    expected_id = body.producer_id if version >= 3 else -1
    expected_epoch = body.producer_epoch if version >= 3 else -1
    if body.transactional_id is None:
        if expected_id >= 0:
            # KIP-360: an idempotent producer bumping its epoch keeps its id.
            epoch = expected_epoch + 1
            if epoch >= MAX_EPOCH:
                return InitProducerIdResponse(producer_id=broker.producer_ids.next_id(), producer_epoch=0)
            return InitProducerIdResponse(producer_id=expected_id, producer_epoch=epoch)
        return InitProducerIdResponse(producer_id=broker.producer_ids.next_id(), producer_epoch=0)
    coordinator = _coordinator(broker)
    if coordinator is None:
        return InitProducerIdResponse(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), producer_id=-1, producer_epoch=-1)
    error, producer_id, epoch = coordinator.init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, expected_id, expected_epoch
    )
    return InitProducerIdResponse(error_code=int(_fenced_for(version, 4, error)), producer_id=producer_id, producer_epoch=epoch)


# ---- AddPartitionsToTxn / AddOffsetsToTxn ----


def _topic_results(results: dict[tuple[str, int], ErrorCode]) -> list:
    by_topic: dict[str, list] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=int(error))
        )
    return [
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
        for name, parts in by_topic.items()
    ]


def _add(coordinator, transactional_id, producer_id, producer_epoch, topics, verify_only: bool = False) -> dict:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    if coordinator is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if verify_only:
        return {tp: coordinator.verify_partition(producer_id, producer_epoch, *tp) for tp in partitions}
    return coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)


def handle_add_partitions_to_txn(broker, request, connection):
    body = request.body
    version = request.api_version
    coordinator = _coordinator(broker)
    if version >= 4:
        return AddPartitionsToTxnResponse(
            error_code=0,
            results_by_transaction=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id,
                    topic_results=_topic_results(
                        _add(coordinator, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
                    ),
                )
                for t in body.transactions
            ],
        )
    results = _add(
        coordinator,
        body.v3_and_below_transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
        body.v3_and_below_topics,
    )
    results = {tp: _fenced_for(version, 2, e) for tp, e in results.items()}
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(results))


def handle_add_offsets_to_txn(broker, request, connection):
    body = request.body
    coordinator = _coordinator(broker)
    if coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not body.group_id:
        error = ErrorCode.INVALID_GROUP_ID
    else:
        error = coordinator.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
    return AddOffsetsToTxnResponse(error_code=int(_fenced_for(request.api_version, 2, error)))


# ---- EndTxn ----


def handle_end_txn(broker, request, connection):
    body = request.body
    coordinator = _coordinator(broker)
    if coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error = coordinator.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
    return EndTxnResponse(error_code=int(_fenced_for(request.api_version, 2, error)))


# ---- TxnOffsetCommit ----


def handle_txn_offset_commit(broker, request, connection):
    body = request.body
    version = request.api_version
    commit_timestamp = now_ms()
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in body.topics:
        info = broker.metadata.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                    metadata=p.committed_metadata or "",
                    commit_timestamp=commit_timestamp,
                )
    if offsets:
        errors.update(
            broker.group_coordinator.commit_txn_offsets(
                body.group_id,
                body.producer_id,
                body.producer_epoch,
                body.member_id if version >= 3 else "",
                body.group_instance_id if version >= 3 else None,
                body.generation_id if version >= 3 else -1,
                offsets,
            )
        )
    by_topic: dict[str, list] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(partition_index=index, error_code=int(error))
        )
    return TxnOffsetCommitResponse(
        topics=[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in by_topic.items()]
    )


# ---- WriteTxnMarkers ----


def handle_write_txn_markers(broker, request, connection):
    results = []
    for marker in request.body.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for index in t.partition_indexes:
                partition = broker.partitions.get((t.name, index))
                error = ErrorCode.NONE
                if partition is None:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        partition.append_marker(marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch)
                    except KafkaError as e:
                        error = e.errno
                    else:
                        if t.name == OFFSETS_TOPIC and broker.group_coordinator is not None:
                            broker.group_coordinator.complete_txn_offsets(marker.producer_id, index, marker.transaction_result)
                parts.append(
                    WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(partition_index=index, error_code=int(error))
                )
            topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


HANDLERS = {
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
}
