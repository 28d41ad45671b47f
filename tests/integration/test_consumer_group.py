"""Consumer groups against a real broker.

The main test drives three confluent-kafka members over a six-partition topic while a
producer writes continuously: assignments must be disjoint and complete, ownership of
a partition never overlaps in time between members (eager protocol: a member revokes
everything before the group moves on), one member leaves and another joins, every
produced record is consumed at least once with manual commits after processing, and
the committed offsets survive a broker restart. Smaller tests do the same with
kafka-python and aiokafka groups, and check that commit metadata round-trips.
"""

from __future__ import annotations

import asyncio
import threading
import time

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import topic_name
from tests.support.waiting import wait_until

GROUP_TIMEOUTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def create(bootstrap: str, name: str, partitions: int) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    wait_until(
        lambda: len(a.list_topics(name, timeout=5).topics[name].partitions) == partitions,
        message="metadata",
    )


# --- confluent-kafka -------------------------------------------------------------------


class BackgroundProducer(threading.Thread):
    """Writes records "<n>" round-robin over the partitions until stopped; keeps the
    delivery reports: (partition, offset) -> value."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.prefix = topic, partitions, prefix
        self.delivered: dict[tuple[int, int], bytes] = {}
        self.failed: list = []
        self.stop_event = threading.Event()
        self.n = 0

    def _cb(self, err, msg):
        if err is not None:
            self.failed.append(err)
        else:
            self.delivered[(msg.partition(), msg.offset())] = msg.value()

    def run(self) -> None:
        while not self.stop_event.is_set():
            for _ in range(6):
                self.p.produce(
                    self.topic,
                    value=b"%s-%d" % (self.prefix.encode(), self.n),
                    partition=self.n % self.partitions,
                    on_delivery=self._cb,
                )
                self.n += 1
            self.p.poll(0)
            time.sleep(0.01)  # about 500 records a second
        assert self.p.flush(30) == 0

    def finish(self) -> dict:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()
        assert not self.failed, self.failed
        assert len(self.delivered) == self.n
        return self.delivered


class Member(threading.Thread):
    """One group member: subscribes, records its assignments (with timestamps, from the
    rebalance callbacks) and every record it processes, and commits synchronously after
    each processed batch and before giving partitions up."""

    def __init__(
        self, name: str, bootstrap: str, group: str, topic: str, events: list, lock: threading.Lock
    ) -> None:
        super().__init__(daemon=True, name=name)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "partition.assignment.strategy": "range",
            **GROUP_TIMEOUTS,
        }
        self.topic = topic
        self.events, self.lock = events, lock
        self.assigned: frozenset = frozenset()
        self.consumed: list[tuple[float, int, int, bytes]] = []
        self.errors: list = []
        self.commit_failures: list = []
        self.stop_event = threading.Event()
        self.closed = threading.Event()

    def _event(self, kind: str, partitions) -> None:
        with self.lock:
            self.events.append(
                (time.monotonic(), self.name, kind, frozenset(p.partition for p in partitions))
            )

    def _commit(self, c: Consumer) -> None:
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                self.commit_failures.append(e.args[0])

    def on_assign(self, c, partitions) -> None:
        self._event("assign", partitions)
        self.assigned = frozenset(p.partition for p in partitions)

    def on_revoke(self, c, partitions) -> None:
        self._commit(c)
        self.assigned = frozenset()
        self._event(
            "revoke", partitions
        )  # recorded after the commit, just before librdkafka unassigns

    def run(self) -> None:
        c = Consumer(self.conf)
        c.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        try:
            while not self.stop_event.is_set():
                msgs = c.consume(200, 0.1)
                now = time.monotonic()
                for m in msgs:
                    if m.error():
                        self.errors.append(m.error())
                    else:
                        self.consumed.append((now, m.partition(), m.offset(), m.value()))
                if msgs:
                    self._commit(c)
        finally:
            c.close()  # revokes (committing) and leaves the group
            self.closed.set()

    def leave(self) -> None:
        self.stop_event.set()
        assert self.closed.wait(20), f"{self.name} did not close"
        self.join(10)


def _stable(members: list[Member], partitions: int) -> bool:
    sets = [m.assigned for m in members]
    return (
        all(sets)
        and sum(len(s) for s in sets) == partitions
        and frozenset().union(*sets) == frozenset(range(partitions))
    )


def _ownership_intervals(events: list) -> dict[str, list[tuple[float, float, frozenset]]]:
    """member -> [(assigned at, revoked at or +inf, partitions)]."""
    out: dict[str, list] = {}
    open_: dict[str, tuple[float, frozenset]] = {}
    for t, name, kind, parts in sorted(events, key=lambda e: e[0]):
        if kind == "assign":
            assert name not in open_, f"{name} assigned twice without a revoke (eager protocol)"
            open_[name] = (t, parts)
        else:
            start, held = open_.pop(name)
            assert parts == held, f"{name} revoked {sorted(parts)} but held {sorted(held)}"
            out.setdefault(name, []).append((start, t, held))
    for name, (start, held) in open_.items():
        out.setdefault(name, []).append((start, float("inf"), held))
    return out


def test_confluent_group_rebalances_without_loss_and_resumes_after_restart(broker):
    topic = topic_name("cg-main")
    group = topic_name("cg-group")
    create(broker.bootstrap, topic, 6)
    events: list = []
    lock = threading.Lock()
    producer = BackgroundProducer(broker.bootstrap, topic, 6, "a")
    producer.start()
    members = [Member(f"m{i}", broker.bootstrap, group, topic, events, lock) for i in range(3)]
    stable_sets = []
    try:
        for m in members:
            m.start()
        wait_until(
            lambda: _stable(members, 6), timeout=30, message="3 members sharing 6 partitions"
        )
        stable_sets.append({m.name: m.assigned for m in members})
        time.sleep(1.0)

        # One member leaves: the two others take over all six partitions.
        members[0].leave()
        live = members[1:]
        wait_until(lambda: _stable(live, 6), timeout=30, message="2 members sharing 6 partitions")
        stable_sets.append({m.name: m.assigned for m in live})
        time.sleep(1.0)

        # A new member joins.
        newcomer = Member("m3", broker.bootstrap, group, topic, events, lock)
        newcomer.start()
        members.append(newcomer)
        live = members[1:]
        wait_until(
            lambda: _stable(live, 6),
            timeout=30,
            message="3 members (with the newcomer) sharing 6 partitions",
        )
        stable_sets.append({m.name: m.assigned for m in live})
        time.sleep(1.0)

        delivered = producer.finish()
        assert len(delivered) > 100

        def consumed_all():
            got = {(p, o) for m in members for (_, p, o, _) in m.consumed}
            return set(delivered) <= got

        wait_until(consumed_all, timeout=30, message="every produced record consumed")
        # Everything processed is committed: the committed offsets reach the end.
        ends = {p: 1 + max(o for (pp, o) in delivered if pp == p) for p in range(6)}

        def committed_at_end():
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
            try:
                got = c.committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
                return {tp.partition: tp.offset for tp in got} == ends
            finally:
                c.close()

        wait_until(committed_at_end, timeout=20, interval=0.5, message=f"committed offsets {ends}")
    finally:
        producer.stop_event.set()
        for m in members:
            m.stop_event.set()
        for m in members:
            m.closed.wait(20)

    for m in members:
        assert not m.errors, (m.name, m.errors)
        assert not m.commit_failures or all(
            f.code()
            in (
                KafkaError.REBALANCE_IN_PROGRESS,
                KafkaError.ILLEGAL_GENERATION,
                KafkaError.UNKNOWN_MEMBER_ID,
            )
            for f in m.commit_failures
        ), (m.name, m.commit_failures)

    # Every stable assignment was a partition of the six partitions among the members.
    for s in stable_sets:
        assert sorted(p for parts in s.values() for p in parts) == list(range(6)), s
    # No partition was ever owned by two members at the same time.
    intervals = _ownership_intervals(events)
    flat = [(name, a, b, parts) for name, ivs in intervals.items() for (a, b, parts) in ivs]
    for i, (n1, a1, b1, p1) in enumerate(flat):
        for n2, a2, b2, p2 in flat[i + 1 :]:
            if n1 != n2 and a1 < b2 and a2 < b1:
                assert not (p1 & p2), (
                    f"{n1} and {n2} both owned {sorted(p1 & p2)} "
                    f"between {max(a1, a2):.3f} and {min(b1, b2):.3f}"
                )
    # Each member consumed only partitions it owned at the time.
    for m in members:
        for t, p, o, _ in m.consumed:
            assert any(a <= t <= b and p in parts for (a, b, parts) in intervals.get(m.name, [])), (
                m.name,
                p,
                o,
                t,
            )
    # Content: nothing consumed that was not produced; every record's value matches.
    consumed = {(p, o): v for m in members for (_, p, o, v) in m.consumed}
    assert consumed == delivered
    total = sum(len(m.consumed) for m in members)
    assert total - len(delivered) < len(delivered) // 2, f"{total - len(delivered)} duplicates"

    # Records produced after the commit, across a broker restart, are all a newcomer sees.
    after = BackgroundProducer(broker.bootstrap, topic, 6, "b")
    for _ in range(5):
        for _ in range(6):
            after.p.produce(
                topic, value=b"b-%d" % after.n, partition=after.n % 6, on_delivery=after._cb
            )
            after.n += 1
    assert after.p.flush(30) == 0
    broker.restart()
    for _ in range(3):
        for _ in range(6):
            after.p.produce(
                topic, value=b"b-%d" % after.n, partition=after.n % 6, on_delivery=after._cb
            )
            after.n += 1
    assert after.p.flush(30) == 0
    assert len(after.delivered) == 48 and not after.failed

    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **GROUP_TIMEOUTS,
        }
    )
    try:
        c.subscribe([topic])
        got: dict = {}
        deadline = time.monotonic() + 30
        while len(got) < 48:
            assert time.monotonic() < deadline, f"resumed consumer got {len(got)}/48"
            m = c.poll(0.2)
            if m is None:
                continue
            assert not m.error(), m.error()
            assert (m.partition(), m.offset()) not in delivered, (
                f"re-read committed record {m.partition()}/{m.offset()}"
            )
            got[(m.partition(), m.offset())] = m.value()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.1)
            assert m is None or m.error(), f"unexpected extra record {m.partition()}/{m.offset()}"
        assert got == after.delivered
        assert min(o for (p, o) in got if p == 0) == ends[0]
    finally:
        c.close()


def test_confluent_commit_metadata_round_trips(module_broker):
    topic = topic_name("cg-meta")
    group = topic_name("cg-meta-g")
    create(module_broker.bootstrap, topic, 2)
    c = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        c.commit(
            offsets=[
                TopicPartition(topic, 0, 5, metadata="hello"),
                TopicPartition(topic, 1, 7, metadata=""),
            ],
            asynchronous=False,
        )
        got = {
            tp.partition: (tp.offset, tp.metadata)
            for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        }
        assert got[0] == (5, "hello")
        assert got[1][0] == 7 and got[1][1] in ("", None)
        long = "x" * 3000
        c.commit(offsets=[TopicPartition(topic, 0, 6, metadata=long)], asynchronous=False)
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert (tp.offset, tp.metadata) == (6, long)
    finally:
        c.close()
    # Another client of the group sees the same.
    c = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": group})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert (tp.offset, tp.metadata) == (6, long)
    finally:
        c.close()
    a = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    groups = a.list_consumer_groups().result(10)
    assert group in {g.group_id for g in groups.valid}


# --- kafka-python ----------------------------------------------------------------------


def test_kafka_python_group(module_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.structs import OffsetAndMetadata

    topic = topic_name("cg-kp")
    group = topic_name("cg-kp-g")
    create(module_broker.bootstrap, topic, 4)
    events: list = []
    lock = threading.Lock()

    class KMember(threading.Thread):
        def __init__(self, name):
            super().__init__(daemon=True, name=name)
            self.assigned: frozenset = frozenset()
            self.consumed: list = []
            self.stop_event = threading.Event()
            self.failure = None

        def run(self):
            member = self
            c = KafkaConsumer(
                bootstrap_servers=module_broker.bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
                fetch_max_wait_ms=100,
            )

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked):
                    member.assigned = frozenset()
                    with lock:
                        events.append(
                            (
                                time.monotonic(),
                                member.name,
                                "revoke",
                                frozenset(tp.partition for tp in revoked),
                            )
                        )

                def on_partitions_assigned(self, assigned):
                    with lock:
                        events.append(
                            (
                                time.monotonic(),
                                member.name,
                                "assign",
                                frozenset(tp.partition for tp in assigned),
                            )
                        )
                    member.assigned = frozenset(tp.partition for tp in assigned)

            try:
                # Topic metadata before joining: otherwise the leader's first assignment is
                # empty and its metadata-triggered rejoin hits a kafka-python 3.0.12 race
                # (need_rejoin() turns False while its SyncGroup is in flight, a short
                # poll() then abandons the join: no assignment, heartbeats stay off).
                assert c.partitions_for_topic(topic) == {0, 1, 2, 3}
                c.subscribe([topic], listener=Listener())
                # poll() for up to 1 s: kafka-python 3.0.12 abandons a rejoin whose
                # SyncGroup outlives a poll() when need_rejoin() has meanwhile turned False
                # (the race above), and a busy host can stretch a SyncGroup past 100 ms.
                while not self.stop_event.is_set():
                    recs = c.poll(timeout_ms=1000)
                    for tp, rs in recs.items():
                        self.consumed.extend((tp.partition, r.offset, r.value) for r in rs)
                    if recs:
                        try:
                            c.commit()
                        except Exception as e:  # a rebalance may interrupt a commit
                            if (
                                "Rebalance" not in type(e).__name__
                                and "Generation" not in type(e).__name__
                                and "CommitFailed" not in type(e).__name__
                            ):
                                raise
            except Exception as e:  # noqa: BLE001  (reported by the test)
                self.failure = e
            finally:
                c.close()

    p = KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    members = [KMember("k0"), KMember("k1")]
    try:
        for m in members:
            m.start()
        try:
            wait_until(
                lambda: _stable(members, 4),
                timeout=30,
                message="2 kafka-python members sharing 4 partitions",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}; events {events}; failures {[m.failure for m in members]}; broker log:\n"
                f"{module_broker.log_text()[-3000:]}"
            ) from None
        first = [m.assigned for m in members]
        for i in range(40):
            p.send(topic, value=b"k-%d" % i, partition=i % 4)
        p.flush(30)
        wait_until(
            lambda: sum(len(m.consumed) for m in members) >= 40,
            timeout=30,
            message="40 records consumed",
        )
        members[0].stop_event.set()
        members[0].join(20)
        try:
            wait_until(
                lambda: members[1].assigned == frozenset(range(4)),
                timeout=30,
                message="survivor owns all 4 partitions",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}; events {events}; failures {[m.failure for m in members]}; broker log:\n"
                f"{module_broker.log_text()[-6000:]}"
            ) from None
        for i in range(40, 60):
            p.send(topic, value=b"k-%d" % i, partition=i % 4)
        p.flush(30)
        wait_until(
            lambda: (
                {v for m in members for (_, _, v) in m.consumed} >= {b"k-%d" % i for i in range(60)}
            ),
            timeout=30,
            message="all 60 consumed",
        )
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(20)
        p.close(timeout=10)
    assert all(m.failure is None for m in members), [m.failure for m in members]
    assert sorted(p for s in first for p in s) == [0, 1, 2, 3] and all(first)
    by_key = {}
    for m in members:
        for part, off, v in m.consumed:
            by_key.setdefault((part, off), set()).add(v)
    assert all(len(v) == 1 for v in by_key.values())
    assert sorted(by_key) == sorted((i % 4, i // 4) for i in range(60))

    c = KafkaConsumer(
        bootstrap_servers=module_broker.bootstrap, group_id=group, enable_auto_commit=False
    )
    try:
        assert {part: c.committed(KTP(topic, part)) for part in range(4)} == {
            part: 15 for part in range(4)
        }
        # Commit metadata round-trips (a consumer outside any generation may commit).
        c.commit({KTP(topic, 0): OffsetAndMetadata(12, "kp-meta", -1)})
        got = c.committed(KTP(topic, 0), metadata=True)
        assert (got.offset, got.metadata) == (12, "kp-meta")
    finally:
        c.close()


# --- aiokafka --------------------------------------------------------------------------


def test_aiokafka_group(module_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.admin import AIOKafkaAdminClient

    topic = topic_name("cg-ak")
    group = topic_name("cg-ak-g")
    create(module_broker.bootstrap, topic, 4)

    async def main():
        assigned: dict[str, frozenset] = {}

        def listener(name):
            class L(ConsumerRebalanceListener):
                async def on_partitions_revoked(self, revoked):
                    assigned[name] = frozenset()

                async def on_partitions_assigned(self, parts):
                    assigned[name] = frozenset(tp.partition for tp in parts)

            return L()

        def make(name):
            c = AIOKafkaConsumer(
                bootstrap_servers=module_broker.bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
                fetch_max_wait_ms=100,
            )
            c.subscribe([topic], listener=listener(name))
            return c

        consumed: dict[str, list] = {"a0": [], "a1": []}
        consumers = {"a0": make("a0"), "a1": make("a1")}
        stop = {n: asyncio.Event() for n in consumers}

        async def loop(name):
            c = consumers[name]
            await c.start()
            try:
                while not stop[name].is_set():
                    batch = await c.getmany(timeout_ms=100)
                    for tp, rs in batch.items():
                        consumed[name].extend((tp.partition, r.offset, r.value) for r in rs)
                    if batch:
                        try:
                            await c.commit()
                        except Exception as e:
                            if (
                                "Rebalance" not in type(e).__name__
                                and "CommitFailed" not in type(e).__name__
                                and "Generation" not in type(e).__name__
                            ):
                                raise
            finally:
                await c.stop()

        async def until(pred, timeout, what):
            deadline = time.monotonic() + timeout
            while not pred():
                assert time.monotonic() < deadline, f"timed out waiting for {what}: {assigned}"
                await asyncio.sleep(0.05)

        tasks = {n: asyncio.ensure_future(loop(n)) for n in consumers}
        p = AIOKafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
        await p.start()
        try:

            def stable(names):
                sets = [assigned.get(n, frozenset()) for n in names]
                return all(sets) and sorted(x for s in sets for x in s) == [0, 1, 2, 3]

            await until(lambda: stable(["a0", "a1"]), 30, "2 aiokafka members sharing 4 partitions")
            for i in range(40):
                await p.send(topic, value=b"a-%d" % i, partition=i % 4)
            await p.flush()
            await until(lambda: sum(len(v) for v in consumed.values()) >= 40, 30, "40 consumed")
            stop["a0"].set()
            await tasks["a0"]
            await until(
                lambda: assigned.get("a1") == frozenset(range(4)), 30, "survivor owns all 4"
            )
            for i in range(40, 60):
                await p.send(topic, value=b"a-%d" % i, partition=i % 4)
            await p.flush()
            await until(
                lambda: (
                    {v for vs in consumed.values() for (_, _, v) in vs}
                    >= {b"a-%d" % i for i in range(60)}
                ),
                30,
                "all 60 consumed",
            )
        finally:
            for n in consumers:
                stop[n].set()
            await asyncio.gather(*tasks.values(), return_exceptions=False)
            await p.stop()

        offsets = {(part, off) for vs in consumed.values() for (part, off, _) in vs}
        assert offsets == {(i % 4, i // 4) for i in range(60)}

        # Committed offsets, and commit metadata through the admin client.
        c = AIOKafkaConsumer(
            bootstrap_servers=module_broker.bootstrap, group_id=group, enable_auto_commit=False
        )
        await c.start()
        try:
            assert {part: await c.committed(ATP(topic, part)) for part in range(4)} == {
                part: 15 for part in range(4)
            }
        finally:
            await c.stop()
        c = AIOKafkaConsumer(
            bootstrap_servers=module_broker.bootstrap, group_id=group, enable_auto_commit=False
        )
        await c.start()
        try:
            c.assign([ATP(topic, 1)])
            await c.commit({ATP(topic, 1): (9, "ak-meta")})
        finally:
            await c.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
        await admin.start()
        try:
            got = await admin.list_consumer_group_offsets(group)
            assert (got[ATP(topic, 1)].offset, got[ATP(topic, 1)].metadata) == (9, "ak-meta")
            assert got[ATP(topic, 0)].offset == 15
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(main(), 120))
