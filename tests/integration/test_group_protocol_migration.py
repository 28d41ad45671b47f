"""Moving a group between the classic and consumer protocols online (issue 34 item 4)
against a real broker, with confluent-kafka 2.16 consumers.

A rolling upgrade: three consumers on ``group.protocol=classic`` read a topic while a
producer writes to it; one at a time each commits, closes and comes back with
``group.protocol=consumer`` (the first one's heartbeat turns the classic group into a
consumer group, the classic members are then served through JoinGroup/SyncGroup/
Heartbeat inside it), then back to classic one at a time (the last consumer-protocol
member leaving turns it back into a classic group). Again with librdkafka's
cooperative-sticky assignor, from the consumer protocol to classic members that revoke
incrementally inside the consumer group; that assignor keeps user data in its
assignments, so Kafka's rule refuses to upgrade the resulting classic group (its text
is checked). The group id and its commits are kept throughout: every record produced
is read, a record is read twice only where its commit had failed (at least once across
restarts), and committed offsets never go backwards.

A broker restarted after each conversion reloads the group as it was written: the
classic member inside the consumer group with its epoch and assignment, then the
classic group it went back to, and the commits. With
``group.consumer.migration.policy=disabled`` the broker refuses the upgrade as Kafka
does (GROUP_ID_NOT_FOUND with Kafka's text) and keeps a consumer group that only
classic members are left in.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_py.coordinator.group.modern.classic_member import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from logstore.protocol.messages.group import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from logstore.protocol.messages.group_admin import DescribeGroupsRequest
from logstore.protocol.messages.offset_commit import OffsetCommitRequest, OffsetFetchRequest
from tests.integration.clients import wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.waiting import wait_until

PARTITIONS = 6
CONSUMER_OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "1",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("migration")), dict(CONSUMER_OVERRIDES))
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _describe(bootstrap: str, group: str):
    response = wire_call(
        bootstrap,
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
        1,
    )
    return response.groups[0]


def _describe_classic(bootstrap: str, group: str):
    response = wire_call(bootstrap, DescribeGroupsRequest(groups=[group]), 5)
    return response.groups[0]


class Member:
    """One consumer process's client, polled by its own thread as an application would:
    reads, commits each record at once (a synchronous commit may wait for a rebalance,
    so each consumer has its own thread), remembers what it read and which commits
    failed."""

    def __init__(self, bootstrap, group, topic, protocol, reads, uncommitted, strategy="range"):
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            config.update(
                {
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 500,
                    "partition.assignment.strategy": strategy,
                }
            )
        self.protocol = protocol
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])
        self.reads = reads
        self.uncommitted = uncommitted
        # The partitions assigned, as the polling thread last saw them (the consumer is
        # only called from that thread).
        self.owned: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{protocol}")
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            msg = self.consumer.poll(0.05)
            try:
                self.owned = frozenset(tp.partition for tp in self.consumer.assignment())
            except KafkaException:
                self.owned = frozenset()
            if msg is None or msg.error():
                continue
            key = (msg.partition(), msg.offset())
            self.reads.append(key)
            try:
                self.consumer.commit(message=msg, asynchronous=False)
            except KafkaException:
                # At least once: a record whose commit failed may be read again.
                self.uncommitted.add(key)
        self.consumer.close()

    def partitions(self):
        return self.owned

    def close(self):
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive()


def _committed(bootstrap, group, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        c.close()


@pytest.mark.parametrize(
    ("strategy", "phases"),
    [
        # Classic members with the eager range assignor: up to consumer and back.
        ("range", ["classic", "consumer", "classic"]),
        # librdkafka's cooperative-sticky assignor: classic members join the consumer
        # group one at a time and revoke incrementally inside it, until it is classic.
        ("cooperative-sticky", ["consumer", "classic"]),
    ],
)
def test_rolling_restarts_between_protocols_keep_group_and_commits(broker, strategy, phases):
    bootstrap = broker.bootstrap
    topic, group = _name("migr"), _name("migr-group")
    _create(bootstrap, topic, PARTITIONS)

    produced: set[tuple[int, int]] = set()
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

        def delivered(err, msg):
            if err is None:
                produced.add((msg.partition(), msg.offset()))

        i = 0
        while not stop.is_set():
            p.produce(topic, str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered)
            p.poll(0)
            i += 1
            time.sleep(0.02)
        assert p.flush(15) == 0

    producer = threading.Thread(target=produce, name="producer")
    producer.start()
    reads: list[tuple[int, int]] = []
    uncommitted: set[tuple[int, int]] = set()
    members = [
        Member(bootstrap, group, topic, phases[0], reads, uncommitted, strategy) for _ in range(3)
    ]
    checkpoints: list[dict[int, int]] = []

    def settled():
        time.sleep(0.05)
        owned = [m.partitions() for m in members]
        every = [p for ps in owned for p in ps]
        return len(every) == PARTITIONS and len(set(every)) == PARTITIONS and all(owned)

    def restart(i, protocol):
        old = members[i]
        old.close()
        members[i] = Member(bootstrap, group, topic, protocol, reads, uncommitted, strategy)
        wait_until(settled, timeout=60, message=f"group settled after member {i} -> {protocol}")
        checkpoints.append(_committed(bootstrap, group, topic))

    try:
        wait_until(settled, timeout=60, message=f"{phases[0]} group settled")
        checkpoints.append(_committed(bootstrap, group, topic))
        epoch = 0
        for protocol in phases[1:]:
            for i in range(3):
                restart(i, protocol)
                described = _describe(bootstrap, group)
                if protocol == "classic" and i == 2:
                    # The last consumer-protocol member left: a classic group again.
                    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND
                    continue
                assert described.error_code == 0
                assert described.group_epoch >= epoch
                epoch = described.group_epoch
                # Members 0..i restarted on ``protocol`` (1: consumer, 0: classic).
                new, old = (1, 0) if protocol == "consumer" else (0, 1)
                types = sorted(m.member_type for m in described.members)
                assert types == sorted([new] * (i + 1) + [old] * (2 - i))
        classic = _describe_classic(bootstrap, group)
        assert classic.group_state == "Stable"
        assert classic.protocol_type == "consumer"
        assert classic.protocol_data == strategy
        assert len(classic.members) == 3
        if strategy == "cooperative-sticky":
            # librdkafka's sticky assignor keeps user data in every assignment, which a
            # consumer group would lose: Kafka refuses to upgrade such a group.
            refused = _consumer_join(bootstrap, group, topic, str(uuid.uuid4()))
            assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
            assert "an unsupported custom assignor is in use" in refused.error_message

        stop.set()
        producer.join(30)
        assert not producer.is_alive()

        def drained():
            time.sleep(0.05)
            return produced <= set(reads)

        wait_until(drained, timeout=60, message="every produced record read")
    finally:
        stop.set()
        producer.join(30)
        for m in members:
            m.close()

    # Nothing lost; a record read twice only where its commit had failed.
    assert produced <= set(reads)
    seen: set[tuple[int, int]] = set()
    for key in reads:
        assert key not in seen or key in uncommitted, f"record {key} read twice"
        seen.add(key)
    # Commits survived both conversions and never went backwards.
    checkpoints.append(_committed(bootstrap, group, topic))
    for before, after in zip(checkpoints, checkpoints[1:]):
        for p in range(PARTITIONS):
            assert after[p] >= before[p], (p, checkpoints)
    last = max((o for p, o in produced if p == 0), default=-1)
    assert checkpoints[-1][0] == last + 1


@pytest.fixture(scope="module")
def disabled_broker(tmp_path_factory):
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("migration-disabled")),
        {**CONSUMER_OVERRIDES, "group.consumer.migration.policy": "disabled"},
    )
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()[-4000:]


def _classic_join(bootstrap, group, topic, member_id=""):
    return wire_call(
        bootstrap,
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=encode_subscription([topic], version=1)
                )
            ],
        ),
        7,
    )


def _consumer_join(bootstrap, group, topic, member_id):
    return wire_call(
        bootstrap,
        ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        ),
        1,
    )


def test_disabled_policy_refuses_the_upgrade_and_keeps_a_consumer_group(disabled_broker):
    bootstrap = disabled_broker.bootstrap
    topic, group = _name("dis"), _name("dis-group")
    _create(bootstrap, topic, 2)

    # A classic group with a member: a consumer-protocol member may not join it.
    member_id = _classic_join(bootstrap, group, topic).member_id
    joined = _classic_join(bootstrap, group, topic, member_id)
    assert joined.error_code == 0
    refused = _consumer_join(bootstrap, group, topic, str(uuid.uuid4()))
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.error_message == (
        f"Cannot upgrade classic group {group} to consumer group because online upgrade "
        "is disabled."
    )

    # A consumer group that a classic member joins stays one when the consumer member
    # leaves: no downgrade.
    group2 = _name("dis-group")
    cm = str(uuid.uuid4())
    assert _consumer_join(bootstrap, group2, topic, cm).error_code == 0
    first = _classic_join(bootstrap, group2, topic)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    inside = _classic_join(bootstrap, group2, topic, first.member_id)
    assert inside.error_code == 0
    assert inside.protocol_type == "consumer" and inside.protocol_name == "range"
    left = wire_call(
        bootstrap,
        ConsumerGroupHeartbeatRequest(group_id=group2, member_id=cm, member_epoch=-1),
        1,
    )
    assert left.error_code == 0
    described = _describe(bootstrap, group2)
    assert described.error_code == 0
    assert [(m.member_id, m.member_type) for m in described.members] == [(first.member_id, 0)]


@pytest.fixture
def restartable_broker(tmp_path):
    b = BrokerProcess(str(tmp_path), dict(CONSUMER_OVERRIDES))
    b.start()
    yield b
    b.kill()


def _commit(bootstrap, group, topic, member_id, generation, offset, version=7):
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata=""
                    )
                ],
            )
        ],
    )
    (t,) = wire_call(bootstrap, body, version).topics
    return t.partitions[0].error_code


def _fetched(bootstrap, group, topic):
    body = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group, member_id=None, member_epoch=-1, topics=None
            )
        ],
        require_stable=False,
    )
    (g,) = wire_call(bootstrap, body, 9).groups
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


def _after_restart(broker, call):
    """``call()`` once the restarted broker has loaded the group (bounded)."""

    def ready():
        result = call()
        code = getattr(result, "error_code", 0)
        return (
            None
            if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
            else result
        )

    return wait_until(ready, timeout=30, message="group loaded after restart")


def test_a_migrated_group_survives_restarts(restartable_broker):
    b = restartable_broker
    topic, group = _name("rst"), _name("rst-group")
    _create(b.bootstrap, topic, 2)

    # A classic group: one member, leader, assigns itself both partitions; it commits.
    a = _classic_join(b.bootstrap, group, topic).member_id
    joined = _classic_join(b.bootstrap, group, topic, a)
    assert joined.error_code == 0 and joined.leader == a
    mine = encode_assignment({topic: [0, 1]}, 1)
    synced = wire_call(
        b.bootstrap,
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=a,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=a, assignment=mine)],
        ),
        3,
    )
    assert synced.error_code == 0
    assert _commit(b.bootstrap, group, topic, a, joined.generation_id, 5) == 0

    # A consumer-protocol member joins: the group is upgraded; a keeps its partitions.
    cm = str(uuid.uuid4())
    assert _consumer_join(b.bootstrap, group, topic, cm).error_code == 0
    before = _describe(b.bootstrap, group)
    assert before.error_code == 0
    by_type = {m.member_type: m for m in before.members}
    assert by_type[0].member_id == a and by_type[0].member_epoch == joined.generation_id

    b.restart()
    after = _after_restart(b, lambda: _describe(b.bootstrap, group))
    assert after.error_code == 0
    assert after.group_epoch == before.group_epoch
    assert sorted((m.member_id, m.member_type, m.member_epoch) for m in after.members) == sorted(
        (m.member_id, m.member_type, m.member_epoch) for m in before.members
    )
    # The classic member is still served as one: its heartbeat at its epoch is known.
    beat = wire_call(
        b.bootstrap,
        HeartbeatRequest(group_id=group, generation_id=by_type[0].member_epoch, member_id=a),
        3,
    )
    assert beat.error_code in (0, ErrorCode.REBALANCE_IN_PROGRESS)
    assert _fetched(b.bootstrap, group, topic)[(topic, 0)] == 5

    # The consumer member leaves: the group is classic again, and stays so on restart.
    left = wire_call(
        b.bootstrap,
        ConsumerGroupHeartbeatRequest(group_id=group, member_id=cm, member_epoch=-1),
        1,
    )
    assert left.error_code == 0
    assert _describe(b.bootstrap, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    b.restart()
    classic = _after_restart(b, lambda: _describe_classic(b.bootstrap, group))
    assert classic.error_code == 0
    assert classic.protocol_type == "consumer"
    assert [m.member_id for m in classic.members] == [a]
    assert decode_assignment(classic.members[0].member_assignment).partitions.keys() <= {topic}
    assert _describe(b.bootstrap, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert _fetched(b.bootstrap, group, topic)[(topic, 0)] == 5
