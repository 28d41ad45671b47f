"""The native Fetch response encoder agrees with the generic schema codec, every version,
tagged fields (diverging_epoch, current_leader, node_endpoints) included."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logstore
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import EncodeError
from logstore.protocol.frame import decode_response, encode_response_chunks, splice_records
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.types import DeferredRecords

VERSIONS = st.integers(ApiKey.FETCH.min_version, ApiKey.FETCH.max_version)
NAMES = st.text(alphabet="abcdefghij._-0123456789é", min_size=1, max_size=20)
INT32 = st.integers(-1, 2**31 - 1)
INT64 = st.integers(-1, 2**63 - 1)
PARTITION = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    INT64,
    INT64,
    INT64,
    st.one_of(st.none(), st.lists(st.tuples(INT64, INT64), max_size=3)),
    st.binary(max_size=40),
    INT32,
    st.one_of(st.none(), st.tuples(INT32, INT64)),
    st.one_of(st.none(), st.tuples(INT32, INT32)),
)
TOPICS = st.lists(st.tuples(NAMES, st.uuids(), st.lists(PARTITION, max_size=4)), max_size=4)
ENDPOINTS = st.lists(st.tuples(INT32, NAMES, INT32, st.one_of(st.none(), NAMES)), max_size=3)


def _flatten(chunks) -> bytes:
    return b"".join(c.source if isinstance(c, DeferredRecords) else bytes(c) for c in chunks)


def _tagged(epoch_end, leader) -> dict:
    """The generic PartitionData's tagged fields; absent ones keep their defaults."""
    out = {}
    if epoch_end is not None:
        out["diverging_epoch"] = FetchResponse.EpochEndOffset(
            epoch=epoch_end[0], end_offset=epoch_end[1]
        )
    if leader is not None:
        out["current_leader"] = FetchResponse.LeaderIdAndEpoch(
            leader_id=leader[0], leader_epoch=leader[1]
        )
    return out


def _partition_data(
    index, error, hw, lso, log_start, aborted, records, preferred, epoch_end, leader
) -> FetchResponse.PartitionData:
    return FetchResponse.PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=lso,
        log_start_offset=log_start,
        aborted_transactions=None
        if aborted is None
        else [FetchResponse.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted],
        preferred_read_replica=preferred,
        records=DeferredRecords(len(records), records) if records else b"",
        **_tagged(epoch_end, leader),
    )


def _generic(correlation_id, version, error_code, session_id, topics, endpoints=()) -> bytes:
    body = FetchResponse(
        throttle_time_ms=0,
        error_code=error_code,
        session_id=session_id,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=name,
                topic_id=topic_id,
                partitions=[_partition_data(*part) for part in parts],
            )
            for name, topic_id, parts in topics
        ],
        node_endpoints=[
            FetchResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r)
            for n, h, p, r in endpoints
        ],
    )
    return _flatten(encode_response_chunks(correlation_id, ApiKey.FETCH, version, body))


def _native(correlation_id, version, error_code, session_id, topics, endpoints=None) -> bytes:
    head, records_at = logstore.encode_fetch_response(
        correlation_id,
        version,
        error_code,
        session_id,
        [
            (
                name,
                topic_id.int,
                [
                    (i, e, hw, lso, ls, ab, len(rec), *tags)
                    for i, e, hw, lso, ls, ab, rec, *tags in parts
                ],
            )
            for name, topic_id, parts in topics
        ],
        node_endpoints=endpoints,
    )
    records = [DeferredRecords(len(p[6]), p[6]) for _, _, parts in topics for p in parts if p[6]]
    return _flatten(splice_records(head, records_at, records))


@settings(max_examples=300, deadline=None)
@given(
    version=VERSIONS,
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    error_code=st.integers(0, 120),
    session_id=st.integers(0, 2**31 - 1),
    topics=TOPICS,
    endpoints=ENDPOINTS,
)
def test_native_encoding_matches_the_schema_codec(
    version, correlation_id, error_code, session_id, topics, endpoints
):
    assert _native(correlation_id, version, error_code, session_id, topics, endpoints) == _generic(
        correlation_id, version, error_code, session_id, topics, endpoints
    )


def test_a_spliced_frame_decodes_with_its_records():
    topic_id = uuid.uuid4()
    for version in (4, 11, 12, 13, 17):
        frame = _native(
            3,
            version,
            0,
            99,
            [
                (
                    "t",
                    topic_id,
                    [
                        (0, 0, 5, 5, 0, [(7, 1)], b"abc", -1, None, None),
                        (1, 0, 2, 2, 0, None, b"", -1, None, None),
                    ],
                )
            ],
        )
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, body = decode_response(frame[4:], ApiKey.FETCH, version)
        assert correlation_id == 3
        parts = body.responses[0].partitions
        assert bytes(parts[0].records) == b"abc"
        assert len(parts[1].records) == 0
        assert [(t.producer_id, t.first_offset) for t in parts[0].aborted_transactions] == [(7, 1)]
        if version >= 7:
            assert body.session_id == 99


def test_tagged_fields_decode_around_the_records():
    topic_id = uuid.uuid4()
    endpoints = [(1, "broker-1", 9092, None), (2, "broker-2", 9093, "rack-b")]
    parts = [
        (0, 0, 5, 5, 0, None, b"abc", 2, (3, 40), (1, 7)),
        (1, 0, 2, 2, 0, None, b"xy", -1, None, (2, 8)),
    ]
    for version in range(4, 18):
        frame = _native(3, version, 0, 99, [("t", topic_id, parts)], endpoints)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        _, body = decode_response(frame[4:], ApiKey.FETCH, version)
        first, second = body.responses[0].partitions
        assert (bytes(first.records), bytes(second.records)) == (b"abc", b"xy")
        assert first.preferred_read_replica == (2 if version >= 11 else -1)
        if version >= 12:
            assert (first.diverging_epoch.epoch, first.diverging_epoch.end_offset) == (3, 40)
            assert (first.current_leader.leader_id, first.current_leader.leader_epoch) == (1, 7)
            assert (second.diverging_epoch.epoch, second.diverging_epoch.end_offset) == (-1, -1)
            assert (second.current_leader.leader_id, second.current_leader.leader_epoch) == (2, 8)
        else:
            assert first.current_leader.leader_id == -1 and first.diverging_epoch.epoch == -1
        decoded = [(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints]
        assert decoded == (endpoints if version >= 16 else [])


def test_splice_refuses_a_mismatch():
    with pytest.raises(EncodeError):
        splice_records(b"\0" * 10, [4], [])
