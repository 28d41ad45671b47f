"""``logstore group ...`` against a real broker: lag checked against what was produced
and committed; seek checked by a consumer resuming where it was told."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cli.conftest import Cli, table_rows, unique
from tests.cli.test_topic import produce


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        c.close()


def first_offsets(
    bootstrap: str, group: str, topic: str, partitions: int, timeout: float = 30.0
) -> dict[int, int]:
    """The offset of the first record a member of ``group`` reads on each partition."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    c.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    return seen


def setup_group(logstore: Cli, bootstrap: str) -> tuple[str, str]:
    topic, group = unique("lag"), unique("g")
    logstore("topic", "create", topic, "-p", "2")
    produce(bootstrap, topic, {0: 10, 1: 6})
    commit(bootstrap, group, {(topic, 0): 7, (topic, 1): 2})
    return topic, group


def test_describe_lag(logstore: Cli, cli_broker) -> None:
    topic, group = setup_group(logstore, cli_broker.bootstrap)
    (described,) = logstore.json("group", "describe", group)
    assert (
        described["group"] == group and described["state"] == "EMPTY" and described["members"] == []
    )
    rows = {(p["topic"], p["partition"]): p for p in described["partitions"]}
    assert (
        rows[(topic, 0)]["current_offset"] == 7
        and rows[(topic, 0)]["log_end_offset"] == 10
        and rows[(topic, 0)]["lag"] == 3
    )
    assert (
        rows[(topic, 1)]["current_offset"] == 2
        and rows[(topic, 1)]["log_end_offset"] == 6
        and rows[(topic, 1)]["lag"] == 4
    )
    assert described["total_lag"] == 7

    text = logstore("group", "describe", group).stdout
    table = table_rows(text)
    assert ["TOTAL-LAG", "7"] in table
    assert [topic, "0", "7", "0", "10", "3", "-", "-", "-"] in table

    assert {"group": group, "state": "EMPTY", "simple": False} in logstore.json(
        "group", "list"
    ) or any(g["group"] == group for g in logstore.json("group", "list"))
    assert group in logstore("group", "list").stdout


