"""The replica fetcher's hand-written Fetch v12 codec agrees with the generic schema codec:
the request byte for byte, and the response's fields as the broker's native encoder
writes them (tagged fields, aborted transactions and null records included); a cut or
corrupt response raises MalformedFetchResponse, never anything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import logstore
from broker_py.replication.follower_fetch_codec import (
    MalformedFetchResponse,
    decode_response,
    encode_request,
)
from logstore.protocol.frame import encode_request as generic_encode_request
from logstore.protocol.frame import splice_records
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.types import DeferredRecords

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(alphabet="abcdefghij._-0123456789é", min_size=1, max_size=20)
REQUEST_PARTITION = st.tuples(INT32, INT32, INT64, INT32, INT64, INT32)
REQUEST_TOPICS = st.lists(
    st.tuples(NAMES, st.lists(REQUEST_PARTITION, max_size=4)), max_size=5
).map(lambda ts: list({name: parts for name, parts in ts}.items()))


@settings(max_examples=200, deadline=None)
@given(
    correlation_id=st.integers(0, 2**31 - 1),
    client_id=st.text(max_size=30),
    replica_id=INT32,
    max_wait=INT32,
    min_bytes=INT32,
    max_bytes=INT32,
    topics=REQUEST_TOPICS,
)
def test_the_request_is_the_generic_codecs(
    correlation_id, client_id, replica_id, max_wait, min_bytes, max_bytes, topics
):
    generic = FetchRequest(
        cluster_id=None,
        replica_id=replica_id,
        max_wait_ms=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=name,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=p,
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=last,
                        log_start_offset=start,
                        partition_max_bytes=most,
                    )
                    for p, epoch, offset, last, start, most in parts
                ],
            )
            for name, parts in topics
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    header = RequestHeader(
        api_key=1, api_version=12, correlation_id=correlation_id, client_id=client_id
    )
    assert encode_request(
        correlation_id, client_id, replica_id, max_wait, min_bytes, max_bytes, topics
    ) == bytes(generic_encode_request(header, generic))


RESPONSE_PARTITION = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    INT64,
    INT64,
    INT64,
    st.one_of(st.none(), st.lists(st.tuples(INT64, INT64), max_size=3)),
    st.binary(max_size=300),
    INT32,
    st.one_of(st.none(), st.tuples(INT32, INT64)),
    st.one_of(st.none(), st.tuples(INT32, INT32)),
)
RESPONSE_TOPICS = st.lists(
    st.tuples(NAMES, st.lists(RESPONSE_PARTITION, max_size=4)), max_size=4
).map(
    lambda ts: [
        (name, list({p[0]: p for p in parts}.values()))
        for name, parts in {name: parts for name, parts in ts}.items()
    ]
)


def _response_frame(correlation_id, error_code, topics) -> bytes:
    """A Fetch v12 response as the broker writes it, without its size prefix."""
    head, records_at = logstore.encode_fetch_response(
        correlation_id,
        12,
        error_code,
        0,
        [
            (
                name,
                0,
                [
                    (i, e, hw, lso, ls, ab, len(rec), *tags)
                    for i, e, hw, lso, ls, ab, rec, *tags in parts
                ],
            )
            for name, parts in topics
        ],
    )
    records = [DeferredRecords(len(p[6]), p[6]) for _, parts in topics for p in parts if p[6]]
    chunks = splice_records(head, records_at, records)
    frame = b"".join(c.source if isinstance(c, DeferredRecords) else bytes(c) for c in chunks)
    return frame[4:]


@settings(max_examples=200, deadline=None)
@given(
    correlation_id=st.integers(0, 2**31 - 1),
    error_code=st.integers(0, 120),
    topics=RESPONSE_TOPICS,
)
def test_the_response_reads_what_the_broker_wrote(correlation_id, error_code, topics):
    error, answers = decode_response(_response_frame(correlation_id, error_code, topics))
    assert error == error_code
    expected = {(name, p[0]): p for name, parts in topics for p in parts}
    assert set(answers) == set(expected)
    for key, (_, e, hw, _, log_start, _, records, _, epoch_end, _) in expected.items():
        got = answers[key]
        assert (got.error_code, got.high_watermark, got.log_start_offset) == (e, hw, log_start)
        assert bytes(got.records) == records
        if epoch_end is None:
            assert got.diverging_epoch is None
        else:
            assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == epoch_end


@settings(max_examples=50, deadline=None)
@given(topics=RESPONSE_TOPICS.filter(lambda ts: any(parts for _, parts in ts)), data=st.data())
def test_a_cut_or_corrupt_response_raises_malformed(topics, data):
    frame = _response_frame(1, 0, topics)
    cut = data.draw(st.integers(0, len(frame) - 1))
    try:
        decode_response(frame[:cut])
    except MalformedFetchResponse:
        pass
    else:  # a prefix can parse only if what it lacks is trailing empty tagged fields
        assert cut >= len(frame) - 3
    at = data.draw(st.integers(0, len(frame) - 1))
    corrupt = frame[:at] + bytes([frame[at] ^ 0xFF]) + frame[at + 1 :]
    try:
        decode_response(corrupt)
    except MalformedFetchResponse:
        pass


def test_counts_and_lengths_of_two_varint_bytes():
    """130 partitions and a 150-character topic: counts and lengths over 127."""
    name = "t" * 150
    parts = [(i, 1, 2, 3, 4, 5) for i in range(130)]
    test_the_request_is_the_generic_codecs.hypothesis.inner_test(
        7, "c" * 140, 1, 2, 3, 4, [(name, parts)]
    )
    resp = [(name, [(i, 0, 9, 9, 0, None, b"r" * 200, -1, (1, 2), None) for i in range(130)])]
    test_the_response_reads_what_the_broker_wrote.hypothesis.inner_test(7, 0, resp)
