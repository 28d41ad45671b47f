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

A request in the common shape arrives as a :class:`ProduceFrame`, its records read in
place; any other arrives decoded. Both take one path and are answered with a response
frame encoded whole (``logstore.encode_produce_response``).

Produce v0-v2 carry message format v0/v1 ("message sets"); the log stores RecordBatch
v2 only, so each partition's message set is converted on the way in to one v2 batch
keeping keys, values, timestamps (magic 0 has none: the broker's time), the codec and
the order of the messages (``logstore.up_convert_records``), as Kafka does with
``log.message.format.version`` 3.0+. A malformed set or a bad CRC gets CORRUPT_MESSAGE
for its partition. A v2 batch in those versions is taken as it is, as from Kafka,
unless it is transactional: v0-v2 have no transactional id, so such a write gets
UNSUPPORTED_VERSION.

Client quotas: the request's size counts against the client's ``producer_byte_rate``
(:func:`broker_py.server.quota.request_throttle.record_bytes`) once it is answered (or
appended, for acks=0), and the response carries the throttle time.
"""

from __future__ import annotations

import logstore
from broker_py.replication.produce_result import ProducePartitionResult
from broker_py.replication.replica_manager import ProduceResults
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.leader_hints import with_produce_hints
from broker_py.server.quota.request_throttle import record_bytes
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
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


def handle_produce(apis, request, connection) -> bytes | None:
    """Reads the request's partitions (in place from a :class:`ProduceFrame`, else from
    the decoded message) and answers as :func:`_produce` does."""
    if type(request) is ProduceFrame:
        records = request.records
        topics = [
            (
                name,
                [
                    (index, records(start, end), idempotent)
                    for index, start, end, idempotent in partitions
                ],
            )
            for name, partitions in request.topics
        ]
        return _produce(
            apis,
            connection,
            request,
            request.acks,
            request.timeout_ms,
            request.transactional_id,
            topics,
        )
    body = request.body
    topics = [
        (t.name, [(pd.index, pd.records, None) for pd in t.partition_data]) for t in body.topic_data
    ]
    return _produce(
        apis,
        connection,
        request,
        body.acks,
        max(0, body.timeout_ms),
        body.transactional_id,
        topics,
    )


def _produce(
    apis, connection, request, acks: int, timeout_ms: int, transactional_id: str | None, topics
):
    """Appends ``topics`` (``[(name, [(index, records, idempotent), ...]), ...]``, in
    request order) through the replica manager and answers with the encoded response
    frame, now or as a coroutine once acks=all is answered; None for acks=0."""
    every, denied = (
        (None, set())
        if apis.authorizer is None
        else _refusal(apis, connection, transactional_id, (name for name, _ in topics))
    )
    entries = topics
    refused: dict[str, ErrorCode] = {}
    failed: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    legacy = request.api_version <= LAST_MESSAGE_SET_VERSION
    if every is not None or denied or legacy:
        entries = []
        for name, parts in topics:
            error = (
                every
                if every is not None
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if name in denied
                else None
            )
            if error is not None:
                refused[name] = error
                continue
            entries.append((name, _up_convert(apis, name, parts, failed) if legacy else parts))
    results = apis.replica_manager.append(
        timeout_ms, acks, entries, transactional_id=transactional_id
    )
    if acks == 0:
        quotas = getattr(apis, "client_quotas", None)
        if quotas is not None:
            record_bytes(apis, quotas.produce, connection, request, request.size)
        return None

    def respond(results: ProduceResults) -> bytes:
        if refused or failed:
            results = _in_request_order(results, topics, refused, failed)
        return _encode(apis, connection, request, results)

    return respond(results) if isinstance(results, list) else _when_done(results, respond)


def _in_request_order(results: ProduceResults, topics, refused: dict, failed: dict):
    """``results`` with the answer of each partition refused before the append (a topic
    in ``refused``, a partition in ``failed``) put back in request order."""
    by_topic = dict(results)
    merged = []
    for name, parts in topics:
        if name in refused:
            merged.append(
                (name, [ProducePartitionResult.failed(index, refused[name]) for index, *_ in parts])
            )
            continue
        got = by_topic.get(name, [])
        if failed:
            got_by_index = {p.index: p for p in got}
            got = [
                got_by_index[index]
                if index in got_by_index
                else ProducePartitionResult.failed(
                    index, *failed.get((name, index), (ErrorCode.UNKNOWN_SERVER_ERROR,))
                )
                for index, *_ in parts
            ]
        merged.append((name, got))
    return merged


async def _when_done(pending, respond):
    return respond(await pending)


def _encode(apis, connection, request, results: ProduceResults) -> bytes:
    if apis.metrics is not None:
        apis.metrics.on_produce_results(results)
    wire = [(topic, [p.wire() for p in parts]) for topic, parts in results]
    wire, endpoints = with_produce_hints(apis, connection, request.api_version, wire)
    quotas = getattr(apis, "client_quotas", None)
    throttle = (
        0
        if quotas is None
        else record_bytes(apis, quotas.produce, connection, request, request.size)
    )
    return logstore.encode_produce_response(
        request.correlation_id, request.api_version, wire, throttle, node_endpoints=endpoints
    )


HANDLERS = {ApiKey.PRODUCE: handle_produce}
