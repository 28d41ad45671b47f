"""A follower's Fetch read by the engine (``FollowerFetchFrame``) agrees with the generic
schema codec on every request it accepts and leaves every other Fetch to it; malformed
frames get the codec's typed errors; and the leader answers a follower's fetch read
either way with the same bytes (errors, diverging epochs, leader hints included)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

import logstore
from broker_py.network.pending_response import PendingResponse
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.server.fetch_session import FetchSessionCache
from broker_py.server.handlers.fetch import handle_fetch
from broker_py.utils.time import MockTime
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import ProtocolError
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame
from logstore.protocol.frame import (
    Request,
    decode_request,
    decode_response,
    encode_request,
    read_request,
)
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.types import DeferredRecords

VERSIONS = st.integers(12, ApiKey.FETCH.max_version)
NAMES = st.text(alphabet="abcdefghij._-0123456789é", min_size=1, max_size=12)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PARTITION = st.tuples(INT32, INT32, INT64, INT32, INT64, INT32)
TOPICS = st.lists(st.tuples(NAMES, st.uuids(), st.lists(PARTITION, max_size=3)), max_size=3)


def request_frame(
    version: int,
    replica_id: int,
    topics,
    session=(0, -1),
    forgotten=(),
    cluster_id=None,
    rack_id="",
    client_id="fetcher",
) -> bytes:
    R = FetchRequest
    body = R(
        cluster_id=cluster_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session[0],
        session_epoch=session[1],
        topics=[
            R.FetchTopic(
                topic=name,
                topic_id=tid,
                partitions=[
                    R.FetchPartition(
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
            for name, tid, parts in topics
        ],
        forgotten_topics_data=[
            R.ForgottenTopic(topic=name, topic_id=tid, partitions=[0]) for name, tid in forgotten
        ],
        rack_id=rack_id,
    )
    if version >= 15:
        if replica_id >= 0:
            body.replica_state = R.ReplicaState(replica_id=replica_id, replica_epoch=3)
    else:
        body.replica_id = replica_id
    header = RequestHeader(
        api_key=int(ApiKey.FETCH), api_version=version, correlation_id=9, client_id=client_id
    )
    return encode_request(header, body)[4:]


@settings(max_examples=150, deadline=None)
@given(
    version=VERSIONS,
    replica_id=st.integers(-1, 5),
    topics=TOPICS,
    session=st.sampled_from([(0, -1), (0, 0), (7, 1)]),
    forgotten=st.lists(st.tuples(NAMES, st.uuids()), max_size=1),
    cluster_id=st.one_of(st.none(), NAMES),
    rack_id=NAMES,
)
def test_the_engine_reads_what_the_generic_codec_reads(
    version, replica_id, topics, session, forgotten, cluster_id, rack_id
):
    frame = request_frame(
        version, replica_id, topics, session, forgotten, cluster_id, rack_id=rack_id
    )
    got = decode_request(frame)
    generic = read_request(frame, ApiKey.FETCH)
    follower = replica_id >= 0 and session == (0, -1) and not forgotten
    if not follower:
        assert type(got) is Request and got.body == generic.body
        return
    assert type(got) is FollowerFetchFrame
    assert (got.api_version, got.correlation_id, got.client_id, got.replica_id) == (
        version,
        9,
        "fetcher",
        replica_id,
    )
    assert (got.max_wait_ms, got.min_bytes, got.max_bytes) == (500, 1, 1 << 20)
    assert got.topics == tuple(
        (name if version < 13 else tid.int, tuple(parts)) for name, tid, parts in topics
    )
    assert got.body == generic.body and got.header == generic.header


def test_below_v12_and_malformed_frames_go_to_the_generic_codec():
    topics = [("t", uuid.uuid4(), [(0, 1, 2, 3, 4, 5)])]
    assert type(decode_request(request_frame(11, 1, topics))) is Request
    for version in (12, 13, 15, 17):
        frame = request_frame(version, 1, topics)
        assert type(decode_request(frame)) is FollowerFetchFrame
        for end in range(8, len(frame)):
            try:
                got = decode_request(frame[:end])
            except ProtocolError:
                continue
            assert type(got) is not FollowerFetchFrame, (version, end)
        assert logstore.parse_follower_fetch_request(frame + b"\x00") is None


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_corrupt_frames_get_a_typed_error_or_a_request(data):
    frame = bytearray(request_frame(data.draw(VERSIONS), 1, [("t", uuid.uuid4(), [(0,) * 6])]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(8, len(frame) - 1))
        frame[at] = data.draw(st.integers(0, 255))
    try:
        got = decode_request(bytes(frame))
    except ProtocolError:
        return
    if type(got) is FollowerFetchFrame:
        assert got.body is not None  # the generic codec reads what the engine accepted


# ---- the leader's answer, read either way ----

ME, FOLLOWER, OTHER = 1, 2, 3
TOPIC_ID = uuid.uuid4()


def _batch(n: int) -> bytes:
    return logstore.encode_batch([(b"k", b"v%d" % i, [], 1_700_000_000_000) for i in range(n)])


def _apis(logs):
    manager = ReplicaManager(ME, lambda topic: 1, MockTime())
    partition = manager.make_leader("t", 0, logs("t-0"), 0, [ME, FOLLOWER], [ME, FOLLOWER])
    manager.append_records(1000, 1, [("t", [(0, _batch(3), None)])], lambda r: None)
    partition.make_leader(2, [ME, FOLLOWER], [ME, FOLLOWER])
    manager.append_records(1000, 1, [("t", [(0, _batch(2), None)])], lambda r: None)
    manager.make_leader("t", 1, logs("t-1"), 0, [ME, FOLLOWER], [ME, FOLLOWER])
    state = SimpleNamespace(leader=OTHER, leader_epoch=4)
    node = SimpleNamespace(id=OTHER, host="b3", port=9093, rack=None)
    cache = SimpleNamespace(
        by_id=lambda tid: SimpleNamespace(name="t") if tid == TOPIC_ID else None,
        partition_state=lambda topic, index: state,
        alive_nodes=lambda listener: [node],
    )
    return SimpleNamespace(
        metadata_cache=cache,
        replica_manager=manager,
        authorizer=None,
        metrics=None,
        fetch_sessions=FetchSessionCache(10),
        client_quotas=None,
        advertised_listener=lambda connection=None: None,
        config={},
    )


def _bytes(chunks) -> bytes:
    return b"".join(c.source.read() if isinstance(c, DeferredRecords) else bytes(c) for c in chunks)


def test_the_leader_answers_both_reads_with_the_same_bytes(logs):
    apis = _apis(logs)
    partitions = [
        (0, 2, 0, -1, 0, 1 << 20),  # records from the start
        (0, 2, 5, 2, 0, 1 << 20),  # caught up
        (0, 2, 5, 0, 0, 1 << 20),  # diverged: epoch 0 ends at 3
        (0, 1, 0, -1, 0, 1 << 20),  # an old leader epoch: FENCED_LEADER_EPOCH, a hint
        (0, 7, 0, -1, 0, 1 << 20),  # a newer one: UNKNOWN_LEADER_EPOCH
        (1, 0, 0, -1, 0, 1 << 20),  # another partition, empty
        (9, 0, 0, -1, 0, 1 << 20),  # not held here
    ]
    for version in range(12, ApiKey.FETCH.max_version + 1):
        topics = [("t", TOPIC_ID, partitions), ("gone", uuid.uuid4(), partitions[:1])]
        frame = request_frame(version, FOLLOWER, topics)
        fast, generic = decode_request(frame), read_request(frame, ApiKey.FETCH)
        assert type(fast) is FollowerFetchFrame
        handle_fetch(apis, generic, None)  # moves the high watermark: the next reads agree
        got = _bytes(handle_fetch(apis, fast, None))
        assert got == _bytes(handle_fetch(apis, generic, None)), version
        assert got == _bytes(handle_fetch(apis, fast, None))
        _, body = decode_response(got[4:], ApiKey.FETCH, version)
        t, gone = body.responses
        assert [p.error_code for p in t.partitions] == [0, 0, 0, 74, 75, 0, 3]
        assert len(t.partitions[0].records) == len(_batch(3)) + len(_batch(2))
        assert t.partitions[2].diverging_epoch.end_offset == 3
        assert t.partitions[3].current_leader.leader_id == OTHER
        assert gone.partitions[0].error_code == (3 if version < 13 else 100)
        assert [n.node_id for n in body.node_endpoints] == ([OTHER] if version >= 16 else [])


def test_a_parked_follower_fetch_is_answered_from_the_append_that_feeds_it(logs):
    """A follower's fetch with nothing to read returns a PendingResponse; the purgatory
    check after an append completes it with the bytes the generic long poll answers."""

    async def run():
        apis = _apis(logs)
        time = apis.replica_manager.time
        sent: list[bytes] = []
        waiting = [(0, 2, 5, 2, 0, 1 << 20)]  # caught up at the log end, 5
        for version in (12, 16):
            frame = request_frame(version, FOLLOWER, [("t", TOPIC_ID, waiting)])
            fast = decode_request(frame)
            pending = handle_fetch(apis, fast, None)
            assert type(pending) is PendingResponse
            pending.on_complete(lambda build: sent.append(_bytes(build())))
            generic = handle_fetch(apis, read_request(frame, ApiKey.FETCH), None)
            apis.replica_manager.append_records(
                1000, 1, [("t", [(0, _batch(1), None)])], lambda r: None
            )
            assert sent == []
            time.advance(0)  # the purgatory's check of the appended partition
            (got,) = sent
            assert got == _bytes(await generic)
            _, body = decode_response(got[4:], ApiKey.FETCH, version)
            assert len(body.responses[0].partitions[0].records) == len(_batch(1))
            sent.clear()
            waiting = [(0, 2, 6, 2, 0, 1 << 20)]
        # a connection lost meanwhile: nothing is built or sent
        frame = request_frame(12, FOLLOWER, [("t", TOPIC_ID, [(0, 2, 7, 2, 0, 1 << 20)])])
        pending = handle_fetch(apis, decode_request(frame), None)
        pending.on_complete(lambda build: sent.append(build()))
        pending.cancel()
        time.advance(1)
        assert sent == [] and apis.replica_manager.fetch_purgatory.watched() == 0

    asyncio.run(run())
