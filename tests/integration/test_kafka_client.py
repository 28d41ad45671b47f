"""logstore.spark.kafka_client against a real broker process and against scripted fakes.

The real broker (confluent-kafka produces) covers partitions, offsets by
time, whole-batch fetches of compressed data and the typed errors.  A small
scripted broker (served with the same sans-IO codec) covers what the real one
never does: a trailing partial batch, aborted transactions, a wrong
correlation id, an ApiVersions downgrade, a silent broker, a moved leader.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import logstore
from logstore.protocol import ApiKey, ProduceFrame, Request, RequestDecoder, encode_response
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsResponse, api_versions_response
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.messages.metadata import MetadataResponse
from logstore.spark.kafka_client import (
    MAX_ATTEMPTS,
    BrokerUnavailable,
    KafkaClient,
    KafkaClientError,
    KafkaOffsetOutOfRange,
    KafkaProtocolError,
    NotLeaderOrFollower,
    UnknownTopicOrPartition,
    whole_batches,
)
from tests.integration.clients import topic_name
from tests.support.waiting import wait_until

BASE_TS = 1_700_000_000_000


# --- helpers ---------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    wait_until(
        lambda: len(admin.list_topics(name, timeout=5).topics[name].partitions) == partitions,
        message=f"metadata of {name}",
    )


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, int]], codec: str) -> None:
    """Produce (partition, value, timestamp) records, several per batch, with ``codec``."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": codec})
    errors = []
    for partition, value, ts in records:
        p.produce(
            topic,
            value=value,
            key=b"k%d" % ts,
            partition=partition,
            timestamp=ts,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert p.flush(30) == 0
    assert not errors, errors


def read_all(client: KafkaClient, topic: str, partition: int, start: int, end: int, max_bytes: int):
    """Fetch loop from ``start`` to ``end``: (offset, value) pairs and the batches seen."""
    out, batches = [], []
    offset = start
    for _ in range(10_000):
        if offset >= end:
            break
        data = client.fetch(topic, partition, offset, max_bytes)
        assert data, f"no data at {offset} < {end}"
        decoded = logstore.decode_batches(data, allow_partial=False)  # whole batches only
        assert sum(b.size for b in decoded) == len(data)
        assert decoded[0].base_offset <= offset <= decoded[0].last_offset
        batches += decoded
        out += [(r.offset, r.value) for b in decoded for r in b.records if r.offset >= offset]
        offset = decoded[-1].last_offset + 1
    return out, batches


@pytest.fixture(scope="module")
def filled(module_broker):
    """A 3-partition topic: partition p holds 60 records with timestamps BASE_TS + 10*i,
    written as batches of every codec (20 records per codec)."""
    name = topic_name("kc")
    create_topic(module_broker.bootstrap, name, 3)
    expected: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for c, codec in enumerate(["none", "lz4", "zstd"]):
        records = []
        for i in range(c * 20, c * 20 + 20):
            for p in range(3):
                value = (b"%s p%d i%03d " % (codec.encode(), p, i)) * 30
                records.append((p, value, BASE_TS + 10 * i))
                expected[p].append(value)
        produce(module_broker.bootstrap, name, records, codec)
    return name, expected


# --- against the real broker -----------------------------------------------------------


def test_partitions(module_broker, filled):
    name, _ = filled
    other = topic_name("kc-one")
    create_topic(module_broker.bootstrap, other, 1)
    with KafkaClient(module_broker.bootstrap, timeout_s=10) as client:
        everything = client.partitions()
        assert everything[name] == [0, 1, 2] and everything[other] == [0]
        assert not any(t.startswith("__") for t in everything)
        assert list(everything) == sorted(everything)
        assert client.partitions([other, name]) == {other: [0], name: [0, 1, 2]}
        assert client.partitions([]) == {}
        missing = topic_name("kc-missing")
        with pytest.raises(UnknownTopicOrPartition) as err:
            client.partitions([name, missing])
        assert err.value.errno == 3 and err.value.topic == missing
        # Not auto-created by asking.
        assert missing not in client.partitions()


def test_list_offset_earliest_latest_and_times(module_broker, filled):
    name, _ = filled
    with KafkaClient(module_broker.bootstrap, timeout_s=10) as client:
        for p in range(3):
            assert client.list_offset(name, p, -2) == 0
            assert client.list_offset(name, p, -1) == 60
            assert client.list_offset(name, p, 0) == 0
            assert client.list_offset(name, p, BASE_TS) == 0
            assert client.list_offset(name, p, BASE_TS + 10 * 25) == 25
            assert client.list_offset(name, p, BASE_TS + 10 * 25 + 1) == 26
            assert client.list_offset(name, p, BASE_TS + 10 * 59) == 59
            assert client.list_offset(name, p, BASE_TS + 10 * 59 + 1) == -1


def test_fetch_returns_whole_batches_of_every_codec(module_broker, filled):
    name, expected = filled
    with KafkaClient(module_broker.bootstrap, timeout_s=10) as client:
        for p in range(3):
            got, batches = read_all(client, name, p, 0, 60, max_bytes=1 << 20)
            assert got == list(enumerate(expected[p]))
            assert {b.compression for b in batches} == {"none", "lz4", "zstd"}
            assert len(batches) >= 3
        # A small max_bytes still yields whole batches: the first one even when larger.
        got, batches = read_all(client, name, 1, 0, 60, max_bytes=64)
        assert got == list(enumerate(expected[1]))
        assert any(b.size > 64 for b in batches)
        # From the middle of a compressed batch: that batch, starting before the offset.
        data = client.fetch(name, 1, 30)
        first = logstore.decode_batches(data)[0]
        assert first.compression == "lz4" and first.base_offset < 30 <= first.last_offset
        # At the end of the log: nothing yet.
        assert client.fetch(name, 1, 60) == b""


def test_fetch_errors(module_broker, filled):
    name, _ = filled
    with KafkaClient(module_broker.bootstrap, timeout_s=10) as client:
        with pytest.raises(KafkaOffsetOutOfRange) as err:
            client.fetch(name, 0, 61)
        assert (err.value.errno, err.value.topic, err.value.partition) == (1, name, 0)
        assert not err.value.retriable
        missing = topic_name("kc-missing")
        for call in (
            lambda: client.fetch(missing, 0, 0),
            lambda: client.list_offset(missing, 0, -1),
        ):
            with pytest.raises(UnknownTopicOrPartition) as err:
                call()
            assert err.value.errno == 3
        with pytest.raises(UnknownTopicOrPartition):
            client.fetch(name, 3, 0)
        with pytest.raises(ValueError):
            client.fetch(name, 0, -1)
        # Errors leave the client usable.
        assert client.list_offset(name, 0, -1) == 60


def test_fetch_below_log_start_is_out_of_range(module_broker):
    name = topic_name("kc-delrec")
    create_topic(module_broker.bootstrap, name, 1)
    produce(
        module_broker.bootstrap, name, [(0, b"v%d" % i, BASE_TS + i) for i in range(10)], "none"
    )
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    [future] = admin.delete_records([TopicPartition(name, 0, 4)]).values()
    assert future.result(15).low_watermark == 4
    with KafkaClient(module_broker.bootstrap, timeout_s=10) as client:
        assert client.list_offset(name, 0, -2) == 4
        with pytest.raises(KafkaOffsetOutOfRange):
            client.fetch(name, 0, 2)
        got, _ = read_all(client, name, 0, 4, 10, 1 << 20)
        assert got == [(i, b"v%d" % i) for i in range(4, 10)]


def test_broker_gone_raises_broker_unavailable_and_restart_recovers(broker):
    name = topic_name("kc-gone")
    produce(broker.bootstrap, name, [(0, b"x", BASE_TS)], "none")  # auto-created
    client = KafkaClient(broker.bootstrap, timeout_s=2)
    try:
        assert client.list_offset(name, 0, -1) == 1
        broker.kill()
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable) as err:
            client.fetch(name, 0, 0)
        assert time.monotonic() - started < 5
        assert err.value.retriable and err.value.errno is None
        broker.start()
        assert logstore.decode_batches(client.fetch(name, 0, 0))[0].records[0].value == b"x"
    finally:
        client.close()
    with pytest.raises(KafkaClientError):
        client.partitions()


