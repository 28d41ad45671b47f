"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932)
on the wire against a broker alone with group.share.enable=true: start offsets set on an
empty (or missing) share group and read back, refused while the group has members,
deleted per topic, and the errors for unknown topics, partitions and groups."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_py.coordinator.group.modern.share import record_serde as share_serde
from broker_py.coordinator.group.modern.share.records import (
    ShareStatePartitionsRecord,
    ShareStatePartitionsTombstone,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.group_admin import DeleteGroupsRequest, ListGroupsRequest
from logstore.protocol.messages.share_group import ShareGroupHeartbeatRequest
from logstore.protocol.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.waiting import wait_until

ZERO = uuid.UUID(int=0)
D = DescribeShareGroupOffsetsRequest
A = AlterShareGroupOffsetsRequest
X = DeleteShareGroupOffsetsRequest


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("share-offsets")),
        {"group.share.enable": "true", "offsets.topic.num.partitions": "2"},
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _describe(bootstrap: str, group: str, topics: dict[str, list[int]] | None):
    request = D(
        groups=[
            D.DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=None
                if topics is None
                else [
                    D.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                    for t, p in topics.items()
                ],
            )
        ]
    )
    (described,) = wire_call(bootstrap, request, 0).groups
    return described


def _starts(described) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, error code)."""
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.error_code)
        for t in described.topics
        for p in t.partitions
    }


def _alter(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            A.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    return wire_call(
        bootstrap,
        A(
            group_id=group,
            topics=[
                A.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                for t, p in topics.items()
            ],
        ),
        0,
    )


def _altered(response) -> dict[tuple[str, int], int]:
    return {
        (t.topic_name, p.partition_index): p.error_code
        for t in response.responses
        for p in t.partitions
    }


def _delete(bootstrap: str, group: str, topics: list[str]):
    return wire_call(
        bootstrap,
        X(
            group_id=group,
            topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics],
        ),
        0,
    )


def test_offsets_advertised(broker) -> None:
    versions = {
        k.api_key: (k.min_version, k.max_version)
        for k in wire_call(broker.bootstrap, ApiVersionsRequest(), 3).api_keys
    }
    assert versions[90] == versions[91] == versions[92] == (0, 0)


def test_alter_describe_delete_start_offsets(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = _name("so-t"), _name("so-g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)

    # Nothing written yet: -1 for every partition, and for a topic that does not exist.
    described = _describe(bootstrap, group, {topic: [0, 1, 99], "no-such-topic": [0]})
    assert described.error_code == 0
    assert _starts(described) == {
        (topic, 0): (-1, 0),
        (topic, 1): (-1, 0),
        (topic, 99): (-1, 0),
        ("no-such-topic", 0): (-1, 0),
    }
    assert {t.topic_name: t.topic_id for t in described.topics}["no-such-topic"] == ZERO

    # Alter on a group that does not exist creates it, empty.
    altered = _alter(
        bootstrap, group, {(topic, 0): 5, (topic, 1): 7, (topic, 9): 1, ("no-such-topic", 0): 1}
    )
    assert altered.error_code == 0
    assert _altered(altered) == {
        (topic, 0): 0,
        (topic, 1): 0,
        (topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert _starts(_describe(bootstrap, group, {topic: [0, 1]})) == {
        (topic, 0): (5, 0),
        (topic, 1): (7, 0),
    }
    listed = wire_call(bootstrap, ListGroupsRequest(), 5).groups
    assert [(g.group_type, g.group_state) for g in listed if g.group_id == group] == [
        ("share", "Empty")
    ]

    # With a member the group refuses both; describing all covers its initialized
    # partitions (those the alter set).
    member = str(uuid.uuid4())
    joined = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[topic]
        ),
        1,
    )
    assert joined.error_code == 0
    refused = _alter(bootstrap, group, {(topic, 0): 1})
    assert (refused.error_code, refused.responses) == (ErrorCode.NON_EMPTY_GROUP, [])
    assert _delete(bootstrap, group, [topic]).error_code == ErrorCode.NON_EMPTY_GROUP
    assert _starts(_describe(bootstrap, group, None)) == {(topic, 0): (5, 0), (topic, 1): (7, 0)}
    left = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1),
        1,
    )
    assert left.error_code == 0

    # Empty again: a second alter is not fenced by the first one's state epoch.
    assert _altered(_alter(bootstrap, group, {(topic, 0): 3})) == {(topic, 0): 0}
    assert _starts(_describe(bootstrap, group, {topic: [0]})) == {(topic, 0): (3, 0)}

    deleted = _delete(bootstrap, group, [topic, "no-such-topic"])
    assert deleted.error_code == 0
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (topic, 0),
        ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert _starts(_describe(bootstrap, group, {topic: [0, 1]})) == {
        (topic, 0): (-1, 0),
        (topic, 1): (-1, 0),
    }


def test_group_errors(broker) -> None:
    bootstrap = broker.bootstrap
    missing = _delete(bootstrap, _name("so-missing"), ["t"])
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        missing.error_message,
    )
    assert missing.error_message.endswith("not found.")
    assert _alter(bootstrap, "", {("t", 0): 1}).error_code == ErrorCode.INVALID_GROUP_ID
    assert _describe(bootstrap, "", None).error_code == ErrorCode.INVALID_GROUP_ID


def test_heartbeat_initializes_state_and_delete_groups_deletes_it(broker) -> None:
    """A member joining makes the coordinator initialize its subscribed partitions' state
    (ShareGroupStatePartitionMetadata, type 15, lists them as initialized, also after a
    restart); DeleteGroups of the empty group deletes that state."""
    bootstrap = broker.bootstrap
    topic, group = _name("so-init"), _name("so-init-g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    member = str(uuid.uuid4())
    joined = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[topic]
        ),
        1,
    )
    assert joined.error_code == 0
    # Answered once the state exists: initialized at start offset -1 (the leader applies
    # share.auto.offset.reset), and the group describes both partitions with no topics.
    assert _starts(_describe(bootstrap, group, None)) == {(topic, 0): (-1, 0), (topic, 1): (-1, 0)}
    left = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1),
        1,
    )
    assert left.error_code == 0
    assert _altered(_alter(bootstrap, group, {(topic, 0): 4, (topic, 1): 6})) == {
        (topic, 0): 0,
        (topic, 1): 0,
    }

    broker.restart()
    bootstrap = broker.bootstrap
    after = wait_until(
        lambda: (d := _describe(bootstrap, group, None)).error_code == 0 and d,
        message="the group's coordinator back",
    )
    assert _starts(after) == {(topic, 0): (4, 0), (topic, 1): (6, 0)}

    (deleted,) = wire_call(bootstrap, DeleteGroupsRequest(groups_names=[group]), 2).results
    assert deleted.error_code == 0
    wait_until(
        lambda: (
            _starts(_describe(bootstrap, group, {topic: [0, 1]}))
            == {(topic, 0): (-1, 0), (topic, 1): (-1, 0)}
        ),
        message="the deleted group's share state deleted",
    )
    assert _describe(bootstrap, group, None).topics == []


def _last_state_partitions(bootstrap: str, group: str):
    """The group's last ShareGroupStatePartitionMetadata record in __consumer_offsets."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": _name("reader"), "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics("__consumer_offsets", 10).topics["__consumer_offsets"]
        tps = [TopicPartition("__consumer_offsets", p, 0) for p in partitions.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, 10)[1] for tp in tps}
        consumer.assign(tps)
        last, left = None, {p for p, end in ends.items() if end > 0}

        def read_all() -> bool:
            nonlocal last
            for m in consumer.consume(100, 0.5):
                if m.error() is not None:
                    continue
                if m.offset() + 1 >= ends[m.partition()]:
                    left.discard(m.partition())
                record = share_serde.deserialize(m.key(), m.value())
                if isinstance(record, (ShareStatePartitionsRecord, ShareStatePartitionsTombstone)):
                    if record.group_id == group:
                        last = record
            return not left

        wait_until(read_all, message="__consumer_offsets read to its end")
        return last
    finally:
        consumer.close()


def test_a_deleted_topic_leaves_the_record(broker) -> None:
    bootstrap = broker.bootstrap
    kept, gone, group = _name("so-kept"), _name("so-gone"), _name("so-del-g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(kept, 1, 1), NewTopic(gone, 1, 1)]).values():
        f.result(15)
    member = str(uuid.uuid4())
    joined = wire_call(
        bootstrap,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[kept, gone]
        ),
        1,
    )
    assert joined.error_code == 0
    names = {t for t, _ in _starts(_describe(bootstrap, group, None))}
    assert names == {kept, gone}
    admin.delete_topics([gone])[gone].result(15)

    def forgotten():
        _describe(bootstrap, group, None)  # reads the metadata again
        record = _last_state_partitions(bootstrap, group)
        return record is not None and {n for n, _ in record.initialized.values()} == {kept}

    wait_until(forgotten, message="the deleted topic out of the group's record")
