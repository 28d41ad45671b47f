"""Consumer groups on the consumer protocol (KIP-848) against a real broker, with
confluent-kafka 2.16 consumers set to ``group.protocol=consumer``: a member reads and
commits; a second member joins and the partitions split with none held by both; a
partition added to the topic is assigned; a member that closes leaves its partitions to
the other; a SIGKILLed member is dropped after the session timeout; a regex subscription
picks up a topic created later; a regex new to the group is resolved after the heartbeat
that brings it (its topics come on a later heartbeat, as Kafka 4). On the wire:
ConsumerGroupDescribe (members, epochs, assignments), ListGroups with its type filter,
DescribeGroups (Dead, as Kafka 4 shows a consumer group there), OffsetCommit /
OffsetFetch v9 fenced by member epoch, DeleteGroups.

The broker runs with short group.consumer.* timeouts (within their bounds) so that
sessions expire and heartbeats come quickly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from logstore.protocol.messages.group_admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from logstore.protocol.messages.offset_commit import OffsetCommitRequest, OffsetFetchRequest
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support import processes
from tests.support.waiting import wait_until

SESSION_MS = 3000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("cgp")),
        {
            "group.consumer.min.session.timeout.ms": "2000",
            "group.consumer.session.timeout.ms": str(SESSION_MS),
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "500",
            "offsets.topic.num.partitions": "3",
        },
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int, records: int = 0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    if records:
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(records):
            p.produce(topic, f"{topic}:{i}".encode(), partition=i % partitions)
        assert p.flush(15) == 0


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def _describe(bootstrap: str, group: str):
    response = wire_call(
        bootstrap,
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        1,
    )
    (described,) = response.groups
    return described


def _owned(described) -> dict[str, set[tuple[str, int]]]:
    """member id -> its assigned (topic, partition)s."""
    return {
        m.member_id: {
            (tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions
        }
        for m in described.members
    }


def _settled(bootstrap: str, group: str, consumers: list[Consumer], members: int, total: int):
    """Polls the consumers until the group is Stable with ``members`` members holding
    ``total`` partitions between them, none twice; returns the last description."""

    def check():
        for c in consumers:
            c.poll(0.1)
        d = _describe(bootstrap, group)
        owned = _owned(d)
        every = [tp for tps in owned.values() for tp in tps]
        if (
            d.error_code == 0
            and d.group_state == "Stable"
            and len(owned) == members
            and len(every) == total
            and len(set(every)) == total
        ):
            return d
        return None

    return wait_until(check, timeout=30, message=f"{members} members holding {total} partitions")


def _read(consumer: Consumer, count: int) -> list[bytes]:
    got: list[bytes] = []

    def more():
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
        return len(got) >= count

    wait_until(more, timeout=30, message=f"{count} records")
    return got


def _commit(bootstrap: str, group: str, member_id: str, epoch: int, topic: str, version: int = 9):
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=1, committed_metadata=""
                    )
                ],
            )
        ],
    )
    (t,) = wire_call(bootstrap, body, version).topics
    return t.partitions[0].error_code


def _fetch(bootstrap: str, group: str, member_id: str | None, epoch: int):
    body = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group, member_id=member_id, member_epoch=epoch, topics=None
            )
        ],
        require_stable=False,
    )
    (g,) = wire_call(bootstrap, body, 9).groups
    return g


def test_member_reads_commits_and_is_fenced_by_epoch(broker):
    bootstrap = broker.bootstrap
    topic, group = _name("cgp-read"), _name("g-read")
    _create(bootstrap, topic, 3, records=10)
    c = _consumer(bootstrap, group)
    c.subscribe([topic])
    try:
        values = _read(c, 10)
        assert sorted(values) == sorted(f"{topic}:{i}".encode() for i in range(10))
        c.commit(asynchronous=False)

        d = _settled(bootstrap, group, [c], 1, 3)
        (member,) = d.members
        assert member.member_epoch > 0 and member.member_epoch == d.group_epoch
        assert d.assignment_epoch == d.group_epoch and d.assignor_name == "uniform"
        assert member.subscribed_topic_names == [topic] and member.member_type == 1
        target = {
            (tp.topic_name, p)
            for tp in member.target_assignment.topic_partitions
            for p in tp.partitions
        }
        assert target == {(topic, p) for p in range(3)}

        # Commits and fetches are fenced by the member epoch.
        mid, epoch = member.member_id, member.member_epoch
        assert _commit(bootstrap, group, mid, epoch - 1, topic) == ErrorCode.STALE_MEMBER_EPOCH
        assert _commit(bootstrap, group, "nobody", epoch, topic) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _commit(bootstrap, group, mid, epoch, topic, 8) == ErrorCode.UNSUPPORTED_VERSION
        assert _fetch(bootstrap, group, mid, epoch + 1).error_code == ErrorCode.STALE_MEMBER_EPOCH
        fetched = _fetch(bootstrap, group, mid, epoch)
        assert fetched.error_code == 0
        offsets = {
            (t.name, p.partition_index): p.committed_offset
            for t in fetched.topics
            for p in t.partitions
        }
        assert sum(offsets.values()) == 10 and set(offsets) == {(topic, p) for p in range(3)}
        assert _commit(bootstrap, group, mid, epoch, topic) == ErrorCode.NONE

        # The group in the admin APIs.
        listed = wire_call(bootstrap, ListGroupsRequest(types_filter=["consumer"]), 5).groups
        assert [(g.group_type, g.protocol_type) for g in listed if g.group_id == group] == [
            ("consumer", "consumer")
        ]
        classic = wire_call(bootstrap, ListGroupsRequest(types_filter=["classic"]), 5).groups
        assert group not in {g.group_id for g in classic}
        (old,) = wire_call(bootstrap, DescribeGroupsRequest(groups=[group]), 5).groups
        assert (old.error_code, old.group_state, old.members) == (0, "Dead", [])
        (refused,) = wire_call(bootstrap, DeleteGroupsRequest(groups_names=[group]), 2).results
        assert refused.error_code == ErrorCode.NON_EMPTY_GROUP
    finally:
        c.close()
    (deleted,) = wire_call(bootstrap, DeleteGroupsRequest(groups_names=[group]), 2).results
    assert deleted.error_code == ErrorCode.NONE
    gone = _describe(bootstrap, group)
    assert gone.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert _fetch(bootstrap, group, None, -1).topics == []


def test_members_split_partitions_grow_and_one_leaves(broker):
    bootstrap = broker.bootstrap
    topic, group = _name("cgp-split"), _name("g-split")
    _create(bootstrap, topic, 4)
    c1, c2 = _consumer(bootstrap, group), _consumer(bootstrap, group)
    c1.subscribe([topic])
    try:
        first = _settled(bootstrap, group, [c1], 1, 4)
        c2.subscribe([topic])
        split = _settled(bootstrap, group, [c1, c2], 2, 4)
        assert split.group_epoch > first.group_epoch
        assert sorted(len(tps) for tps in _owned(split).values()) == [2, 2]
        # The clients hold what the coordinator says, none twice.
        wait_until(
            lambda: (
                [c.poll(0.1) for c in (c1, c2)]
                and len(c1.assignment()) == 2
                and len(c2.assignment()) == 2
            ),
            timeout=30,
            message="both clients assigned",
        )
        held = [(tp.topic, tp.partition) for c in (c1, c2) for tp in c.assignment()]
        assert sorted(held) == [(topic, p) for p in range(4)]

        # Partitions added to a subscribed topic are assigned.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)
        grown = _settled(bootstrap, group, [c1, c2], 2, 6)
        assert sorted(len(tps) for tps in _owned(grown).values()) == [3, 3]

        c2.close()
        alone = _settled(bootstrap, group, [c1], 1, 6)
        assert alone.group_epoch > grown.group_epoch
    finally:
        c1.close()
        c2.close()


def test_transactional_offsets_of_a_consumer_group(broker):
    bootstrap = broker.bootstrap
    topic, out, group = _name("cgp-txin"), _name("cgp-txout"), _name("g-tx")
    _create(bootstrap, topic, 1, records=3)
    _create(bootstrap, out, 1)
    c = _consumer(bootstrap, group)
    c.subscribe([topic])
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("tx")})
    try:
        _read(c, 3)
        p.init_transactions(15)
        p.begin_transaction()
        p.produce(out, b"processed")
        # TxnOffsetCommit carries the member id and epoch the consumer has now.
        p.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 3)], c.consumer_group_metadata(), 15
        )
        p.commit_transaction(15)
        wait_until(
            lambda: c.committed([TopicPartition(topic, 0)], timeout=5)[0].offset == 3,
            message="the transaction's offset",
        )
    finally:
        c.close()


def test_static_member_rejoins_without_a_rebalance(broker):
    bootstrap = broker.bootstrap
    topic, group = _name("cgp-static"), _name("g-static")
    _create(bootstrap, topic, 2)
    first = _consumer(bootstrap, group, **{"group.instance.id": "instance-1"})
    first.subscribe([topic])
    try:
        before = _settled(bootstrap, group, [first], 1, 2)
    finally:
        first.close()
    # A static member leaving keeps its place (epoch -2) for its session.
    (gone,) = _describe(bootstrap, group).members
    assert (gone.instance_id, gone.member_epoch) == ("instance-1", -2)
    second = _consumer(bootstrap, group, **{"group.instance.id": "instance-1"})
    second.subscribe([topic])
    try:
        after = _settled(bootstrap, group, [second], 1, 2)
        (member,) = after.members
        assert member.instance_id == "instance-1" and member.member_id != gone.member_id
        assert after.group_epoch == before.group_epoch
    finally:
        second.close()
    empty = wait_until(
        lambda: (d := _describe(bootstrap, group)).group_state == "Empty" and d,
        timeout=30,
        message="the static member's session to end",
    )
    assert empty.members == [] and empty.group_epoch > before.group_epoch


MEMBER_SCRIPT = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]])
    announced = False
    while True:
        c.poll(0.2)
        if c.assignment() and not announced:
            print("ASSIGNED", flush=True)
            announced = True
    """
)


