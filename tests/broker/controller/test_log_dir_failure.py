"""The controller's side of a failed log dir (KIP-112), on the simulated cluster: a
broker's notification makes the controller send it a LeaderAndIsr for every replica it
holds; the replicas it answers KAFKA_STORAGE_ERROR for go offline: their partitions'
leadership moves to other in-sync replicas, the broker leaves their ISRs, and the
metadata lists them as offline replicas until the broker restarts."""

from __future__ import annotations

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_request_batch import LeaderAndIsrRequestData

from .sim import SimCluster

TP = TopicPartition


def _on(c: SimCluster, b: int) -> list[TopicPartition]:
    topics = c.admin.topic_assignments(c.admin.all_topics())
    return sorted(
        TP(t, p) for t, a in topics.items() for p, replicas in a.partitions.items() if b in replicas
    )


def test_failed_dir_moves_leadership_and_shrinks_isrs_of_its_replicas_only():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)  # leaders 1, 2, 3
    led = [TP("t", p) for p in range(3) if c.leader("t", p) == 2]
    followed = [TP("t", p) for p in range(3) if c.leader("t", p) == 3]
    untouched = [TP("t", p) for p in range(3) if c.leader("t", p) == 1]
    before = {tp: c.state(tp.topic, tp.partition) for tp in map(TP, ["t"] * 3, range(3))}
    c.sent.clear()
    c.fail_log_dir(2, led + followed)
    # Broker 2 was asked about every replica it holds.
    asked = {
        s.partition
        for dest, r in c.sent
        if dest == 2 and isinstance(r, LeaderAndIsrRequestData)
        for s in r.partitions
    }
    assert asked >= set(_on(c, 2))
    for tp in led:
        s = c.state(tp.topic, tp.partition)
        assert s.leader in (1, 3) and 2 not in s.isr
        assert s.leader_epoch > before[tp].leader_epoch
    for tp in followed:
        s = c.state(tp.topic, tp.partition)
        assert s.leader == 3 and 2 not in s.isr
    for tp in untouched:
        assert c.state(tp.topic, tp.partition) == before[tp]
    assert c.admin.log_dir_event_notifications() == {}, "the notification was consumed"
    active = c.active()
    assert active is not None
    assert active.context.replicas_on_offline_dirs == {2: set(led + followed)}
    # Every broker's metadata lists broker 2 as an offline replica of those partitions.
    for b in c.brokers.values():
        for tp in led + followed:
            assert 2 in b.metadata_offline[tp]
        for tp in untouched:
            assert 2 not in b.metadata_offline.get(tp, ())


def test_sole_in_sync_replica_in_a_failed_dir_leaves_the_partition_leaderless():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)
    leader = c.leader("t", 0)
    for follower in [b for b in (1, 2, 3) if b != leader]:
        s = c.state("t", 0)
        isr = [r for r in s.isr if r != follower]
        c.submit(
            ev.AlterPartition(
                leader,
                c.admin.live_brokers()[leader].epoch,
                [ev.AlterPartitionItem(TP("t", 0), s.leader_epoch, isr, s.partition_epoch)],
                lambda e, r: None,
            )
        )
    assert c.state("t", 0).isr == [leader]
    c.fail_log_dir(leader, [TP("t", 0)])
    s = c.state("t", 0)
    assert s.leader == -1 and s.isr == [leader], "no clean leader: it waits, as Kafka's"


def test_restart_brings_the_replicas_back():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)
    leader = c.leader("t", 0)
    c.fail_log_dir(leader, [TP("t", 0)])
    assert c.leader("t", 0) != leader
    c.kill(leader)
    c.drain()
    c.start(leader)  # a restart recovers the dir
    c.drain()
    active = c.active()
    assert active is not None and leader not in active.context.replicas_on_offline_dirs
    c.submit(ev.ReplicaLeaderElection({TP("t", 0)}, False, lambda r: None))
    assert c.state("t", 0).leader in (1, 2, 3)


def test_a_new_controller_learns_offline_replicas_from_leader_and_isr_answers():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    active = c.active()
    assert active is not None
    failing = next(b for b in (1, 2, 3) if b != active.broker_id)
    c.brokers[failing].offline |= set(_on(c, failing))  # failed, notification not yet seen
    c.kill(active.broker_id)
    c.drain()
    successor = c.active()
    assert successor is not None and successor.broker_id != active.broker_id
    assert successor.context.replicas_on_offline_dirs == {failing: set(_on(c, failing))}
    for p in range(3):
        s = c.state("t", p)
        assert s.leader != failing and failing not in s.isr


def test_an_answer_from_an_earlier_registration_is_ignored():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)
    active = c.active()
    assert active is not None
    b = next(x for x in (1, 2, 3) if x != active.broker_id)
    epoch = c.admin.live_brokers()[b].epoch
    before = c.state("t", 0)
    active.process(ev.LeaderAndIsrResponseReceived(b, epoch - 1, {TP("t", 0): 56}))
    c.drain()
    assert c.state("t", 0) == before and not active.context.replicas_on_offline_dirs
