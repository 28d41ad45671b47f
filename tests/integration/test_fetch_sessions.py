"""Incremental fetch sessions (KIP-227) against a real broker: raw Fetch requests
encoded by the broker's codec, and kafka-python, which fetches in sessions."""

from __future__ import annotations

import logging
import time
from threading import Timer

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from broker_py.server.fetch_session import NULL_UUID
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.messages.metadata import MetadataRequest
from tests.integration.clients import create_topic, topic_name, wire_call

V12, V13 = 12, 13


def fetch(
    bootstrap,
    session_id,
    epoch,
    parts=(),
    forget=(),
    topic="",
    topic_id=None,
    version=V12,
    max_wait_ms=0,
    max_bytes=1 << 20,
    partition_max_bytes=1 << 20,
):
    """A Fetch with ``parts`` as (partition, fetch_offset) and ``forget`` as partitions."""

    def topic_fields():
        return {"topic_id": topic_id} if version >= 13 else {"topic": topic}

    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchRequest.FetchTopic(
                **topic_fields(),
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=o,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for p, o in parts
                ],
            )
        ]
        if parts
        else [],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(**topic_fields(), partitions=list(forget))
        ]
        if forget
        else [],
        rack_id="",
    )
    return wire_call(bootstrap, body, version)


def partitions_of(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def produce(bootstrap, topic, partition, n=1, size=10):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"v" * size, key=str(i).encode(), partition=partition)
    assert p.flush(15) == 0


def test_a_session_sends_only_partitions_with_news(module_broker):
    b = module_broker.bootstrap
    topic = topic_name("sess")
    create_topic(b, topic, partitions=3)
    produce(b, topic, 0, n=2)

    full = fetch(b, 0, 0, parts=[(0, 0), (1, 0), (2, 0)], topic=topic)
    assert full.error_code == 0 and full.session_id != 0
    assert sorted(partitions_of(full)) == [0, 1, 2]
    assert partitions_of(full)[0].high_watermark == 2
    sid = full.session_id

    # Partition 0 read from offset 0 again returns its records again.
    again = fetch(b, sid, 1)
    assert list(partitions_of(again)) == [0] and len(partitions_of(again)[0].records) > 0
    # The client moves partition 0 past what it read: nothing is new anywhere.
    assert partitions_of(fetch(b, sid, 2, parts=[(0, 2)], topic=topic)) == {}
    quiet = fetch(b, sid, 3)
    assert (quiet.error_code, quiet.session_id, partitions_of(quiet)) == (0, sid, {})
    produce(b, topic, 2, n=3)
    news = partitions_of(fetch(b, sid, 4))
    assert list(news) == [2] and news[2].high_watermark == 3 and len(news[2].records) > 0


def test_an_incremental_long_poll_wakes_on_a_partition_only_the_session_names(module_broker):
    b = module_broker.bootstrap
    topic = topic_name("sess-poll")
    create_topic(b, topic, partitions=2)
    sid = fetch(b, 0, 0, parts=[(0, 0), (1, 0)], topic=topic).session_id
    assert sid != 0

    Timer(0.5, produce, (b, topic, 1)).start()
    start = time.monotonic()
    resp = fetch(b, sid, 1, max_wait_ms=10_000)
    assert time.monotonic() - start < 8
    assert list(partitions_of(resp)) == [1] and len(partitions_of(resp)[1].records) > 0


def test_session_errors_on_the_wire(module_broker):
    b = module_broker.bootstrap
    topic = topic_name("sess-err")
    create_topic(b, topic, partitions=2)
    sid = fetch(b, 0, 0, parts=[(0, 0), (1, 0)], topic=topic).session_id

    wrong = fetch(b, sid, 5)
    assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and wrong.responses == []
    assert fetch(b, sid, 1).error_code == 0, "a wrong epoch does not use up the right one"
    assert fetch(b, sid ^ 0x5A5A5A5A or 1, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(b, sid, 2, version=V13).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR

    # Forgetting every partition closes the session; so does a full request naming it.
    closed = fetch(b, sid, 2, forget=[0, 1], topic=topic)
    assert (closed.error_code, closed.session_id) == (0, 0)
    assert fetch(b, sid, 3).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    sid = fetch(b, 0, 0, parts=[(0, 0)], topic=topic).session_id
    final = fetch(b, sid, -1, parts=[(0, 0)], topic=topic)
    assert final.session_id == 0 and list(partitions_of(final)) == [0]
    assert fetch(b, sid, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_partitions_take_turns_under_max_bytes(module_broker):
    b = module_broker.bootstrap
    topic = topic_name("sess-fair")
    create_topic(b, topic, partitions=2)
    for p in (0, 1):
        produce(b, topic, p, n=1, size=2000)
    # max_bytes admits one batch per response; the partition that returned data goes last.
    full = fetch(b, 0, 0, parts=[(0, 0), (1, 0)], topic=topic, max_bytes=1)
    got = [p for p, d in partitions_of(full).items() if len(d.records or b"")]
    assert got == [0]
    sid = full.session_id
    resp = fetch(b, sid, 1, parts=[(0, 1)], topic=topic, max_bytes=1)
    assert [p for p, d in partitions_of(resp).items() if len(d.records or b"")] == [1]


def test_a_topic_id_session_reports_a_deleted_topic(module_broker):
    b = module_broker.bootstrap
    topic = topic_name("sess-del")
    create_topic(b, topic, partitions=1)
    meta = wire_call(
        b,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=NULL_UUID, name=topic)]
        ),
        12,
    )
    topic_id = meta.topics[0].topic_id
    sid = fetch(b, 0, 0, parts=[(0, 0)], topic_id=topic_id, version=V13).session_id
    assert sid != 0
    assert partitions_of(fetch(b, sid, 1, version=V13)) == {}
    admin = AdminClient({"bootstrap.servers": b})
    admin.delete_topics([topic])[topic].result(15)
    resp = fetch(b, sid, 2, version=V13)
    assert partitions_of(resp)[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_kafka_python_consumes_through_incremental_sessions(module_broker, caplog):
    from kafka import KafkaConsumer

    b = module_broker.bootstrap
    topic = topic_name("sess-kp")
    create_topic(b, topic, partitions=6)
    expected = set()
    for p in range(6):
        produce(b, topic, p, n=20)
        expected |= {(p, o) for o in range(20)}
    caplog.set_level(logging.DEBUG, logger="kafka.consumer.fetcher")
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=b,
        auto_offset_reset="earliest",
        group_id=None,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=300,
    )
    try:
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen |= {(r.partition, r.offset) for r in records}
            if seen >= expected:
                break
        assert seen == expected
        # More records while the session is open reach the consumer too.
        produce(b, topic, 4, n=5)
        more: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(more) < 5:
            for records in consumer.poll(timeout_ms=200).values():
                more |= {(r.partition, r.offset) for r in records}
        assert more == {(4, o) for o in range(20, 25)}
    finally:
        consumer.close()
    text = caplog.text
    assert "created a new incremental fetch session" in text
    assert "incremental fetch response for session" in text
    assert "invalid" not in text.lower()
