"""Producer ids and transactions: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit and WriteTxnMarkers; and their admin side,
DescribeProducers, DescribeTransactions and ListTransactions.

InitProducerId without a transactional id allocates an id for an idempotent
producer (v3+ may pass its id and epoch to bump the epoch, KIP-360); with one, it
goes to the transaction coordinator. Requests older than KIP-588 (InitProducerId
v0-3, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn v0-1) get INVALID_PRODUCER_EPOCH
where newer ones get PRODUCER_FENCED, as Kafka answers them.

AddPartitionsToTxn v4+ is the broker-to-broker form: a batch of transactions, each
either added or, with ``verify_only``, checked. WriteTxnMarkers is what a
coordinator sends a partition leader; this broker's own coordinator appends its
markers directly, and serves the API for tools that abort a hanging transaction by
hand (``kafka-transactions.sh abort``: its marker is checked against the producer's
epoch and coordinator epoch as the coordinator's are).

With an authorizer: a transactional id needs WRITE (DESCRIBE for DescribeTransactions
and ListTransactions), an idempotent InitProducerId IDEMPOTENT_WRITE on the cluster or
WRITE on some topic, AddPartitionsToTxn WRITE on each topic (the partitions of the
others then get OPERATION_NOT_ATTEMPTED), AddOffsetsToTxn and TxnOffsetCommit READ on
the group, TxnOffsetCommit and DescribeProducers READ on each topic, and
WriteTxnMarkers and AddPartitionsToTxn v4+ CLUSTER_ACTION on the cluster, as in Kafka.
"""

from __future__ import annotations

import asyncio

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.offsets import TxnOffsetCommitParams
from broker_py.coordinator.transaction.transaction_metadata import MAX_EPOCH, TransactionState
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import requested_offsets, topic_denied
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.transaction_admin import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
)
from logstore.protocol.messages.transactions import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)


def _fenced_for(
    version: int, first_version_with_producer_fenced: int, error: ErrorCode
) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_producer_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _may(apis, connection, operation: AclOperation, transactional_id: str) -> bool:
    return auth_helper.authorize(
        apis, connection, operation, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _coordinator(apis):
    coordinator = apis.transaction_coordinator
    return coordinator if coordinator is not None and coordinator.active else None


# ---- InitProducerId ----


def handle_init_producer_id(apis, request, connection):
    body = request.body
    version = request.api_version
    expected_id = body.producer_id if version >= 3 else -1
    expected_epoch = body.producer_epoch if version >= 3 else -1
    refused = None
    if body.transactional_id is not None:
        if not _may(apis, connection, AclOperation.WRITE, body.transactional_id):
            refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not auth_helper.authorize_cluster(
        apis, connection, AclOperation.IDEMPOTENT_WRITE
    ) and not (
        auth_helper.authorize_by_resource_type(
            apis, connection, AclOperation.WRITE, ResourceType.TOPIC
        )
    ):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if refused is not None:
        return InitProducerIdResponse(error_code=int(refused), producer_id=-1, producer_epoch=-1)
    if body.transactional_id is None:
        if expected_id >= 0 and expected_epoch + 1 < MAX_EPOCH:
            # KIP-360: an idempotent producer bumping its epoch keeps its id.
            return InitProducerIdResponse(
                producer_id=expected_id, producer_epoch=expected_epoch + 1
            )
        try:
            return InitProducerIdResponse(producer_id=apis.producer_ids.next_id(), producer_epoch=0)
        except KafkaError as e:
            return InitProducerIdResponse(
                error_code=int(e.errno), producer_id=-1, producer_epoch=-1
            )
    coordinator = _coordinator(apis)
    if coordinator is None:
        return InitProducerIdResponse(
            error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), producer_id=-1, producer_epoch=-1
        )
    return _init_transactional_producer(coordinator, body, version, expected_id, expected_epoch)


async def _init_transactional_producer(
    coordinator, body, version: int, expected_id: int, expected_epoch: int
):
    error, producer_id, epoch = await coordinator.init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, expected_id, expected_epoch
    )
    return InitProducerIdResponse(
        error_code=int(_fenced_for(version, 4, error)),
        producer_id=producer_id,
        producer_epoch=epoch,
    )


# ---- AddPartitionsToTxn / AddOffsetsToTxn ----


def _topic_results(results: dict[tuple[str, int], ErrorCode]) -> list:
    by_topic: dict[str, list] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                partition_index=index, partition_error_code=int(error)
            )
        )
    return [
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
            name=name, results_by_partition=parts
        )
        for name, parts in by_topic.items()
    ]


async def _add(
    coordinator, transactional_id, producer_id, producer_epoch, topics, verify_only: bool = False
) -> dict:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    if coordinator is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if verify_only:
        return coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
    return await coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions
    )


