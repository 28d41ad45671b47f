"""``logstore group describe`` of a share group (KIP-932) against a real broker with
group.share.enable=true: its type, epochs, members and assignments, and per partition
the share-partition start offset, log offsets and in-flight records; a classic group's
description is unchanged beside it; ``group list`` shows every group's type and state
and filters on types."""

from __future__ import annotations

import uuid

import pytest

from logstore.protocol.messages.consumer_group import ConsumerGroupHeartbeatRequest
from logstore.protocol.messages.share_group import ShareGroupHeartbeatRequest
from logstore.protocol.messages.share_group_offsets import AlterShareGroupOffsetsRequest as A
from tests.cli.conftest import Cli, table_rows, unique
from tests.cli.test_group import commit
from tests.cli.test_topic import produce
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("cli-share")),
        {"group.share.enable": "true", "offsets.topic.num.partitions": "2"},
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


@pytest.fixture(scope="module")
def logstore(cli_broker: BrokerProcess) -> Cli:
    return Cli(cli_broker.bootstrap)


def _beat(bootstrap: str, group: str, member: str, epoch: int, topics=None):
    response = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
        ),
        1,
    )
    assert response.error_code == 0
    return response


def test_describe_a_share_group(logstore: Cli, cli_broker) -> None:
    bootstrap = cli_broker.bootstrap
    topic, group = unique("kip932"), unique("sg")
    logstore("topic", "create", topic, "-p", "2")
    produce(bootstrap, topic, {0: 5})
    # Start offsets set while the group is empty: 2 on partition 0, 0 on partition 1.
    altered = wire_call(
        bootstrap,
        A(
            group_id=group,
            topics=[
                A.AlterShareGroupOffsetsRequestTopic(
                    topic_name=topic,
                    partitions=[
                        A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=2),
                        A.AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=0),
                    ],
                )
            ],
        ),
        0,
    )
    assert altered.error_code == 0
    member = str(uuid.uuid4())
    joined = _beat(bootstrap, group, member, 0, [topic])

    (d,) = logstore.json("group", "describe", group)
    assert (d["type"], d["state"], d["assignor"]) == ("share", "Stable", "simple")
    assert d["group_epoch"] == d["assignment_epoch"] == joined.member_epoch
    (m,) = d["members"]
    assert (m["member_id"], m["member_epoch"]) == (member, joined.member_epoch)
    assert m["partitions"] == [f"{topic}-0", f"{topic}-1"]
    assert m["subscribed_topics"] == [topic]
    rows = {p["partition"]: p for p in d["partitions"]}
    assert {
        k: (r["start_offset"], r["log_end_offset"], r["in_flight"]) for k, r in rows.items()
    } == {
        0: (2, 5, 3),
        1: (0, 0, 0),
    }
    assert all(r["members"] == 1 for r in rows.values())
    assert d["total_in_flight"] == 3

    text = logstore("group", "describe", group).stdout
    table = table_rows(text)
    assert ["TYPE", "share"] in table
    assert ["TOTAL-IN-FLIGHT", "3"] in table
    header = ["TOPIC", "PARTITION", "START-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET"]
    assert any(r[: len(header)] == header for r in table)
    assert [topic, "0", "2", "0", "5", "3", "1"] in table

    # Without a group name every listed group is described, the share group as such.
    every = {g["group"]: g for g in logstore.json("group", "describe")}
    assert every[group]["type"] == "share"

    _beat(bootstrap, group, member, -1)
    (empty,) = logstore.json("group", "describe", group)
    assert (empty["state"], empty["members"]) == ("Empty", [])
    assert [p["start_offset"] for p in empty["partitions"]] == [2, 0]


def test_list_shows_types_and_states(logstore: Cli, cli_broker) -> None:
    bootstrap = cli_broker.bootstrap
    topic = unique("types")
    logstore("topic", "create", topic)
    classic, consumer, share = unique("lc"), unique("lk"), unique("ls")
    commit(bootstrap, classic, {(topic, 0): 0})
    joined = wire_call(
        bootstrap,
        ConsumerGroupHeartbeatRequest(
            group_id=consumer,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        ),
        0,
    )
    assert joined.error_code == 0
    _beat(bootstrap, share, str(uuid.uuid4()), 0, [topic])

    mine = {classic, consumer, share}
    listed = {g["group"]: g for g in logstore.json("group", "list") if g["group"] in mine}
    assert {g: (r["type"], r["state"]) for g, r in listed.items()} == {
        classic: ("classic", "EMPTY"),
        consumer: ("consumer", listed[consumer]["state"]),
        share: ("share", "STABLE"),
    }
    assert listed[consumer]["state"] in {"STABLE", "ASSIGNING", "RECONCILING"}
    only = logstore.json("group", "list", "--type", "consumer")
    assert {g["group"] for g in only} & mine == {consumer}
    both = logstore.json("group", "list", "--type", "SHARE", "--type", "classic")
    assert {g["group"] for g in both} & mine == {classic, share}
    table = table_rows(logstore("group", "list").stdout)
    assert table[0] == ["GROUP", "TYPE", "STATE"]
    assert [share, "share", "STABLE"] in table and [classic, "classic", "EMPTY"] in table