def test_nothing_listening_raises_broker_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        started = time.monotonic()
        with (
            KafkaClient(f"127.0.0.1:{port}", timeout_s=2) as client,
            pytest.raises(BrokerUnavailable),
        ):
            client.partitions()
        assert time.monotonic() - started < 5


def test_bad_bootstrap_is_a_value_error():
    for bad in ("", "localhost", "host:port", "host:0", " , "):
        with pytest.raises(ValueError):
            KafkaClient(bad)


# --- against a scripted broker ---------------------------------------------------------


class ScriptedBroker:
    """A loopback server answering with the broker's codec; ``answer`` scripts it.

    ``answer(request)`` returns the response body, or ``None`` to stay silent.
    The default answers ApiVersions with the broker's ranges and Metadata with
    this server as node 1 and ``leader`` (node id, port; this server unless
    set) as the leader of partitions 0 and 1 of every asked topic.
    ``requests`` logs (api key, version, body) of every request received.
    """

    TOPIC_ID = uuid.UUID(int=7)

    def __init__(self) -> None:
        self.requests: list[tuple[ApiKey, int, object]] = []
        self.fetch_answers: list = []  # FetchResponse bodies, in order; the last one repeats
        self.correlation_offset = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.leader = (1, self.port)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedBroker:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self._listener.close()

    def answer(self, request: Request):
        if request.api_key is ApiKey.API_VERSIONS:
            return api_versions_response()
        if request.api_key is ApiKey.METADATA:
            leader_id, leader_port = self.leader
            brokers = [
                MetadataResponse.MetadataResponseBroker(node_id=node, host="127.0.0.1", port=port)
                for node, port in sorted({1: self.port, leader_id: leader_port}.items())
            ]
            partitions = [
                MetadataResponse.MetadataResponsePartition(
                    partition_index=p,
                    leader_id=leader_id,
                    replica_nodes=[leader_id],
                    isr_nodes=[leader_id],
                )
                for p in (0, 1)
            ]
            topics = [
                MetadataResponse.MetadataResponseTopic(
                    name=t.name, topic_id=self.TOPIC_ID, partitions=partitions
                )
                for t in request.body.topics or ()
            ]
            return MetadataResponse(brokers=brokers, controller_id=1, topics=topics)
        if request.api_key is ApiKey.FETCH:
            return (
                self.fetch_answers.pop(0) if len(self.fetch_answers) > 1 else self.fetch_answers[0]
            )
        raise AssertionError(f"unexpected {request.api_key.api_name}")

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = RequestDecoder()
        conn.settimeout(0.1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                decoder.receive_data(data)
                while (request := decoder.next_request()) is not None:
                    assert isinstance(request, (Request, ProduceFrame))
                    self.requests.append((request.api_key, request.api_version, request.body))
                    body = self.answer(request)
                    if body is not None:
                        corr = request.correlation_id + self.correlation_offset
                        with contextlib.suppress(OSError):
                            conn.sendall(
                                encode_response(corr, request.api_key, request.api_version, body)
                            )

    def fetches(self) -> list:
        return [body for key, _, body in self.requests if key is ApiKey.FETCH]


def fetch_answer(records: bytes, error: int = 0, aborted=None) -> FetchResponse:
    part = FetchResponse.PartitionData(
        partition_index=0,
        error_code=error,
        high_watermark=100,
        last_stable_offset=100,
        log_start_offset=0,
        aborted_transactions=[
            FetchResponse.AbortedTransaction(producer_id=p, first_offset=o)
            for p, o in aborted or []
        ],
        records=records,
    )
    topic = FetchResponse.FetchableTopicResponse(
        topic="t", topic_id=ScriptedBroker.TOPIC_ID, partitions=[part]
    )
    return FetchResponse(responses=[topic])


def batch(base_offset: int, count: int, **kwargs) -> bytes:
    records = [(None, b"value-%d" % (base_offset + i)) for i in range(count)]
    return logstore.encode_batch(records, base_offset=base_offset, timestamp_ms=BASE_TS, **kwargs)


def test_whole_batches_splits_at_the_last_complete_batch():
    a, b = batch(0, 2), batch(2, 3)
    assert whole_batches(a + b) == (a + b, None)
    assert whole_batches(a + b[:20]) == (a, len(b))
    assert whole_batches(a + b[:5]) == (a, None)
    assert whole_batches(b"") == (b"", None)
    with pytest.raises(KafkaProtocolError):
        whole_batches(b"\0" * 8 + b"\0\0\0\x05" + b"\0" * 5)


def test_trailing_partial_batch_is_dropped_and_a_large_first_batch_refetched():
    a, b, c = batch(0, 2), batch(2, 3), batch(5, 1)
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=5) as client:
        fake.fetch_answers = [fetch_answer(a + b + c[:30])]
        assert client.fetch("t", 0, 0) == a + b
        [request] = fake.fetches()
        assert (request.isolation_level, request.min_bytes, request.max_wait_ms) == (1, 1, 0)
        assert request.topics[0].topic_id == ScriptedBroker.TOPIC_ID  # Fetch 13+: by topic id
        assert request.topics[0].partitions[0].partition_max_bytes == 1 << 20

        fake.fetch_answers = [fetch_answer(a[:16]), fetch_answer(a + b[:16])]
        assert client.fetch("t", 0, 0, max_bytes=16) == a
        assert [f.topics[0].partitions[0].partition_max_bytes for f in fake.fetches()[1:]] == [
            16,
            len(a),
        ]


