"""confluent-kafka 2.16's ShareConsumer (KIP-932) reading through ShareFetch and
ShareAcknowledge from a broker alone, with its defaults (share groups on) and a
one-partition topic: one consumer reads every record (implicit acknowledgement); three
consumers share the records, each delivered to one of them; in explicit mode a RELEASE is
redelivered and a REJECT is not; a SIGKILLed consumer's records are redelivered once their
lock expires; a record released every time stops at the delivery-count limit;
read_committed delivers no aborted record. On the wire: the share session's and the
partitions' errors, acquired ranges, and a session ending with the connection that opened
it (its records released at once); both APIs off with group.share.enable=false."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.protocol import RequestHeader, encode_request
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.share_fetch import ShareAcknowledgeRequest, ShareFetchRequest
from tests.integration.clients import incremental_alter_configs, read_response, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.processes import kill
from tests.support.waiting import wait_until

GROUP_CONFIG = 32  # IncrementalAlterConfigs resource type GROUP
LOCK_MS = 2000
DELIVERY_LIMIT = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share-consumer")),
        {
            "group.share.min.session.timeout.ms": "2000",
            "group.share.session.timeout.ms": "3000",
            "group.share.min.heartbeat.interval.ms": "500",
            "group.share.heartbeat.interval.ms": "500",
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
            "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        },
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_with(bootstrap: str, count: int) -> str:
    """A new one-partition topic holding values b'0'..b'count-1'."""
    topic = _name("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, str(i).encode())
    assert producer.flush(15) == 0
    return topic


def _group(bootstrap: str, lock_ms: int = 30000) -> str:
    group = _name("share-g")
    ops = [("share.auto.offset.reset", 0, "earliest")]
    if lock_ms != 30000:
        ops.append(("share.record.lock.duration.ms", 0, str(lock_ms)))
    assert incremental_alter_configs(bootstrap, GROUP_CONFIG, group, *ops) == (0, None)
    return group


def _consumer(bootstrap: str, group: str, topic: str, mode: str = "implicit") -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": mode,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _values(messages) -> list[int]:
    out = []
    for m in messages:
        assert m.error() is None, m.error()
        out.append(int(m.value()))
    return out


def test_one_consumer_reads_every_record(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 50)
    group = _group(bootstrap)
    consumer = _consumer(bootstrap, group, topic)
    seen: list[int] = []
    try:

        def all_read() -> bool:
            seen.extend(_values(consumer.poll(0.5)))
            return len(seen) >= 50

        wait_until(all_read, timeout=30, message="the share consumer to read 50 records")
    finally:
        consumer.close()
    assert sorted(seen) == list(range(50))


def test_three_consumers_share_the_records(broker) -> None:
    """Each record goes to exactly one of three consumers on one partition."""
    bootstrap = broker.bootstrap
    count = 60
    topic = _topic_with(bootstrap, count)
    group = _group(bootstrap)
    consumers = [_consumer(bootstrap, group, topic) for _ in range(3)]
    seen: list[list[int]] = [[], [], []]
    try:

        def all_read() -> bool:
            for i, consumer in enumerate(consumers):
                seen[i].extend(_values(consumer.poll(0.2)))
            return sum(map(len, seen)) >= count

        wait_until(all_read, timeout=40, message="three share consumers to read the records")
        for i, consumer in enumerate(consumers):  # nothing comes twice
            seen[i].extend(_values(consumer.poll(0.3)))
    finally:
        for consumer in consumers:
            consumer.close()
    everything = [v for values in seen for v in values]
    assert sorted(everything) == list(range(count))


def test_explicit_release_reject_and_the_delivery_limit(broker) -> None:
    """Offset 0 released once then accepted comes twice; offset 1 rejected comes once;
    offset 2 released every time comes group.share.delivery.count.limit times."""
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 3)
    group = _group(bootstrap)
    consumer = _consumer(bootstrap, group, topic, "explicit")
    deliveries: dict[int, list[int]] = {0: [], 1: [], 2: []}
    try:

        def handle(wait_s: float) -> None:
            for m in consumer.poll(wait_s):
                assert m.error() is None, m.error()
                offset = m.offset()
                deliveries[offset].append(m.delivery_count())
                if offset == 1:
                    kind = AcknowledgeType.REJECT
                elif offset == 0 and len(deliveries[0]) == 1 or offset == 2:
                    kind = AcknowledgeType.RELEASE
                else:
                    kind = AcknowledgeType.ACCEPT
                consumer.acknowledge(m, kind)

        def done() -> bool:
            handle(0.3)
            return len(deliveries[0]) == 2 and len(deliveries[2]) == DELIVERY_LIMIT

        wait_until(done, timeout=30, message="the released records to come back")
        for _ in range(4):  # nothing more comes
            handle(0.3)
        consumer.commit_sync(10)
    finally:
        consumer.close()
    assert deliveries == {0: [1, 2], 1: [1], 2: list(range(1, DELIVERY_LIMIT + 1))}


_HOLDER = """
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    got = [m.offset() for m in c.poll(0.5) if m.error() is None]
    if got:
        print(" ".join(map(str, got)), flush=True)
        break