def trim(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """Deletes the records of ``topic``-``partition`` before offset ``before``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        assert future.result(timeout=30).low_watermark == before


def test_lag_counts_uncommitted_partitions_from_the_log_start(logstore: Cli, cli_broker) -> None:
    topic, group = unique("unread"), unique("g")
    logstore("topic", "create", topic, "-p", "3")
    produce(cli_broker.bootstrap, topic, {0: 10, 1: 6, 2: 5})
    trim(cli_broker.bootstrap, topic, 2, 3)
    # An empty group that committed one partition: the others are wholly unread.
    commit(cli_broker.bootstrap, group, {(topic, 0): 7})
    (g,) = logstore.json("group", "describe", group)
    rows = {
        p["partition"]: (p["current_offset"], p["log_start_offset"], p["log_end_offset"], p["lag"])
        for p in g["partitions"]
    }
    assert rows == {0: (7, 0, 10, 3), 1: (None, 0, 6, 6), 2: (None, 3, 5, 2)}
    assert g["total_lag"] == 11
    table = table_rows(logstore("group", "describe", group).stdout)
    assert ["TOTAL-LAG", "11"] in table
    assert [topic, "2", "-", "3", "5", "2", "-", "-", "-"] in table

    # A member assigned partitions it has not committed: lag from the log start too.
    fresh = unique("g")
    c = Consumer(
        {
            "bootstrap.servers": cli_broker.bootstrap,
            "group.id": fresh,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 3 and time.monotonic() < deadline:
            c.poll(0.2)
        (g,) = logstore.json("group", "describe", fresh)
        assert g["state"] == "STABLE"
        assert [(p["partition"], p["current_offset"], p["lag"]) for p in g["partitions"]] == [
            (0, None, 10),
            (1, None, 6),
            (2, None, 2),
        ]
        assert all(p["member_id"] for p in g["partitions"]) and g["total_lag"] == 18
    finally:
        c.close()


def test_describe_every_group(logstore: Cli, cli_broker) -> None:
    _topic, first = setup_group(logstore, cli_broker.bootstrap)
    _topic, second = setup_group(logstore, cli_broker.bootstrap)
    listed = {g["group"] for g in logstore.json("group", "list")}
    for args in ((), ("--all",)):
        every = logstore.json("group", "describe", *args)
        assert isinstance(every, list) and {g["group"] for g in every} == listed
        assert {first, second} <= listed
        assert [g["total_lag"] for g in every if g["group"] in (first, second)] == [7, 7]
    text = logstore("group", "describe").stdout
    assert ["GROUP", first] in table_rows(text) and ["GROUP", second] in table_rows(text)
    both = logstore("group", "describe", "--all", first, check=False)
    assert both.returncode == 2 and "--all" in both.stderr


def test_describe_shows_members(logstore: Cli, cli_broker) -> None:
    topic, group = unique("members"), unique("g")
    logstore("topic", "create", topic, "-p", "2")
    produce(cli_broker.bootstrap, topic, {0: 3, 1: 3})
    c = Consumer(
        {
            "bootstrap.servers": cli_broker.bootstrap,
            "group.id": group,
            "client.id": "cli-test-member",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        (described,) = logstore.json("group", "describe", group)
        assert described["state"] == "STABLE"
        (member,) = described["members"]
        assert member["client_id"] == "cli-test-member"
        assert sorted(member["partitions"]) == [f"{topic}-0", f"{topic}-1"]
        assert {p["client_id"] for p in described["partitions"]} == {"cli-test-member"}
        # An active group cannot be moved.
        refused = logstore(
            "group", "seek", group, "--to", "start", "--topics", topic, "--execute", check=False
        )
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr
    finally:
        c.close()


def test_seek_dry_run_then_execute(logstore: Cli, cli_broker) -> None:
    topic, group = setup_group(logstore, cli_broker.bootstrap)
    plan = logstore.json("group", "seek", group, "--to", "start")
    assert plan["dry_run"] is True
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]] == [
        (0, 7, 0),
        (1, 2, 0),
    ]
    assert "Dry run" in logstore("group", "seek", group, "--to", "start").stdout
    # The dry run changed nothing.
    assert logstore.json("group", "describe", group)[0]["total_lag"] == 7

    done = logstore.json("group", "seek", group, "--to", "start", "--execute", check=False)
    assert all(p["error"] is None for p in done), done
    assert first_offsets(cli_broker.bootstrap, group, topic, 2) == {0: 0, 1: 0}

    logstore("group", "seek", group, "--to", "5", "--execute")
    offsets = {
        p["partition"]: p["current_offset"]
        for p in logstore.json("group", "describe", group)[0]["partitions"]
    }
    assert offsets == {0: 5, 1: 5}
    logstore("group", "seek", group, "--to", "-1", "--topics", f"{topic}:1", "--execute")
    assert first_offsets(cli_broker.bootstrap, group, topic, 2) == {0: 5, 1: 5}

    logstore("group", "seek", group, "--to", "end", "--execute")
    assert logstore.json("group", "describe", group)[0]["total_lag"] == 0


def test_seek_to_timestamp_and_to_group(logstore: Cli, cli_broker) -> None:
    topic, group = setup_group(logstore, cli_broker.bootstrap)
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cli_broker.bootstrap, topic, {0: 2, 1: 2})  # offsets 10, 11 and 6, 7 after the mark
    logstore("group", "seek", group, "--to", f"@{mark}", "--execute")
    offsets = {
        p["partition"]: p["current_offset"]
        for p in logstore.json("group", "describe", group)[0]["partitions"]
    }
    assert offsets == {0: 10, 1: 6}

    other = unique("copy")
    plan = logstore.json("group", "seek", other, "--to-group", group)
    assert [(p["partition"], p["new_offset"]) for p in plan["partitions"]] == [(0, 10), (1, 6)]
    logstore("group", "seek", other, "--to-group", group, "--execute")
    assert first_offsets(cli_broker.bootstrap, other, topic, 2) == {0: 10, 1: 6}

    usage = logstore("group", "seek", group, check=False)
    assert usage.returncode == 2 and "--to" in usage.stderr


def test_delete(logstore: Cli, cli_broker) -> None:
    _topic, group = setup_group(logstore, cli_broker.bootstrap)
    assert logstore.json("group", "delete", group, "--no-confirm") == [
        {"group": group, "error": None}
    ]
    assert group not in {g["group"] for g in logstore.json("group", "list")}
    again = logstore("group", "delete", group, "--no-confirm", check=False)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stdout
