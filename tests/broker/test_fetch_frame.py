"""The native Fetch response encoder agrees with the generic schema codec, every version."""

from __future__ import annotations

import uuid

import logstore
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import EncodeError
from logstore.protocol.frame import decode_response, encode_response_chunks, splice_records
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.types import DeferredRecords

VERSIONS = st.integers(ApiKey.FETCH.min_version, ApiKey.FETCH.max_version)
NAMES = st.text(alphabet="abcdefghij._-0123456789é", min_size=1, max_size=20)
INT64 = st.integers(-1, 2**63 - 1)
PARTITION = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    INT64,
    INT64,
    INT64,
    st.one_of(st.none(), st.lists(st.tuples(INT64, INT64), max_size=3)),
    st.binary(max_size=40),
)
TOPICS = st.lists(st.tuples(NAMES, st.uuids(), st.lists(PARTITION, max_size=4)), max_size=4)


def _flatten(chunks) -> bytes:
    return b"".join(c.source if isinstance(c, DeferredRecords) else bytes(c) for c in chunks)


def _generic(correlation_id, version, error_code, session_id, topics) -> bytes:
    body = FetchResponse(
        throttle_time_ms=0,
        error_code=error_code,
        session_id=session_id,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=name,
                topic_id=topic_id,
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=index,
                        error_code=error,
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=log_start,
                        aborted_transactions=None if aborted is None else [
                            FetchResponse.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted
                        ],
                        preferred_read_replica=-1,
                        records=DeferredRecords(len(records), records) if records else b"",
                    )
                    for index, error, hw, lso, log_start, aborted, records in parts
                ],
            )
            for name, topic_id, parts in topics
        ],
    )
    return _flatten(encode_response_chunks(correlation_id, ApiKey.FETCH, version, body))


def _native(correlation_id, version, error_code, session_id, topics) -> bytes:
    head, records_at = logstore.encode_fetch_response(
        correlation_id, version, error_code, session_id,
        [
            (name, topic_id.int, [(i, e, hw, lso, ls, ab, len(rec)) for i, e, hw, lso, ls, ab, rec in parts])
            for name, topic_id, parts in topics
        ],
    )
    records = [DeferredRecords(len(rec), rec) for _, _, parts in topics for *_, rec in parts if rec]
    return _flatten(splice_records(head, records_at, records))


@settings(max_examples=300, deadline=None)
@given(version=VERSIONS, correlation_id=st.integers(-(2**31), 2**31 - 1), error_code=st.integers(0, 120),
       session_id=st.integers(0, 2**31 - 1), topics=TOPICS)
def test_native_encoding_matches_the_schema_codec(version, correlation_id, error_code, session_id, topics):
    assert _native(correlation_id, version, error_code, session_id, topics) == _generic(
        correlation_id, version, error_code, session_id, topics
    )


def test_a_spliced_frame_decodes_with_its_records():
    topic_id = uuid.uuid4()
    for version in (4, 11, 12, 13, 17):
        frame = _native(3, version, 0, 99, [("t", topic_id, [(0, 0, 5, 5, 0, [(7, 1)], b"abc"), (1, 0, 2, 2, 0, None, b"")])])
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, body = decode_response(frame[4:], ApiKey.FETCH, version)
        assert correlation_id == 3
        parts = body.responses[0].partitions
        assert bytes(parts[0].records) == b"abc"
        assert len(parts[1].records) == 0
        assert [(t.producer_id, t.first_offset) for t in parts[0].aborted_transactions] == [(7, 1)]
        if version >= 7:
            assert body.session_id == 99


def test_splice_refuses_a_mismatch():
    with pytest.raises(EncodeError):
        splice_records(b"\0" * 10, [4], [])