async def handle_add_partitions_to_txn(apis, request, connection):
    body = request.body
    version = request.api_version
    coordinator = _coordinator(apis)
    if version >= 4:
        if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
            return AddPartitionsToTxnResponse(
                error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results_by_transaction=[]
            )
        return AddPartitionsToTxnResponse(
            error_code=0,
            results_by_transaction=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id,
                    topic_results=_topic_results(
                        await _add(
                            coordinator,
                            t.transactional_id,
                            t.producer_id,
                            t.producer_epoch,
                            t.topics,
                            t.verify_only,
                        )
                    ),
                )
                for t in body.transactions
            ],
        )
    topics = body.v3_and_below_topics
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    denied = topic_denied(apis, connection, topics, AclOperation.WRITE)
    if not _may(apis, connection, AclOperation.WRITE, body.v3_and_below_transactional_id):
        results = dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif denied:
        results = {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if tp[0] in denied
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    else:
        results = await _add(
            coordinator,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            topics,
        )
    results = {tp: _fenced_for(version, 2, e) for tp, e in results.items()}
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(results))


async def handle_add_offsets_to_txn(apis, request, connection):
    body = request.body
    coordinator = _coordinator(apis)
    if not _may(apis, connection, AclOperation.WRITE, body.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not auth_helper.authorize(
        apis, connection, AclOperation.READ, ResourceType.GROUP, body.group_id
    ):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not body.group_id:
        error = ErrorCode.INVALID_GROUP_ID
    else:
        error = await coordinator.add_offsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
        )
    return AddOffsetsToTxnResponse(error_code=int(_fenced_for(request.api_version, 2, error)))


# ---- EndTxn ----


async def handle_end_txn(apis, request, connection):
    body = request.body
    coordinator = _coordinator(apis)
    if not _may(apis, connection, AclOperation.WRITE, body.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        error = await coordinator.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
    return EndTxnResponse(error_code=int(_fenced_for(request.api_version, 2, error)))


# ---- TxnOffsetCommit ----


def handle_txn_offset_commit(apis, request, connection):
    body = request.body
    version = request.api_version
    refused = None
    if not _may(apis, connection, AclOperation.WRITE, body.transactional_id):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not auth_helper.authorize(
        apis, connection, AclOperation.READ, ResourceType.GROUP, body.group_id
    ):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refused is not None:
        errors, offsets = (
            {(t.name, p.partition_index): refused for t in body.topics for p in t.partitions},
            {},
        )
    else:
        errors, offsets = requested_offsets(
            apis, body.topics, version >= 2, topic_denied(apis, connection, body.topics)
        )
    if not offsets:
        return _txn_offset_commit_response(errors)
    committed = apis.group_coordinator.commit_txn_offsets(
        TxnOffsetCommitParams(
            body.group_id,
            body.producer_id,
            body.producer_epoch,
            body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None,
            body.generation_id if version >= 3 else -1,
            offsets,
            body.transactional_id,
        )
    )
    if isinstance(committed, asyncio.Future):
        return _when_txn_committed(committed, errors)
    errors.update(committed)
    return _txn_offset_commit_response(errors)


async def _when_txn_committed(pending, errors):
    errors.update(await pending)
    return _txn_offset_commit_response(errors)


def _txn_offset_commit_response(errors) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=index, error_code=int(error)
            )
        )
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=n, partitions=ps)
            for n, ps in by_topic.items()
        ]
    )


# ---- WriteTxnMarkers ----


def handle_write_txn_markers(apis, request, connection):
    """Appends each marker to its partition as leader, answering once every marker is
    replicated to the ISR (acks=all, ``request.timeout.ms``); a marker on an offsets
    partition then completes the group's transactional offsets."""
    allowed = auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION)
    if not allowed:
        return _write_txn_markers_response(request.body, {})
    markers = [
        (t.name, index, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch)
        for m in request.body.markers
        for t in m.topics
        for index in t.partition_indexes
    ]
    results = apis.replica_manager.append_markers(apis.config["request.timeout.ms"], markers)

    def respond(results) -> WriteTxnMarkersResponse:
        errors = {}
        codes = {(topic, p.index): p.error_code for topic, parts in results for p in parts}
        for topic, index, producer_id, _, commit, _ in markers:
            error = codes.get((topic, index), int(ErrorCode.UNKNOWN_SERVER_ERROR))
            errors[(producer_id, topic, index)] = error
            if error == 0 and topic == OFFSETS_TOPIC and apis.group_coordinator is not None:
                apis.group_coordinator.complete_txn_offsets(producer_id, index, commit)
        return _write_txn_markers_response(request.body, errors)

    return respond(results) if isinstance(results, list) else _when_markers_done(results, respond)


