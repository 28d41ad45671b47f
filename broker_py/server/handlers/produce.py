"""Produce: validate and append record batches.

acks=0 gets no response at all; acks=1 and acks=-1 are answered once the batches are
in the log (a single broker is its whole ISR, so the high watermark is the log end).
acks=-1 fails with NOT_ENOUGH_REPLICAS when ``min.insync.replicas`` exceeds the ISR.
Idempotent batches are checked against the partition's producer state first: a
retried duplicate is acknowledged with its original offsets and not written again.
A transactional batch must belong to an Ongoing transaction that includes the
partition (INVALID_TXN_STATE otherwise); clients may not write control batches.
With an authorizer, a transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition) and each topic WRITE (TOPIC_AUTHORIZATION_FAILED).

A request in the common shape arrives as a :class:`ProduceFrame` and is answered with an
encoded response frame; any other arrives decoded and is answered with a message. Both
go through :func:`produce_partition`.
"""

from __future__ import annotations

import logstore

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    CorruptMessageError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaError,
    MessageTooLargeError,
    NotEnoughReplicasError,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.produce import ProduceResponse
from logstore.protocol.produce_frame import ProduceFrame

ISR_SIZE = 1


def _rejected(e: logstore.InvalidRecordError) -> KafkaError:
    """INVALID_TIMESTAMP or INVALID_RECORD for records the topic's config refused,
    worded as Kafka words it, with each record's own error for record_errors."""
    listed = tuple(e.record_errors)
    shown = ", ".join(f"(batchIndex={i}, message={m})" for i, m in listed[:3])
    cls = InvalidTimestampError if isinstance(e, logstore.InvalidTimestampError) else InvalidRecordError
    error = cls(
        f"One or more records have been rejected due to {len(listed)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    error.record_errors = listed
    return error


def append_records(broker, partition, records, idempotent: bool | None = None) -> tuple[int, int]:
    """Appends producer batches to a partition: (base offset, log append time or -1).

    ``idempotent``: whether a batch carries a producer id, when the caller knows."""
    if not records:
        raise CorruptMessageError("produce request without records")
    state = partition.producer_state
    if idempotent is None:
        idempotent = logstore.has_producer_id(records)
    if idempotent:
        try:
            batches = logstore.decode_batches(records, records=False, verify_crc=False, allow_partial=False)
        except logstore.CorruptRecordError as e:
            raise CorruptMessageError(str(e)) from None
        for b in batches:
            if b.is_control:
                raise InvalidRecordError("clients may not write control batches")
            if b.is_transactional:
                coordinator = broker.transaction_coordinator
                error = ErrorCode.INVALID_TXN_STATE if coordinator is None else coordinator.verify_partition(
                    b.producer_id, b.producer_epoch, partition.topic, partition.index
                )
                if error == ErrorCode.INVALID_PRODUCER_EPOCH:
                    raise InvalidProducerEpochError(f"producer {b.producer_id} epoch {b.producer_epoch} is fenced")
                if error != ErrorCode.NONE:
                    raise InvalidTxnStateError(
                        f"producer {b.producer_id} epoch {b.producer_epoch} has no ongoing transaction "
                        f"that includes {partition.topic}-{partition.index}"
                    )
            duplicate = state.check(b)
            if duplicate is not None:
                return duplicate.first_offset, -1
    try:
        info = partition.log.append_info(records, leader_epoch=partition.leader_epoch)
    except logstore.CorruptRecordError as e:
        raise CorruptMessageError(str(e)) from None
    except logstore.InvalidRecordError as e:
        raise _rejected(e) from None
    except logstore.RecordTooLargeError as e:
        raise MessageTooLargeError(str(e)) from None
    except logstore.LogIOError as e:
        raise partition.storage_error(e) from None
    if idempotent:
        offset = info.base_offset
        for b in batches:
            last = offset + b.last_offset_delta
            state.record(b, offset, last)
            offset = last + 1
    partition.notify_append()
    return info.base_offset, info.log_append_time


def _min_insync_replicas(broker, topic: str) -> int:
    info = broker.metadata.get(topic)
    return broker.min_insync_replicas(info) if info is not None else 1


def produce_partition(broker, topic: str, index: int, records, acks: int, min_isr: int, idempotent: bool | None = None) -> tuple:
    """Appends one partition's records: ``(index, error_code, base_offset,
    log_append_time_ms, log_start_offset, error_message, record_errors)``, the shape
    ``logstore.encode_produce_response`` takes."""
    try:
        if acks not in (0, 1, -1):
            raise InvalidRequiredAcksError(f"acks={acks}")
        partition = broker.partition(topic, index)
        if acks == -1 and ISR_SIZE < min_isr:
            raise NotEnoughReplicasError(f"ISR size {ISR_SIZE} is below min.insync.replicas {min_isr}")
        base_offset, append_time = append_records(broker, partition, records, idempotent)
        return index, 0, base_offset, append_time, partition.log_start_offset, None, ()
    except KafkaError as e:
        return index, int(e.errno), -1, -1, -1, str(e), e.record_errors


def _refusal(broker, connection, transactional_id: str | None, topics) -> tuple[ErrorCode | None, set[str]]:
    """With an authorizer: the error every partition gets (a transactional id the
    connection may not WRITE), and the topics it may not WRITE."""
    if transactional_id is not None and not auth_helper.authorize(
        broker, connection, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, set()
    return None, auth_helper.denied(broker, connection, AclOperation.WRITE, ResourceType.TOPIC, topics)


def _refused_partition(index: int, error: ErrorCode) -> tuple:
    return index, int(error), -1, -1, -1, error.description, ()


def handle_produce(broker, request, connection):
    if type(request) is ProduceFrame:
        return _handle_produce_frame(broker, request, connection)
    body = request.body
    acks = body.acks
    every, denied = (None, set()) if broker.authorizer is None else _refusal(
        broker, connection, body.transactional_id, (t.name for t in body.topic_data)
    )
    responses = []
    for topic_data in body.topic_data:
        min_isr = _min_insync_replicas(broker, topic_data.name) if acks == -1 else 1
        refused = every if every is not None else ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic_data.name in denied else None
        results = []
        for pd in topic_data.partition_data:
            index, error, base_offset, append_time, log_start, message, record_errors = (
                produce_partition(broker, topic_data.name, pd.index, pd.records, acks, min_isr)
                if refused is None
                else _refused_partition(pd.index, refused)
            )
            results.append(
                ProduceResponse.PartitionProduceResponse(
                    index=index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time_ms=append_time,
                    log_start_offset=log_start,
                    record_errors=[
                        ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                        for i, m in record_errors
                    ],
                    error_message=message,
                )
            )
        responses.append(ProduceResponse.TopicProduceResponse(name=topic_data.name, partition_responses=results))
    if acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def _handle_produce_frame(broker, request: ProduceFrame, connection) -> bytes | None:
    """The common shape: records appended from the frame, the response encoded whole."""
    acks = request.acks
    records = request.records
    every, denied = (None, set()) if broker.authorizer is None else _refusal(
        broker, connection, request.transactional_id, (name for name, _ in request.topics)
    )
    responses = []
    for name, partitions in request.topics:
        min_isr = _min_insync_replicas(broker, name) if acks == -1 else 1
        refused = every if every is not None else ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in denied else None
        responses.append(
            (
                name,
                [
                    produce_partition(broker, name, index, records(start, end), acks, min_isr, idempotent)
                    if refused is None
                    else _refused_partition(index, refused)
                    for index, start, end, idempotent in partitions
                ],
            )
        )
    if acks == 0:
        return None
    return logstore.encode_produce_response(request.correlation_id, request.api_version, responses)


HANDLERS = {ApiKey.PRODUCE: handle_produce}