def test_killed_member_is_dropped_after_its_session(broker):
    bootstrap = broker.bootstrap
    topic, group = _name("cgp-kill"), _name("g-kill")
    _create(bootstrap, topic, 4)
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, bootstrap, group, topic],
        stdout=subprocess.PIPE,
        env=processes.repo_env(),
    )
    c = _consumer(bootstrap, group)
    try:
        ready, out = processes.wait_for_output(proc, b"ASSIGNED", 30)
        assert ready, out
        c.subscribe([topic])
        both = _settled(bootstrap, group, [c], 2, 4)
        assert c.memberid() in _owned(both)
        processes.kill(proc)
        alone = _settled(bootstrap, group, [c], 1, 4)
        assert [m.member_id for m in alone.members] == [c.memberid()]
        assert alone.group_epoch > both.group_epoch
        wait_until(lambda: c.poll(0.1) or len(c.assignment()) == 4, timeout=30, message="takeover")
    finally:
        processes.kill(proc)
        c.close()


def test_regex_subscription_picks_up_a_new_topic(broker):
    bootstrap = broker.bootstrap
    prefix, group = _name("cgprx"), _name("g-rx")
    first, later = f"{prefix}-a", f"{prefix}-b"
    _create(bootstrap, first, 1, records=2)
    c = _consumer(bootstrap, group)
    c.subscribe([f"^{prefix}-.*"])
    try:
        assert sorted(_read(c, 2)) == [f"{first}:{i}".encode() for i in range(2)]
        d = _describe(bootstrap, group)
        # librdkafka sends its regex subscriptions as one alternation in parentheses.
        assert d.members[0].subscribed_topic_regex == f"(^{prefix}-.*)"
        _create(bootstrap, later, 2, records=4)
        assert sorted(_read(c, 4)) == [f"{later}:{i}".encode() for i in range(4)]
        _settled(bootstrap, group, [c], 1, 3)
    finally:
        c.close()