async def _when_markers_done(pending, respond):
    return respond(await pending)


def _write_txn_markers_response(body, errors: dict) -> WriteTxnMarkersResponse:
    """The response for ``body`` with each (producer id, topic, partition)'s error (a
    missing one: CLUSTER_AUTHORIZATION_FAILED)."""
    denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return WriteTxnMarkersResponse(
        markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                partition_index=index,
                                error_code=errors.get((m.producer_id, t.name, index), denied),
                            )
                            for index in t.partition_indexes
                        ],
                    )
                    for t in m.topics
                ],
            )
            for m in body.markers
        ]
    )


# ---- DescribeProducers / DescribeTransactions / ListTransactions ----


def handle_describe_producers(apis, request, connection):
    denied = auth_helper.denied(
        apis,
        connection,
        AclOperation.READ,
        ResourceType.TOPIC,
        (t.name for t in request.body.topics),
    )
    topics = []
    for t in request.body.topics:
        parts = []
        for index in t.partition_indexes:
            partition = apis.replica_manager.get_partition(t.name, index)
            if t.name in denied:
                parts.append(
                    DescribeProducersResponse.PartitionResponse(
                        partition_index=index,
                        error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        error_message=None,
                    )
                )
                continue
            if partition is None:
                parts.append(
                    DescribeProducersResponse.PartitionResponse(
                        partition_index=index,
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        error_message=f"{t.name}-{index} is not on this broker",
                    )
                )
                continue
            producers = [
                DescribeProducersResponse.ProducerState(
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.batches[-1].timestamp if entry.batches else -1,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset,
                )
                for pid, entry in partition.active_producers()
            ]
            parts.append(
                DescribeProducersResponse.PartitionResponse(
                    partition_index=index, error_code=0, active_producers=producers
                )
            )
        topics.append(DescribeProducersResponse.TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(topics=topics)


def handle_describe_transactions(apis, request, connection):
    coordinator = _coordinator(apis)
    states = []
    for transactional_id in request.body.transactional_ids:
        if not _may(apis, connection, AclOperation.DESCRIBE, transactional_id):
            states.append(
                DescribeTransactionsResponse.TransactionState(
                    error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    transactional_id=transactional_id,
                    transaction_state="",
                    producer_id=-1,
                    producer_epoch=-1,
                )
            )
            continue
        txn = coordinator.transactions.get(transactional_id) if coordinator is not None else None
        if txn is None:
            error = (
                ErrorCode.COORDINATOR_NOT_AVAILABLE
                if coordinator is None
                else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            )
            states.append(
                DescribeTransactionsResponse.TransactionState(
                    error_code=int(error),
                    transactional_id=transactional_id,
                    transaction_state="",
                    producer_id=-1,
                    producer_epoch=-1,
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        hidden = auth_helper.denied(
            apis,
            connection,
            AclOperation.DESCRIBE,
            ResourceType.TOPIC,
            (tp[0] for tp in txn.partitions),
        )
        for topic, index in sorted(txn.partitions):
            if topic not in hidden:
                by_topic.setdefault(topic, []).append(index)
        states.append(
            DescribeTransactionsResponse.TransactionState(
                error_code=0,
                transactional_id=transactional_id,
                transaction_state=txn.state.display_name,
                transaction_timeout_ms=txn.txn_timeout_ms,
                transaction_start_time_ms=txn.txn_start_timestamp,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=[
                    DescribeTransactionsResponse.TopicData(topic=n, partitions=ps)
                    for n, ps in by_topic.items()
                ],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)


def handle_list_transactions(apis, request, connection):
    body = request.body
    coordinator = _coordinator(apis)
    if coordinator is None:
        return ListTransactionsResponse(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    by_name = {s.display_name: s for s in TransactionState}
    unknown = [name for name in body.state_filters if name not in by_name]
    states = {by_name[name] for name in body.state_filters if name in by_name}
    producer_ids = set(body.producer_id_filters)
    duration = body.duration_filter if request.api_version >= 1 else -1
    now = apis.time.milliseconds()
    listed = []
    for txn in sorted(coordinator.transactions.values(), key=lambda t: t.transactional_id):
        if txn.state == TransactionState.DEAD:
            continue
        if body.state_filters and txn.state not in states:
            continue
        if producer_ids and txn.producer_id not in producer_ids:
            continue
        if duration >= 0 and now - txn.txn_start_timestamp <= duration:
            continue
        if not _may(apis, connection, AclOperation.DESCRIBE, txn.transactional_id):
            continue
        listed.append(
            ListTransactionsResponse.TransactionState(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state.display_name,
            )
        )
    return ListTransactionsResponse(
        error_code=0, unknown_state_filters=unknown, transaction_states=listed
    )


HANDLERS = {
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
}
