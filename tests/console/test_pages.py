"""The console's pages against a real broker process (the CLI tests' broker, with the
ACL authorizer on): the logic each page family runs, called directly. (The HTTP rules,
basic auth, form tokens and writes, are checked on the consoles of test_browser.py.)"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore.cli.admin import BrokerError
from logstore.cli.connection import ClientOptions
from logstore.cli.group import committed
from logstore.console import groups, overview, records, security, topics
from logstore.console.app import templates
from logstore.console.kafka import Kafka
from tests.cli.conftest import cli_broker  # noqa: F401  (the module's broker)
from tests.console.conftest import text_of
from tests.integration.clients import incremental_alter_configs
from tests.support.waiting import wait_until

TOPIC = "orders"
RECORDS = 30  # 10 a partition
GROUP_CONFIG = 32  # IncrementalAlterConfigs resource type GROUP


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


def render_group(data):
    page = templates().get_template("group.html")
    context = {"writes": False, "token": "t", "registry": None, "path": "/groups/x"}
    reset = {"to": "start", "topics": "", "rows": None, "applied": False}
    return text_of(page.render(g=data, chart="", reset=reset, message=None, **context))


def test_share_group_listed_described_and_sampled(kafka, loaded):
    """A share group (KIP-932) read by confluent-kafka's ShareConsumer: listed with its
    type, state and members; its page shows the member's assignment and, per partition,
    the start offset and the records in flight; the sampler charts those."""
    bootstrap = loaded[0].bootstrap
    group = "sharers"
    reset = ("share.auto.offset.reset", 0, "earliest")
    assert incremental_alter_configs(bootstrap, GROUP_CONFIG, group, reset) == (0, None)
    reader = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "share-reader"}
    )
    reader.subscribe([TOPIC])
    seen: list[tuple[int, int]] = []
    try:

        def all_read() -> bool:
            seen.extend((m.partition(), m.offset()) for m in reader.poll(0.5) if not m.error())
            return len(seen) >= RECORDS

        wait_until(all_read, 30, 0, "the share consumer to read every record")
        listed = {r["group"]: r for r in groups.group_list(kafka)}
        assert listed[group] == {
            "group": group,
            "type": "share",
            "state": "STABLE",
            "protocol": "simple",
            "members": 1,
        }
        data = groups.group(kafka, group)
        assert (data["type"], data["state"], data["assignor"]) == ("share", "STABLE", "simple")
        (member,) = data["members"]
        assert member["client_id"] == "share-reader"
        assert member["partitions"] == [f"{TOPIC}-{p}" for p in range(3)]
        page = render_group(data)
        assert "Start offsets and records in flight" in page and "share-reader" in page
        assert f"{TOPIC}-0, {TOPIC}-1, {TOPIC}-2" in page and "Reset offsets" not in page

        def started() -> bool:
            reader.poll(0.2)
            rows = groups.group(kafka, group)["partitions"]
            return len(rows) == 3 and all(p["start_offset"] >= 0 for p in rows)

        wait_until(started, 30, 0, "every share-partition's start offset set")
    finally:
        reader.close()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        producer.produce(TOPIC, key=f"late{i}", value="late", partition=0)
    assert producer.flush(10) == 0

    def settled() -> bool:
        d = groups.group(kafka, group)
        ends = [p["log_end_offset"] for p in d["partitions"]]
        return d["state"] == "EMPTY" and ends == [RECORDS // 3 + 4] + [RECORDS // 3] * 2

    wait_until(settled, 30, 0.2, "the group empty, the 4 new records seen")
    data = groups.group(kafka, group)
    assert data["members"] == []
    # in flight: from the start offset the group's coordinator answers to the log end
    for p in data["partitions"]:
        assert 0 <= p["start_offset"] <= p["log_end_offset"]
        assert p["in_flight"] == p["log_end_offset"] - p["start_offset"]
    total = sum(p["in_flight"] for p in data["partitions"])
    assert data["total_in_flight"] == total >= 4
    assert f"records in flight {total}" in render_group(data)
    assert kafka.sample()[f"lag:{group}"] == total  # its page opened: sampled from now on


def test_security_sections(kafka):
    data = security.security(kafka, None)
    for section in ("acls", "users", "configs", "quotas"):
        assert data[section]["error"] is None, data[section]
    assert data["broker"] in data["brokers"]
    assert any(c["key"] == "log.dirs" for c in data["configs"]["rows"])
