"""``logstore group describe`` of a group on the consumer protocol (KIP-848), against a
real broker with two confluent-kafka consumers (``group.protocol=consumer``): its type,
epochs and assignor, and per member its epoch and assigned and pending partitions; a
classic group beside it is described as before, with type ``classic``."""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from tests.cli.conftest import Cli, table_rows, unique
from tests.cli.test_topic import produce
from tests.support.waiting import wait_until


def consumer(bootstrap: str, group: str, client_id: str, protocol: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
        }
    )


def test_describe_a_consumer_protocol_group(logstore: Cli, cli_broker) -> None:
    topic, group = unique("kip848"), unique("g")
    logstore("topic", "create", topic, "-p", "3")
    produce(cli_broker.bootstrap, topic, {0: 2, 1: 2, 2: 2})
    members = [consumer(cli_broker.bootstrap, group, f"cli-m{i}", "consumer") for i in (1, 2)]
    try:
        for c in members:
            c.subscribe([topic])

        def reconciled():
            for c in members:
                c.poll(0.2)
            (d,) = logstore.json("group", "describe", group)
            held = sorted(p for m in d["members"] for p in m["assigned"])
            done = (
                len(d["members"]) == 2
                and held == [f"{topic}-{p}" for p in range(3)]
                and all(not m["pending"] and not m["revoking"] for m in d["members"])
                and all(m["member_epoch"] == d["assignment_epoch"] for m in d["members"])
                and d["group_epoch"] == d["assignment_epoch"]
            )
            return d if done else None

        described = wait_until(reconciled, 60, 0.2, "two members holding every partition")
        assert described["type"] == "consumer"
        assert described["state"] == "Stable"
        assert described["assignor"] == "uniform"  # group.consumer.assignors' first
        assert described["group_epoch"] >= 2  # one bump per member joining
        by_client = {m["client_id"]: m for m in described["members"]}
        assert set(by_client) == {"cli-m1", "cli-m2"}
        for m in by_client.values():
            assert m["member_type"] == "consumer"
            assert m["instance_id"] is None
            assert m["subscribed_topics"] == [topic]
            assert m["target"] == m["assigned"] == m["partitions"] and m["assigned"]
            assert m["host"]
        # Per partition, the owner is the member confluent-kafka names.
        owners = {p["partition"]: p["client_id"] for p in described["partitions"]}
        assert set(owners.values()) == {"cli-m1", "cli-m2"}

        text = logstore("group", "describe", group).stdout
        rows = table_rows(text)
        assert ["TYPE", "consumer"] in rows
        assert ["GROUP-EPOCH", str(described["group_epoch"])] in rows
        assert ["ASSIGNMENT-EPOCH", str(described["assignment_epoch"])] in rows
        header = ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNED", "PENDING"]
        assert header in rows
        ids = {m["member_id"] for m in described["members"]}
        member_rows = {r[0]: r for r in rows if r[0] in ids}
        assert len(member_rows) == 2
        for m in described["members"]:
            row = member_rows[m["member_id"]]
            assert row[1] == "-" and row[2] == m["client_id"]
            assert row[4] == str(m["member_epoch"])
            assert row[5] == ",".join(m["assigned"]) and row[6] == "-"
    finally:
        for c in members:
            c.close()


def test_a_classic_group_is_described_as_classic(logstore: Cli, cli_broker) -> None:
    topic, group = unique("classic"), unique("g")
    logstore("topic", "create", topic, "-p", "1")
    produce(cli_broker.bootstrap, topic, {0: 1})
    c = consumer(cli_broker.bootstrap, group, "cli-classic", "classic")
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        (described,) = logstore.json("group", "describe", group)
        assert described["type"] == "classic"
        assert described["group_epoch"] is None and described["assignment_epoch"] is None
        (member,) = described["members"]
        assert member["client_id"] == "cli-classic" and member["partitions"] == [f"{topic}-0"]
        assert ["TYPE", "classic"] in table_rows(logstore("group", "describe", group).stdout)
    finally:
        c.close()
