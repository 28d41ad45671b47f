"""A hypothesis state machine over the controller: random broker deaths (hard and
controlled), returns, controller failovers, topic creation and deletion, ISR changes,
reassignments and elections on a simulated cluster, checking after every step:

- leader epochs only grow;
- a new leader comes from the previous ISR, unless the election was unclean;
- no two brokers lead a partition in one leader epoch (across every LeaderAndIsr sent,
  and in what the live brokers believe);
- every partition with a live ISR member among its replicas has a live leader;
- an ISR is never empty.
"""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_request_batch import LeaderAndIsrRequestData

from .sim import SimCluster

BROKERS = [1, 2, 3, 4]
TOPICS = ["a", "b", "c"]


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.c = SimCluster(len(BROKERS))
        # keyed by (topic id, partition): a topic deleted and created again is another
        self.max_epoch: dict = {}
        self.leader_of_epoch: dict = {}
        self.unclean_step = False
        self.checked_sent = 0
        self.checked_writes = 0

    # ---- helpers ----

    def states(self):
        admin = self.c.admin
        topics = admin.topic_assignments(admin.all_topics())
        tps = [TopicPartition(t, p) for t, a in topics.items() for p in a.partitions]
        return admin.partition_states(tps)

    def key(self, tp: TopicPartition):
        assignment = self.c.admin.topic_assignments([tp.topic]).get(tp.topic)
        return (None if assignment is None else assignment.topic_id, tp.partition)

    def dead(self) -> list[int]:
        return [b for b in BROKERS if b not in self.c.controllers]

    # ---- rules ----

    @precondition(lambda self: len(self.c.live()) > 1)
    @rule(data=st.data())
    def kill(self, data):
        b = data.draw(st.sampled_from(self.c.live()))
        self.c.kill(b)
        self.c.drain()

    @precondition(lambda self: len(self.c.live()) < len(BROKERS))
    @rule(data=st.data())
    def restart(self, data):
        b = data.draw(st.sampled_from(self.dead()))
        self.c.start(b)
        self.c.drain()

    @precondition(lambda self: len(self.c.live()) > 1 and self.c.active() is not None)
    @rule(data=st.data())
    def controlled_shutdown(self, data):
        b = data.draw(st.sampled_from(self.c.live()))
        self.c.submit(
            ev.ControlledShutdown(
                b, self.c.admin.live_brokers()[b].epoch, lambda code, remaining: None
            )
        )
        self.check()
        self.c.kill(b)
        self.c.drain()

    @precondition(lambda self: self.c.active() is not None)
    @rule(
        topic=st.sampled_from(TOPICS),
        partitions=st.integers(1, 3),
        rf=st.integers(1, 3),
        start=st.integers(0, 3),
    )
    def create_topic(self, topic, partitions, rf, start):
        if topic in self.c.admin.all_topics() or rf > len(self.c.live()):
            return
        self.c.create_topic(topic, partitions, rf, start=start % len(self.c.live()))

    @precondition(lambda self: self.c.active() is not None)
    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic):
        if topic in self.c.admin.all_topics():
            self.c.admin.mark_topic_for_deletion(topic)
            self.c.drain()

    @precondition(lambda self: self.c.active() is not None)
    @rule(data=st.data(), grow=st.booleans())
    def alter_isr(self, data, grow):
        """The leader of a partition reports a follower caught up (grow) or lagging."""
        states = {tp: s for tp, s in self.states().items() if s.leader in self.c.controllers}
        if not states:
            return
        tp = data.draw(st.sampled_from(sorted(states)))
        s = states[tp]
        replicas = self.c.admin.topic_assignments([tp.topic])[tp.topic].partitions[tp.partition]
        if grow:
            candidates = [r for r in replicas if r not in s.isr and r in self.c.controllers]
            if not candidates:
                return
            new_isr = sorted(set(s.isr) | {data.draw(st.sampled_from(candidates))})
        else:
            candidates = [r for r in s.isr if r != s.leader]
            if not candidates:
                return
            new_isr = sorted(set(s.isr) - {data.draw(st.sampled_from(candidates))})
        item = ev.AlterPartitionItem(tp, s.leader_epoch, new_isr, s.partition_epoch)
        self.c.submit(
            ev.AlterPartition(
                s.leader, self.c.admin.live_brokers()[s.leader].epoch, [item], lambda e, r: None
            )
        )

    @precondition(lambda self: self.c.active() is not None)
    @rule(data=st.data())
    def reassign(self, data):
        topics = self.c.admin.topic_assignments(
            self.c.admin.all_topics() - self.c.admin.topics_to_delete()
        )
        if not topics:
            return
        topic = data.draw(st.sampled_from(sorted(topics)))
        partition = data.draw(st.sampled_from(sorted(topics[topic].partitions)))
        live = self.c.live()
        target = data.draw(
            st.lists(st.sampled_from(live), min_size=1, max_size=min(3, len(live)), unique=True)
        )
        self.c.submit(
            ev.ApiPartitionReassignment(
                {TopicPartition(topic, partition): target}, lambda e, r: None
            )
        )

    @precondition(lambda self: self.c.active() is not None)
    @rule()
    def preferred_election(self):
        self.c.submit(ev.ReplicaLeaderElection(None, False, lambda r: None))

    @precondition(lambda self: self.c.active() is not None)
    @rule()
    def auto_rebalance(self):
        self.c.submit(ev.AutoPreferredReplicaLeaderElection())

    @precondition(lambda self: self.c.active() is not None)
    @rule(data=st.data())
    def fail_log_dir(self, data):
        """A live broker's log dir fails under some of its replicas (KIP-112)."""
        b = data.draw(st.sampled_from(self.c.live()))
        topics = self.c.admin.topic_assignments(self.c.admin.all_topics())
        held = sorted(
            TopicPartition(t, p)
            for t, a in topics.items()
            for p, replicas in a.partitions.items()
            if b in replicas
        )
        if held:
            self.c.fail_log_dir(b, data.draw(st.sets(st.sampled_from(held), min_size=1)))

    @precondition(lambda self: self.c.active() is not None)
    @rule()
    def unclean_election(self):
        self.unclean_step = True
        self.c.submit(ev.ReplicaLeaderElection(None, True, lambda r: None))

    # ---- invariants ----

    @invariant()
    def check(self):
        c = self.c
        now = self.states()
        live = set(c.controllers)

        def online(b: int, tp: TopicPartition) -> bool:
            return b in live and tp not in c.brokers[b].offline

        for old, new, tp in c.writes[self.checked_writes :]:
            if (
                old is not None
                and new.leader >= 0
                and new.leader != old.leader
                and not self.unclean_step
            ):
                assert new.leader in old.isr, (
                    f"{tp}: leader {new.leader} not from the ISR {old.isr}"
                )
        self.checked_writes = len(c.writes)
        for tp, s in now.items():
            key = self.key(tp)
            assert s.isr, f"{tp}: empty ISR"
            assert s.leader_epoch >= self.max_epoch.get(key, -1), f"{tp}: epoch went back"
            self.max_epoch[key] = s.leader_epoch
            if s.leader >= 0:
                assert s.leader in s.isr, f"{tp}: leader {s.leader} outside ISR {s.isr}"
            topic_deleting = tp.topic in c.admin.topics_to_delete()
            if (
                not topic_deleting
                and c.active() is not None
                and s.leader >= 0
                and not self.unclean_step
            ):
                assert online(s.leader, tp) or s.leader not in live, (
                    f"{tp}: leader {s.leader}'s replica is in a failed log dir"
                )
            # An ISR member outside the replica set cannot lead: Kafka keeps the last ISR
            # member when a reassignment removes it (removeReplicaFromIsr never empties an
            # ISR), so the ISR may name a broker that no longer holds the partition.
            replicas = c.admin.topic_assignments([tp.topic])[tp.topic].partitions[tp.partition]
            if (
                not topic_deleting
                and c.active() is not None
                and any(online(r, tp) for r in s.isr if r in replicas)
            ):
                assert online(s.leader, tp), (
                    f"{tp}: online ISR member in {s.isr} (replicas {replicas}) but leader "
                    f"{s.leader}"
                )
        for _dest, request in c.sent[self.checked_sent :]:
            if isinstance(request, LeaderAndIsrRequestData):
                for p in request.partitions:
                    if p.leader < 0:
                        continue
                    key = (
                        request.topic_ids.get(p.partition.topic),
                        p.partition.partition,
                        p.leader_epoch,
                    )
                    assert self.leader_of_epoch.setdefault(key, p.leader) == p.leader, (
                        f"two leaders of {key}"
                    )
        self.checked_sent = len(c.sent)
        for tp in {tp for b in c.brokers.values() for tp in b.leaders}:
            leading = [
                (b.id, b.leaders[tp][1])
                for b in c.brokers.values()
                if b.leaders.get(tp, (-1, -1))[0] == b.id
            ]
            epochs = [e for _, e in leading]
            assert len(epochs) == len(set(epochs)), (
                f"{tp}: two brokers lead in one epoch: {leading}"
            )
        self.unclean_step = False


ControllerMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("CONTROLLER_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
)
TestController = ControllerMachine.TestCase