def test_new_regex_is_assigned_on_a_later_heartbeat(broker):
    """Kafka's asynchronous regex resolution (librdkafka's 0045_resubscribe_with_regex):
    the first response holds the topic named literally; the regex's topics are assigned
    by a later heartbeat, once the coordinator resolved the regex."""
    bootstrap = broker.bootstrap
    prefix, group = _name("cgpnr"), _name("g-nr")
    literal, matched = f"{prefix}-a", f"{prefix}-regex-b"
    _create(bootstrap, literal, 2)
    _create(bootstrap, matched, 8)

    def heartbeat(member_id: str, epoch: int, **kw):
        body = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, **kw
        )
        response = wire_call(bootstrap, body, 1)
        assert response.error_code == 0, response.error_message
        return response

    def assigned(response) -> int:
        return sum(len(tp.partitions) for tp in response.assignment.topic_partitions)

    member_id = uuid.uuid4().hex
    first = heartbeat(
        member_id,
        0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[literal],
        subscribed_topic_regex=f"^.*{prefix}-regex.*",
        topic_partitions=[],
    )
    assert first.member_epoch == 1 and assigned(first) == 2
    later = []

    def regex_topics_assigned() -> bool:
        r = heartbeat(member_id, later[-1].member_epoch if later else 1)
        later.append(r)
        return r.assignment is not None and assigned(r) == 10

    wait_until(regex_topics_assigned, timeout=15, interval=0.2, message="regex topics")
    assert later[-1].member_epoch == 2
    d = _describe(bootstrap, group)
    assert {tp.topic_name for tp in d.members[0].assignment.topic_partitions} == {
        literal,
        matched,
    }
