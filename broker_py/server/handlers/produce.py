"""Produce: records appended through the replica manager, answered once the acks
condition holds.

acks=0 gets no response at all; acks=1 is answered once the batches are in the
leader's log; acks=-1 waits in the produce purgatory until each partition's high
watermark passes its records (at once while this broker is the whole ISR), and fails
with NOT_ENOUGH_REPLICAS, writing nothing, when the ISR is below
``min.insync.replicas``. Idempotent and transactional batches are checked by the
partition's log (:mod:`broker_py.log.unified_log`). With an authorizer, a
transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition) and each topic WRITE (TOPIC_AUTHORIZATION_FAILED).

A partition this broker does not lead gets NOT_LEADER_OR_FOLLOWER with, from v10, the
current leader and its endpoint (KIP-951, :mod:`broker_py.server.leader_hints`).

A request in the common shape arrives as a :class:`ProduceFrame` and is answered with an
encoded response frame; any other arrives decoded and is answered with a message.

Produce v0-v2 carry message format v0/v1 ("message sets"); the log stores RecordBatch
v2 only, so each partition's message set is converted on the way in to one v2 batch
keeping keys, values, timestamps (magic 0 has none: the broker's time), the codec and
the order of the messages (``logstore.up_convert_records``), as Kafka does with
``log.message.format.version`` 3.0+. A malformed set or a bad CRC gets CORRUPT_MESSAGE
for its partition. A v2 batch in those versions is taken as it is, as from Kafka,
unless it is transactional: v0-v2 have no transactional id, so such a write gets
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import logstore
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.leader_hints import with_produce_hints
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.produce import ProduceResponse
from logstore.protocol.produce_frame import ProduceFrame


def _refusal(
    apis, connection, transactional_id: str | None, topics
) -> tuple[ErrorCode | None, set[str]]:
    """With an authorizer: the error every partition gets (a transactional id the
    connection may not WRITE), and the topics it may not WRITE."""
    if transactional_id is not None and not auth_helper.authorize(
        apis, connection, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, set()
    return None, auth_helper.denied(
        apis, connection, AclOperation.WRITE, ResourceType.TOPIC, topics
    )


def _refused_partition(index: int, error: ErrorCode, message: str | None = None) -> tuple:
    return index, int(error), -1, -1, -1, message or error.description, ()


# The last Produce version whose records are message format v0/v1.
LAST_MESSAGE_SET_VERSION = 2
_MAGIC_AT = 16  # the magic byte, at the same place in message sets and v2 batches
_V2_ATTRIBUTES_AT = 21
_TRANSACTIONAL = 0x10


def _up_convert(apis, name: str, partitions, failed: dict) -> list:
    """``partitions`` ((index, records, idempotent) each) of a v0-v2 request with their
    message sets converted to v2 batches; a partition that cannot be is left out and
    its error put in ``failed[(name, index)]``."""
    out = []
    for index, records, idempotent in partitions:
        if records is None or len(records) <= _MAGIC_AT:
            out.append((index, records, idempotent))
            continue
        if records[_MAGIC_AT] >= 2:
            if (
                len(records) > _V2_ATTRIBUTES_AT + 1
                and records[_V2_ATTRIBUTES_AT + 1] & _TRANSACTIONAL
            ):
                failed[(name, index)] = (
                    ErrorCode.UNSUPPORTED_VERSION,
                    "transactional records need Produce v3 or later",
                )
            else:
                out.append((index, records, logstore.has_producer_id(records)))
            continue
        try:
            batch = logstore.up_convert_records(records, apis.time.milliseconds())
        except logstore.CorruptRecordError as e:
            failed[(name, index)] = (ErrorCode.CORRUPT_MESSAGE, str(e))
            continue
        out.append((index, memoryview(batch), False))
    return out


def _merge_failed(results: list, order, failed: dict) -> list:
    """``results`` with each failed partition's answer put back in request order;
    ``order`` is ((topic, (index, ...)), ...)."""
    by_topic = {name: {p[0]: p for p in parts} for name, parts in results}
    merged = []
    for name, indexes in order:
        got = by_topic.get(name, {})
        parts = [
            got[i]
            if i in got
            else _refused_partition(i, *failed.get((name, i), (ErrorCode.UNKNOWN_SERVER_ERROR,)))
            for i in indexes
        ]
        merged.append((name, parts))
    return merged


def handle_produce(apis, request, connection):
    if type(request) is ProduceFrame:
        return _handle_produce_frame(apis, request, connection)
    body = request.body
    acks = body.acks
    every, denied = (
        (None, set())
        if apis.authorizer is None
        else _refusal(apis, connection, body.transactional_id, (t.name for t in body.topic_data))
    )
    entries = []
    refused: dict[str, ErrorCode] = {}
    failed: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    for topic_data in body.topic_data:
        error = (
            every
            if every is not None
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if topic_data.name in denied
            else None
        )
        if error is None:
            parts = [(pd.index, pd.records, None) for pd in topic_data.partition_data]
            if request.api_version <= LAST_MESSAGE_SET_VERSION:
                parts = _up_convert(apis, topic_data.name, parts, failed)
            entries.append((topic_data.name, parts))
        else:
            refused[topic_data.name] = error
    results = apis.replica_manager.append(
        max(0, body.timeout_ms), acks, entries, transactional_id=body.transactional_id
    )
    if acks == 0:
        return None

    def respond(results) -> ProduceResponse:
        if failed:
            order = [
                (t.name, [pd.index for pd in t.partition_data])
                for t in body.topic_data
                if t.name not in refused
            ]
            results = _merge_failed(results, order, failed)
        results, endpoints = with_produce_hints(apis, connection, request.api_version, results)
        by_topic = dict(results)
        responses = []
        for topic_data in body.topic_data:
            if topic_data.name in refused:
                parts = [
                    _refused_partition(pd.index, refused[topic_data.name])
                    for pd in topic_data.partition_data
                ]
            else:
                parts = by_topic[topic_data.name]
            responses.append(
                ProduceResponse.TopicProduceResponse(
                    name=topic_data.name,
                    partition_responses=[
                        ProduceResponse.PartitionProduceResponse(
                            index=index,
                            error_code=error,
                            base_offset=base_offset,
                            log_append_time_ms=append_time,
                            log_start_offset=log_start,
                            record_errors=[
                                ProduceResponse.BatchIndexAndErrorMessage(
                                    batch_index=i, batch_index_error_message=m
                                )
                                for i, m in record_errors
                            ],
                            error_message=message,
                            current_leader=_leader_struct(hint[0] if hint else None),
                        )
                        for index, error, base_offset, append_time, log_start, message, record_errors, *hint in parts
                    ],
                )
            )
        nodes = (
            None
            if endpoints is None
            else [
                ProduceResponse.NodeEndpoint(node_id=i, host=h, port=port, rack=rack)
                for i, h, port, rack in endpoints
            ]
        )
        return ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=nodes)

    return respond(results) if isinstance(results, list) else _when_done(results, respond)


async def _when_done(pending, respond):
    return respond(await pending)


def _handle_produce_frame(apis, request: ProduceFrame, connection) -> bytes | None:
    """The common shape: records appended from the frame, the response encoded whole."""
    acks = request.acks
    records = request.records
    every, denied = (
        (None, set())
        if apis.authorizer is None
        else _refusal(
            apis, connection, request.transactional_id, (name for name, _ in request.topics)
        )
    )
    entries = []
    refused: dict[str, ErrorCode] = {}
    failed: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    legacy = request.api_version <= LAST_MESSAGE_SET_VERSION
    for name, partitions in request.topics:
        error = (
            every
            if every is not None
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if name in denied
            else None
        )
        if error is None:
            parts = [
                (index, records(start, end), idempotent)
                for index, start, end, idempotent in partitions
            ]
            if legacy:
                parts = _up_convert(apis, name, parts, failed)
            entries.append((name, parts))
        else:
            refused[name] = error
    results = apis.replica_manager.append(
        request.timeout_ms, acks, entries, transactional_id=request.transactional_id
    )
    if acks == 0:
        return None
    if not refused and not failed and type(results) is list:
        return _encode(apis, connection, request, results)

    def respond(results) -> bytes:
        if failed:
            order = [
                (name, [index for index, *_ in partitions])
                for name, partitions in request.topics
                if name not in refused
            ]
            results = _merge_failed(results, order, failed)
        if refused:
            by_topic = dict(results)
            results = [
                (
                    name,
                    [_refused_partition(index, refused[name]) for index, *_ in partitions]
                    if name in refused
                    else by_topic[name],
                )
                for name, partitions in request.topics
            ]
        return _encode(apis, connection, request, results)

    return respond(results) if isinstance(results, list) else _when_done(results, respond)


def _leader_struct(leader: tuple[int, int] | None):
    return (
        None
        if leader is None
        else ProduceResponse.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
    )


def _encode(apis, connection, request: ProduceFrame, results: list) -> bytes:
    results, endpoints = with_produce_hints(apis, connection, request.api_version, results)
    return logstore.encode_produce_response(
        request.correlation_id, request.api_version, results, node_endpoints=endpoints
    )


HANDLERS = {ApiKey.PRODUCE: handle_produce}