def test_aborted_transactions_are_dropped():
    committed = batch(0, 2)
    aborted = batch(2, 2, producer_id=7, producer_epoch=0, transactional=True)
    marker = logstore.encode_control_batch(0, producer_id=7, producer_epoch=0, base_offset=4)
    later = batch(5, 1, producer_id=7, producer_epoch=0, transactional=True)  # a new, committed txn
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=5) as client:
        fake.fetch_answers = [fetch_answer(committed + aborted + marker + later, aborted=[(7, 2)])]
        assert client.fetch("t", 0, 0) == committed + marker + later
        # A response of aborted data alone: the client reads on past it.
        fake.fetch_answers = [fetch_answer(aborted, aborted=[(7, 2)]), fetch_answer(marker + later)]
        assert client.fetch("t", 0, 2) == marker + later
        assert [f.topics[0].partitions[0].fetch_offset for f in fake.fetches()[1:]] == [2, 4]


def test_not_leader_refreshes_metadata_and_retries_a_bounded_number_of_times():
    data = batch(0, 1)
    not_leader = fetch_answer(b"", error=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=5) as client:
        fake.fetch_answers = [not_leader, fetch_answer(data)]
        assert client.fetch("t", 0, 0) == data
        assert sum(1 for key, _, _ in fake.requests if key is ApiKey.METADATA) == 2
        fake.fetch_answers = [not_leader]
        with pytest.raises(NotLeaderOrFollower) as err:
            client.fetch("t", 0, 0)
        assert err.value.errno == 6 and err.value.retriable
        assert len(fake.fetches()) == 2 + MAX_ATTEMPTS


