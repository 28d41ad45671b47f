"""A consumer group on the consumer protocol (KIP-848) survives the death of its
coordinator in a cluster of three real brokers and a real ZooKeeper.

Two confluent-kafka consumers with ``group.protocol=consumer`` share a topic's four
partitions and commit what they read while a producer keeps writing. The broker leading
the group's ``__consumer_offsets`` partition is SIGKILLed. The new leader loads the group
from its records: ConsumerGroupDescribe answers, from the new coordinator, the same group
epoch, assignment epoch, member epochs and assignments as before, and the consumers carry
on without a rebalance (no partition revoked or assigned after the first assignment). The
cluster checker finds every acknowledged record read and no duplicate or skipped one, and
no committed offset of the group goes backwards.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from broker_py.coordinator.group.group_metadata_records import partition_for
from broker_py.network.network_client import NetworkClient
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.consumer_group import ConsumerGroupDescribeRequest
from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.cluster.harness.workload import History, Producer
from tests.support.waiting import wait_until

OFFSETS_PARTITIONS = 6
OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": "3",
}
TOPIC = "cg-data"
PARTITIONS = 4
GROUP = "cg-failover"


@pytest.fixture
def cluster(request, tmp_path):
    c = Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=4000, overrides=OVERRIDES)
    with c, logs_on_failure(request, c, 80):
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        yield c


def _leader_of(c: Cluster, topic: str, partition: int, alive: set[int]) -> int:
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})

    def find() -> int | None:
        # Every topic's metadata: asking for one by name would let Metadata create it.
        try:
            leader = a.list_topics(timeout=5).topics[topic].partitions[partition].leader
        except Exception:  # noqa: BLE001 - not there yet, or metadata moving; ask again
            return None
        return leader if leader in alive else None

    return wait_until(find, 60, 0.2, f"a live leader of {topic}-{partition}")


def _describe(c: Cluster, broker: int) -> Any:
    """ConsumerGroupDescribe of GROUP as ``broker`` answers it."""

    async def go() -> Any:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "failover-test")
        try:
            body = ConsumerGroupDescribeRequest(
                group_ids=[GROUP], include_authorized_operations=False
            )
            response = await client.send(ApiKey.CONSUMER_GROUP_DESCRIBE, body, 10000, version=0)
            (group,) = response.groups
            return group
        finally:
            await client.close()

    return asyncio.run(go())


def _state(group: Any) -> dict[str, Any]:
    """What must not change across the failover."""
    return {
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": {
            m.member_id: (
                m.member_epoch,
                sorted(
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ),
                sorted(
                    (t.topic_name, p)
                    for t in m.target_assignment.topic_partitions
                    for p in t.partitions
                ),
            )
            for m in group.members
        },
    }


class GroupConsumer:
    """A consumer of GROUP on the consumer protocol that records its polls (for the
    checker), every assignment change and every commit it made."""

    def __init__(self, name: str, c: Cluster, history: History) -> None:
        self.name, self.history = name, history
        self.events: list[tuple[str, list[int]]] = []
        self.held: set[int] = set()
        self.commits: list[dict[int, int]] = []
        self.commit_errors: list[str] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.final = threading.Event()  # read up to the end offsets, then stop
        self.done_final = False
        self.consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap_servers,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def assigned(self) -> list[int]:
        """The partitions it holds, as its rebalance callbacks said (the client itself is
        only called from its own thread: a call from another one waits for its poll)."""
        return sorted(self.held)

    def _on_assign(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.events.append(("assign", sorted(tp.partition for tp in tps)))
        self.held |= {tp.partition for tp in tps}
        self.history.reset(self.name, [tp.partition for tp in tps])

    def _on_revoke(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        self.events.append(("revoke", sorted(tp.partition for tp in tps)))
        self.held -= {tp.partition for tp in tps}

    def _run(self) -> None:
        try:
            self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke)
            ends: dict[int, int] | None = None
            deadline = time.monotonic() + 180
            while not self.stop.is_set() and time.monotonic() < deadline:
                records: dict[int, list[tuple[int, str]]] = {}
                for m in self.consumer.consume(200, 0.3):
                    if m.error() is None:
                        records.setdefault(m.partition(), []).append(
                            (m.offset(), m.value().decode())
                        )
                if records:
                    self.history.poll(self.name, records)
                    self._commit()
                if self.final.is_set():
                    if ends is None:
                        ends = {
                            p: self.consumer.get_watermark_offsets(
                                TopicPartition(TOPIC, p), timeout=10
                            )[1]
                            for p in self.assigned()
                        }
                    positions = self.consumer.position([TopicPartition(TOPIC, p) for p in ends])
                    if all(tp.offset >= ends[tp.partition] for tp in positions):
                        self.done_final = True
                        return
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def _commit(self) -> None:
        try:
            committed = self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            self.commit_errors.append(str(e))
            return
        self.commits.append({tp.partition: tp.offset for tp in committed or [] if tp.offset >= 0})

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def test_a_consumer_group_carries_on_when_its_coordinator_dies(cluster):
    c = cluster
    c.create_topic(
        TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    history = History()
    producer = Producer("confluent-p", c.bootstrap_servers, TOPIC, history, PARTITIONS)
    stop_producing = threading.Event()
    producing = threading.Thread(
        target=producer.run, args=(100_000, 120, 0.005, 30, stop_producing), daemon=True
    )
    producing.start()
    consumers = [GroupConsumer(f"member-{i}", c, history) for i in range(2)]
    try:
        for consumer in consumers:
            consumer.thread.start()
        alive = {1, 2, 3}
        coordinator = _leader_of(
            c, "__consumer_offsets", partition_for(GROUP, OFFSETS_PARTITIONS), alive
        )

        def settled() -> dict[str, Any] | None:
            if sorted(p for k in consumers for p in k.assigned()) != list(range(PARTITIONS)):
                return None
            if not all(k.commits for k in consumers):
                return None
            state = _state(_describe(c, coordinator))
            members = state["members"].values()
            reconciled = state["group_epoch"] == state["assignment_epoch"] and all(
                epoch == state["assignment_epoch"] and assigned == target
                for epoch, assigned, target in members
            )
            return state if len(members) == 2 and reconciled else None

        before = wait_until(settled, 60, 0.5, "two members reconciled and committing")
        events_before = [list(k.events) for k in consumers]
        assert all(k.assigned() for k in consumers), "each member holds partitions"
        commits_before = sum(len(k.commits) for k in consumers)

        c.broker(coordinator).kill()
        alive.discard(coordinator)
        new = _leader_of(c, "__consumer_offsets", partition_for(GROUP, OFFSETS_PARTITIONS), alive)
        assert new != coordinator

        def reloaded() -> dict[str, Any] | None:
            try:
                group = _describe(c, new)
            except Exception:  # noqa: BLE001 - the new coordinator may still be loading
                return None
            return _state(group) if group.error_code == 0 else None

        after = wait_until(reloaded, 60, 0.5, "the new coordinator describing the group")
        assert after == before
        # The members carry on: they commit through the new coordinator.
        try:
            wait_until(
                lambda: sum(len(k.commits) for k in consumers) > commits_before + 4,
                60,
                0.5,
                "commits after the failover",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}: commit errors {[k.commit_errors[-3:] for k in consumers]}, "
                f"consumer errors {[k.error for k in consumers]}, "
                f"assignments {[k.events for k in consumers]}"
            ) from None
        time.sleep(3)  # records keep flowing after the failover
        stop_producing.set()
        producing.join(60)
        assert producer.error is None, producer.error
        for consumer in consumers:
            consumer.final.set()
        for consumer in consumers:
            consumer.thread.join(120)
            assert consumer.error is None, consumer.error
            assert consumer.done_final, f"{consumer.name} read to the end offsets"
        # Still the same group: no epoch moved, no partition changed hands.
        assert _state(_describe(c, new)) == before
        assert [k.events for k in consumers] == events_before
        # No committed offset went backwards.
        last: dict[int, int] = {}
        for consumer in consumers:
            for commit in consumer.commits:
                for p, offset in commit.items():
                    assert offset >= last.get(p, -1), (p, offset, last)
                    last[p] = offset
        history.final_reads_complete = True
        history.frozen = True
        result = history.check()
        assert result.ok, result.summary()
    finally:
        stop_producing.set()
        for consumer in consumers:
            consumer.close()
