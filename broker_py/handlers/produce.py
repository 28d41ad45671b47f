"""Produce: validate and append record batches; InitProducerId for idempotence.

acks=0 gets no response at all; acks=1 and acks=-1 are answered once the batches are
in the log (a single broker is its whole ISR, so the high watermark is the log end).
acks=-1 fails with NOT_ENOUGH_REPLICAS when ``min.insync.replicas`` exceeds the ISR.
Idempotent batches are checked against the partition's producer state first: a
retried duplicate is acknowledged with its original offsets and not written again.
"""

from __future__ import annotations

import struct

import logstore

from broker_py.error_codes import ErrorCode
from broker_py.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotEnoughReplicasError,
)
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.produce import ProduceResponse
from broker_py.protocol.messages.transactions import InitProducerIdResponse

ISR_SIZE = 1


_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch: its size - 12
_PRODUCER_ID = struct.Struct(">q")  # at byte 43 of a batch


def _has_producer_id(records) -> bool:
    """Whether any batch in ``records`` carries a producer id (an idempotent producer).

    Walks only the batch lengths; the storage engine validates the batches whole."""
    pos, end = 0, len(records)
    while pos + 61 <= end:
        if _PRODUCER_ID.unpack_from(records, pos + 43)[0] >= 0:
            return True
        pos += 12 + max(49, _BATCH_LENGTH.unpack_from(records, pos + 8)[0])
    return False


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


def append_records(broker, partition, records) -> tuple[int, int]:
    """Appends producer batches to a partition: (base offset, log append time or -1)."""
    if not records:
        raise CorruptMessageError("produce request without records")
    state = partition.producer_state
    idempotent = _has_producer_id(records)
    if idempotent:
        try:
            batches = logstore.decode_batches(records, records=False, verify_crc=False, allow_partial=False)
        except logstore.CorruptRecordError as e:
            raise CorruptMessageError(str(e)) from None
        for b in batches:
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
        raise KafkaStorageError(str(e)) from None
    if idempotent:
        offset = info.base_offset
        for b in batches:
            last = offset + b.last_offset_delta
            state.record(b, offset, last)
            offset = last + 1
    partition.notify_append()
    return info.base_offset, info.log_append_time


def handle_produce(broker, request, connection):
    body = request.body
    acks = body.acks
    responses = []
    for topic_data in body.topic_data:
        results = []
        topic = broker.metadata.get(topic_data.name)
        min_isr = broker.min_insync_replicas(topic) if topic else 1
        for pd in topic_data.partition_data:
            base_offset, append_time, log_start, error, message = -1, -1, -1, ErrorCode.NONE, None
            record_errors = ()
            try:
                if acks not in (0, 1, -1):
                    raise InvalidRequiredAcksError(f"acks={acks}")
                partition = broker.partition(topic_data.name, pd.index)
                if acks == -1 and ISR_SIZE < min_isr:
                    raise NotEnoughReplicasError(f"ISR size {ISR_SIZE} is below min.insync.replicas {min_isr}")
                base_offset, append_time = append_records(broker, partition, pd.records)
                log_start = partition.log_start_offset
            except KafkaError as e:
                error, message, record_errors = e.errno, str(e), e.record_errors
            results.append(
                ProduceResponse.PartitionProduceResponse(
                    index=pd.index,
                    error_code=int(error),
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


def handle_init_producer_id(broker, request, connection):
    body = request.body
    if body.transactional_id is not None:
        # Transactions are not served (their APIs are not advertised).
        return InitProducerIdResponse(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), producer_id=-1, producer_epoch=-1)
    if request.api_version >= 3 and body.producer_id >= 0:
        # KIP-360: an idempotent producer bumping its epoch keeps its id.
        epoch = body.producer_epoch + 1
        if epoch > 32767:
            return InitProducerIdResponse(producer_id=broker.producer_ids.next_id(), producer_epoch=0)
        return InitProducerIdResponse(producer_id=body.producer_id, producer_epoch=epoch)
    return InitProducerIdResponse(producer_id=broker.producer_ids.next_id(), producer_epoch=0)


HANDLERS = {ApiKey.PRODUCE: handle_produce, ApiKey.INIT_PRODUCER_ID: handle_init_producer_id}