sys.stdin.read()
"""


def test_a_killed_consumers_records_come_back_after_the_lock(broker) -> None:
    """A consumer SIGKILLed holding records: they go to another consumer once their
    acquisition lock (the group's share.record.lock.duration.ms) expires."""
    bootstrap = broker.bootstrap
    count = 20
    topic = _topic_with(bootstrap, count)
    group = _group(bootstrap, lock_ms=LOCK_MS)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, bootstrap, group, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        held = sorted(map(int, line.split()))
        assert held, "the holder acquired nothing"
    finally:
        kill(holder)
    consumer = _consumer(bootstrap, group, topic)
    counts: dict[int, int] = {}
    try:

        def all_read() -> bool:
            for m in consumer.poll(0.3):
                assert m.error() is None, m.error()
                counts[m.offset()] = m.delivery_count()
            return len(counts) >= count

        wait_until(all_read, timeout=30, message="the killed consumer's records to come back")
    finally:
        consumer.close()
    assert sorted(counts) == list(range(count))
    assert {o for o, c in counts.items() if c == 2} == set(held)


class _Wire:
    """One kept connection (a share session ends with the connection that opened it)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 0

    def call(self, body, version: int = 1):
        self.correlation_id += 1
        header = RequestHeader(
            api_key=int(body.API_KEY),
            api_version=version,
            correlation_id=self.correlation_id,
            client_id="logstore-tests",
        )
        self.sock.sendall(encode_request(header, body))
        correlation_id, response = read_response(self.sock, body.API_KEY, version)
        assert correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def _fetch(
    wire: _Wire, group: str, member: str, epoch: int, topics=(), acks=None, wait=0, min_bytes=1
):
    R = ShareFetchRequest
    parts: dict = {}
    for topic_id, index in topics:
        parts.setdefault(topic_id, []).append(R.FetchPartition(partition_index=index))
    for (topic_id, index), batches in (acks or {}).items():
        parts.setdefault(topic_id, []).append(
            R.FetchPartition(
                partition_index=index,
                acknowledgement_batches=[
                    R.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                    for f, la, t in batches
                ],
            )
        )
    body = R(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=wait,
        min_bytes=min_bytes,
        max_records=100,
        batch_size=100,
        topics=[R.FetchTopic(topic_id=t, partitions=p) for t, p in parts.items()],
        forgotten_topics_data=[],
    )
    return wire.call(body)


def _acquired(response, topic_id: uuid.UUID) -> list[tuple[int, int, int]]:
    (part,) = [p for t in response.responses for p in t.partitions if t.topic_id == topic_id]
    assert part.error_code == 0 and part.acknowledge_error_code == 0, part
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    response = wire_call(
        bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12
    )
    return response.topics[0].topic_id


def test_share_fetch_errors_on_the_wire(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 5)
    topic_id = _topic_id(bootstrap, topic)
    group, member = _group(bootstrap), str(uuid.uuid4())
    wire = _Wire(bootstrap)
    try:
        # No session yet; acknowledgements in an opening request; ShareAcknowledge at 0.
        assert _fetch(wire, group, member, 1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        opening_acks = _fetch(wire, group, member, 0, acks={(topic_id, 0): [(0, 0, [1])]})
        assert opening_acks.error_code == ErrorCode.INVALID_REQUEST
        ack = ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=0)
        assert wire.call(ack).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        # Opening: every record acquired, an unknown topic id answered per partition.
        unknown = uuid.uuid4()
        opened = _fetch(wire, group, member, 0, [(topic_id, 0), (unknown, 0)], wait=2000)
        assert opened.error_code == 0 and opened.acquisition_lock_timeout_ms == 30000
        answers = {
            (t.topic_id, p.partition_index): p for t in opened.responses for p in t.partitions
        }
        assert answers[(unknown, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        assert answers[(unknown, 0)].records == b""  # empty, never null, as Kafka's
        assert answers[(topic_id, 0)].records
        assert _acquired(opened, topic_id) == [(0, 4, 1)]
        # A wrong epoch; an acknowledgement past the window; then accept 0-1 and release
        # 2-4, which the same fetch acquires again (delivery count 2).
        wrong = _fetch(wire, group, member, 5)
        assert wrong.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        bad = _fetch(wire, group, member, 1, acks={(topic_id, 0): [(7, 8, [1])]})
        (bad_part,) = bad.responses[0].partitions
        assert bad_part.acknowledge_error_code == ErrorCode.INVALID_REQUEST
        acks = {(topic_id, 0): [(0, 4, [1, 1, 2, 2, 2])]}
        acked = _fetch(wire, group, member, 2, acks=acks, wait=2000)
        assert _acquired(acked, topic_id) == [(2, 4, 2)]
        # Epoch -1 closes the session and releases what the member holds.
        closing = ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=-1)
        assert wire.call(closing).error_code == 0
        assert _fetch(wire, group, member, 4).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        other = _fetch(wire, group, str(uuid.uuid4()), 0, [(topic_id, 0)], wait=2000)
        assert _acquired(other, topic_id) == [(2, 4, 3)]
    finally:
        wire.close()


def test_min_bytes_holds_the_fetch_until_the_log_has_them(broker) -> None:
    """A ShareFetch finding fewer than MinBytes acquires nothing and waits (Kafka's
    DelayedShareFetch): records appended meanwhile come in the same answer."""
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 3)
    topic_id = _topic_id(bootstrap, topic)
    group, member = _group(bootstrap), str(uuid.uuid4())
    wire = _Wire(bootstrap)
    try:
        opened = _fetch(wire, group, member, 0, [(topic_id, 0)], wait=5000)
        assert _acquired(opened, topic_id) == [(0, 2, 1)]
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        producer.produce(topic, b"3")
        assert producer.flush(15) == 0
        answers: list = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                _fetch(wire, group, member, 1, wait=20000, min_bytes=3000)
            )
        )
        waiting.start()
        for i in range(4, 14):  # about 4 KB in all
            producer.produce(topic, str(i).encode() + b"x" * 400)
        assert producer.flush(15) == 0
        waiting.join(30)
        ranges = _acquired(answers[0], topic_id)
        assert ranges[0][0] == 3 and ranges[-1][1] > 3, ranges
    finally:
        wire.close()


def test_a_fetch_answers_with_the_first_share_partition_loaded(broker) -> None:
    """As Kafka's initializing share-partitions: a fetch waiting for share-partitions to
    load answers with the first that has records; the next fetch reads the other."""
    bootstrap = broker.bootstrap
    topic = _name("share-two")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in (0, 1):
        for i in range(3):
            producer.produce(topic, str(i).encode(), partition=index)
    assert producer.flush(15) == 0
    topic_id = _topic_id(bootstrap, topic)
    group, member = _group(bootstrap), str(uuid.uuid4())
    wire = _Wire(bootstrap)
    try:
        both = [(topic_id, 0), (topic_id, 1)]
        answers = [_fetch(wire, group, member, 0, both, wait=5000)]
        answers.append(_fetch(wire, group, member, 1, wait=5000))
        got = [
            [
                (p.partition_index, a.first_offset, a.last_offset)
                for p in answer.responses[0].partitions
                for a in p.acquired_records
            ]
            for answer in answers
        ]
        assert len(got[0]) == len(got[1]) == 1, got
        assert sorted(got[0] + got[1]) == [(0, 0, 2), (1, 0, 2)]
    finally:
        wire.close()


def test_a_closed_connection_ends_its_share_session(broker) -> None:
    """As Kafka 4.1: the records a member acquired through a session come back as soon as
    the connection that opened the session closes, whatever their lock."""
    bootstrap = broker.bootstrap
    topic = _topic_with(bootstrap, 3)
    topic_id = _topic_id(bootstrap, topic)
    group, member = _group(bootstrap), str(uuid.uuid4())
    first = _Wire(bootstrap)
    try:
        opened = _fetch(first, group, member, 0, [(topic_id, 0)], wait=2000)
        assert _acquired(opened, topic_id) == [(0, 2, 1)]
    finally:
        first.close()
    second = _Wire(bootstrap)
    try:
        # The lock is 30 s: only the closed session can have released them.
        again = _fetch(second, group, str(uuid.uuid4()), 0, [(topic_id, 0)], wait=5000)
        assert _acquired(again, topic_id) == [(0, 2, 2)]
        # The old member's session is gone.
        stale = _fetch(second, group, member, 1)
        assert stale.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    finally:
        second.close()


def test_share_fetch_is_off_when_disabled(tmp_path) -> None:
    b = BrokerProcess(
        str(tmp_path), {"offsets.topic.num.partitions": "1", "group.share.enable": "false"}
    )
    b.start()
    try:
        versions = wire_call(b.bootstrap, ApiVersionsRequest(), 3).api_keys
        listed = {k.api_key: (k.min_version, k.max_version) for k in versions}
        assert listed[ApiKey.SHARE_FETCH] == listed[ApiKey.SHARE_ACKNOWLEDGE] == (1, 1)
        wire = _Wire(b.bootstrap)
        try:
            refused = _fetch(wire, "g", str(uuid.uuid4()), 0)
        finally:
            wire.close()
        assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
        ack = ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=1)
        assert wire_call(b.bootstrap, ack, 1).error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        assert b.stop() == 0, b.log_text()[-4000:]


def test_read_committed_delivers_no_aborted_record(broker) -> None:
    """share.isolation.level=read_committed: an aborted transaction's records are never
    delivered (archived), a committed one's are, and nothing past the last stable offset is;
    read_uncommitted (another group) delivers them all."""
    bootstrap = broker.bootstrap
    topic = _name("share-txn")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("tx")})
    producer.init_transactions(15)
    for values, commit in ((range(0, 3), True), (range(3, 6), False), (range(6, 8), True)):
        producer.begin_transaction()
        for i in values:
            producer.produce(topic, str(i).encode())
        producer.flush(15)  # in the log before the marker (an abort drops unsent records)
        (producer.commit_transaction if commit else producer.abort_transaction)(15)
    producer.begin_transaction()  # left open: past the last stable offset
    producer.produce(topic, b"8")
    producer.flush(15)
    committed, uncommitted = _group(bootstrap), _group(bootstrap)
    isolation = ("share.isolation.level", 0, "read_committed")
    assert incremental_alter_configs(bootstrap, GROUP_CONFIG, committed, isolation) == (0, None)
    for group, want in ((uncommitted, list(range(9))), (committed, [0, 1, 2, 6, 7])):
        consumer = _consumer(bootstrap, group, topic)
        seen: list[int] = []
        try:

            def read(seen=seen, consumer=consumer, want=want) -> bool:
                seen.extend(_values(consumer.poll(0.5)))
                return len(seen) >= len(want)

            wait_until(read, timeout=30, message=f"{group} to read {len(want)} records")
            seen.extend(_values(consumer.poll(1)))  # and nothing more
        finally:
            consumer.close()
        assert sorted(seen) == want
    producer.abort_transaction(15)
