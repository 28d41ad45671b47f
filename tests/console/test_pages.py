"""The console's pages against a real broker process (the CLI tests' broker, with the
ACL authorizer on): the logic each page family runs, called directly. (The HTTP rules,
basic auth, form tokens and writes, are checked on the consoles of test_browser.py.)"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.cli.admin import BrokerError
from logstore.cli.connection import ClientOptions
from logstore.cli.group import committed
from logstore.console import groups, overview, records, security, topics
from logstore.console.kafka import Kafka
from tests.cli.conftest import cli_broker  # noqa: F401  (the module's broker)
from tests.support.waiting import wait_until

TOPIC = "orders"
RECORDS = 30  # 10 a partition


@pytest.fixture(scope="module")
def loaded(cli_broker):  # noqa: F811
    admin = AdminClient({"bootstrap.servers": cli_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(20)
    producer = Producer({"bootstrap.servers": cli_broker.bootstrap})
    stamps = []
    for i in range(RECORDS):
        stamps.append(int(time.time() * 1000))
        value = f'{{"n": {i}}}' if i % 2 else f"plain {i}"
        producer.produce(TOPIC, key=f"k{i}", value=value, partition=i % 3, headers=[("h", b"v")])
        producer.flush(10)
        time.sleep(0.002)
    return cli_broker, stamps


@pytest.fixture(scope="module")
def kafka(loaded):
    k = Kafka(ClientOptions(brokers=loaded[0].bootstrap, timeout=10))
    yield k
    k.close()


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def test_overview_lists_the_broker_up_and_the_cluster_healthy(kafka):
    data = overview.overview(kafka)
    assert [(b["up"], b["controller"]) for b in data["brokers"]] == [(True, True)]
    assert data["brokers"][0]["leads"] >= 3
    assert data["health"]["healthy"]


def test_topic_list_searches_and_sizes(kafka):
    rows = topics.topic_list(kafka, "RDER", False)
    assert [(r["name"], r["partitions"], r["replicas"]) for r in rows] == [(TOPIC, 3, 1)]
    assert rows[0]["size"] > 0
    assert topics.topic_list(kafka, "no-such", False) == []
    data = topics.topic(kafka, TOPIC)
    assert [(p["log_start_offset"], p["high_watermark"]) for p in data["partitions"]] == [
        (0, 10)
    ] * 3
    assert any(c["key"] == "cleanup.policy" for c in data["configs"])


def test_browse_newest_offset_timestamp_key_and_value(kafka, loaded):
    _, stamps = loaded
    newest = records.browse(kafka, records.Query(TOPIC, limit=4))
    assert [r.key for r in newest["records"]] == [b"k29", b"k28", b"k27", b"k26"]
    assert newest["scanned"] == 12  # the last 4 of each of the 3 partitions
    at = records.browse(kafka, records.Query(TOPIC, "offset", partition=1, offset=7, limit=10))
    assert [(r.partition, r.offset) for r in at["records"]] == [(1, 7), (1, 8), (1, 9)]
    assert at["records"][0].headers == [("h", b"v")]
    since = records.browse(kafka, records.Query(TOPIC, "timestamp", timestamp=stamps[20]))
    assert [r.key for r in since["records"]] == [f"k{i}".encode() for i in range(20, 30)]
    found = records.browse(kafka, records.Query(TOPIC, key="k13"))
    assert [(r.partition, r.offset, r.value) for r in found["records"]] == [(1, 4, b'{"n": 13}')]
    grep = records.browse(kafka, records.Query(TOPIC, "offset", contains="plain 2", limit=50))
    assert sorted(r.key for r in grep["records"]) == [b"k2", b"k20", b"k22", b"k24", b"k26", b"k28"]
    with pytest.raises(BrokerError, match="UNKNOWN_TOPIC_OR_PART"):
        records.browse(kafka, records.Query(TOPIC, partition=7))


def test_browsing_leaves_no_consumer_group_behind(kafka):
    records.browse(kafka, records.Query(TOPIC))
    admin = kafka.admin
    listed = admin.result(admin.client.list_consumer_groups(**admin.kwargs()), "list").valid
    assert not [g.group_id for g in listed if g.group_id.startswith("logstore-console")]


def test_reset_preview_changes_nothing_and_apply_needs_an_empty_group(kafka, loaded):
    bootstrap = loaded[0].bootstrap
    commit(bootstrap, "resettable", {0: 8, 1: 9, 2: 10})
    plan = groups.plan(kafka, "resettable", "start", "")
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan] == [
        (0, 8, 0),
        (1, 9, 0),
        (2, 10, 0),
    ]
    assert committed(kafka.admin, "resettable") == {(TOPIC, p): o for p, o in enumerate((8, 9, 10))}
    plan = groups.plan(kafka, "resettable", "3", f"{TOPIC}:1")
    assert [(r["partition"], r["new_offset"]) for r in plan] == [(1, 3)]
    groups.apply(kafka, "resettable", plan)
    assert committed(kafka.admin, "resettable")[(TOPIC, 1)] == 3
    data = groups.group(kafka, "resettable")
    assert data["state"] == "EMPTY"
    assert {p["partition"]: p["lag"] for p in data["partitions"]} == {0: 2, 1: 7, 2: 0}

    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "busy", "auto.offset.reset": "earliest"}
    )
    member.subscribe([TOPIC])
    try:
        wait_until(lambda: member.poll(0.2) is not None and bool(member.assignment()), 30, 0)
        busy_plan = groups.plan(kafka, "busy", "end", TOPIC)
        with pytest.raises(BrokerError) as refused:
            groups.apply(kafka, "busy", busy_plan)
        assert refused.value.kafka_error.code() == KafkaError.NON_EMPTY_GROUP
        listed = {r["group"]: r for r in groups.group_list(kafka)}
        assert listed["busy"]["members"] == 1 and listed["busy"]["state"] == "STABLE"
    finally:
        member.close()


def test_security_sections(kafka):
    data = security.security(kafka, None)
    for section in ("acls", "users", "configs", "quotas"):
        assert data[section]["error"] is None, data[section]
    assert data["broker"] in data["brokers"]
    assert any(c["key"] == "log.dirs" for c in data["configs"]["rows"])
