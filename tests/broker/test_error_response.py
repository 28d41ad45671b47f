"""A request whose handler raises is answered with UNKNOWN_SERVER_ERROR in its own
response, at its version, mirroring what it asked for; the connection stays open."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_py.network.socket_server import SocketServer
from broker_py.server.error_response import error_response
from broker_py.server.handlers import served_api_keys
from logstore.protocol import ApiKey, Request, RequestHeader, decode_response, encode_request
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages import request_class
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.produce import ProduceRequest

from .strategies import message_strategy

CASES = [
    pytest.param(key, version, id=f"{key.api_name}-v{version}")
    for key in served_api_keys()
    for version in range(key.min_version, key.max_version + 1)
]


def _error_codes(value, version, out):
    """Every error_code a response carries at ``version``, depth first."""
    for f in value.SCHEMA.fields:
        if version not in f.versions:
            continue
        v = getattr(value, f.name)
        if f.name == "error_code":
            out.append(v)
        elif isinstance(v, list):
            for item in v:
                if hasattr(item, "SCHEMA"):
                    _error_codes(item, version, out)
    return out


@pytest.mark.parametrize(("key", "version"), CASES)
@settings(
    max_examples=5,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_request_gets_an_error_response_it_can_encode(
    key: ApiKey, version: int, data
) -> None:
    body = data.draw(message_strategy(request_class(key), version))
    if key == ApiKey.PRODUCE:
        body.acks = 1
    header = RequestHeader(api_key=int(key), api_version=version, correlation_id=7, client_id="c")
    response = error_response(Request(header=header, body=body, size=0))
    encoded = response.encode(version)
    decoded = type(response).decode(encoded, version)
    codes = _error_codes(decoded, version, [])
    assert all(c == ErrorCode.UNKNOWN_SERVER_ERROR for c in codes)


def test_partitions_asked_for_are_answered_each():
    body = ProduceRequest(
        acks=-1,
        timeout_ms=100,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="a",
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=b""),
                    ProduceRequest.PartitionProduceData(index=3, records=b""),
                ],
            ),
        ],
    )
    header = RequestHeader(
        api_key=int(ApiKey.PRODUCE), api_version=9, correlation_id=1, client_id="c"
    )
    response = error_response(Request(header=header, body=body, size=0))
    [topic] = response.responses
    assert topic.name == "a"
    assert [(p.index, p.error_code) for p in topic.partition_responses] == [(0, -1), (3, -1)]
    body.acks = 0
    assert error_response(Request(header=header, body=body, size=0)) is None


def test_a_failing_handler_answers_and_keeps_the_connection():
    async def run():
        def broken(request, connection):
            raise RuntimeError("a bug")

        def metadata(request, connection):
            from logstore.protocol.messages.metadata import MetadataResponse

            return MetadataResponse(brokers=[], topics=[])

        server = SocketServer(
            "127.0.0.1",
            0,
            {ApiKey.PRODUCE: broken, ApiKey.METADATA: metadata},
            lambda e: None,
            1 << 20,
            on_error=error_response,
        )
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            produce = ProduceRequest(
                acks=1,
                timeout_ms=100,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="t",
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"")],
                    ),
                ],
            )
            for correlation_id, key, version, body in (
                (1, ApiKey.PRODUCE, 8, produce),
                (2, ApiKey.METADATA, 9, MetadataRequest(topics=None)),
            ):
                header = RequestHeader(
                    api_key=int(key),
                    api_version=version,
                    correlation_id=correlation_id,
                    client_id="c",
                )
                writer.write(encode_request(header, body))
            await writer.drain()
            answers = []
            for key, version in ((ApiKey.PRODUCE, 8), (ApiKey.METADATA, 9)):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                answers.append(decode_response(frame, key, version))
            (cid, produced), (cid2, meta) = answers
            assert (
                cid == 1
                and produced.responses[0].partition_responses[0].error_code
                == ErrorCode.UNKNOWN_SERVER_ERROR
            )
            assert cid2 == 2 and meta.brokers == []
        finally:
            writer.close()
            await server.stop()

    asyncio.run(run())