def test_requests_follow_the_leader_from_broker_to_broker():
    first, second = batch(0, 1), batch(1, 1)
    not_leader = fetch_answer(b"", error=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    with (
        ScriptedBroker() as a,
        ScriptedBroker() as b,
        KafkaClient(a.bootstrap, timeout_s=5) as client,
    ):
        a.leader = (2, b.port)
        a.fetch_answers, b.fetch_answers = [not_leader], [fetch_answer(first)]
        assert client.fetch("t", 0, 0) == first
        assert (len(a.fetches()), len(b.fetches())) == (0, 1)
        # The leader moves back to node 1: node 2 says so, the client asks for metadata again.
        a.leader = (1, a.port)
        a.fetch_answers, b.fetch_answers = [fetch_answer(second)], [not_leader]
        assert client.fetch("t", 0, 1) == second
        assert (len(a.fetches()), len(b.fetches())) == (1, 2)
        assert [key for key, _, _ in b.requests if key is ApiKey.METADATA] == []


def test_wrong_correlation_id_is_a_protocol_error():
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=5) as client:
        fake.correlation_offset = 1
        with pytest.raises(KafkaProtocolError, match="correlation id"):
            client.partitions(["t"])


def test_silent_broker_times_out_as_broker_unavailable():
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=0.5) as client:
        fake.answer = lambda request: None
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable):
            client.partitions(["t"])
        assert time.monotonic() - started < 3


def test_api_versions_falls_back_to_the_brokers_highest():
    with ScriptedBroker() as fake, KafkaClient(fake.bootstrap, timeout_s=5) as client:
        served = fake.answer

        def old_api_versions(request):
            if request.api_key is ApiKey.API_VERSIONS and request.api_version > 2:
                return ApiVersionsResponse(
                    error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                    api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)
                    ],
                )
            if request.api_key is ApiKey.API_VERSIONS:
                ranges = {
                    ApiKey.API_VERSIONS: (0, 2),
                    ApiKey.METADATA: (0, 8),
                    ApiKey.FETCH: (4, 11),
                    ApiKey.LIST_OFFSETS: (1, 5),
                }
                return ApiVersionsResponse(
                    api_keys=[
                        ApiVersionsResponse.ApiVersion(
                            api_key=int(k), min_version=lo, max_version=hi
                        )
                        for k, (lo, hi) in ranges.items()
                    ]
                )
            return served(request)

        fake.answer = old_api_versions
        fake.fetch_answers = [fetch_answer(batch(0, 1))]
        assert client.partitions(["t"]) == {"t": [0, 1]}
        client.fetch("t", 0, 0)
        versions = [(key, version) for key, version, _ in fake.requests]
        assert versions[:2] == [
            (ApiKey.API_VERSIONS, ApiKey.API_VERSIONS.max_version),
            (ApiKey.API_VERSIONS, 2),
        ]
        assert (ApiKey.METADATA, 8) in versions and (ApiKey.FETCH, 11) in versions
