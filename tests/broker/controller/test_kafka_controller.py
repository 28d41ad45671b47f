"""The controller's decisions, driven through a simulated cluster (in-memory store,
simulated brokers, mock clock)."""

from __future__ import annotations

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_request_batch import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from broker_py.controller.kafka_controller import ControllerConfig
from logstore.protocol.error_codes import ErrorCode

from .sim import SimCluster

TP = TopicPartition


def test_first_broker_becomes_controller_and_others_follow_it():
    c = SimCluster(3)
    active = c.active()
    assert active is not None and active.broker_id == 1 and active.context.epoch == 1
    assert [x.active_controller_id for x in c.controllers.values()] == [1, 1, 1]
    assert set(active.context.live_brokers) == {1, 2, 3}
    # every broker got UpdateMetadata naming the controller
    assert {b.metadata_controller for b in c.brokers.values()} == {1}


def test_new_topic_leaders_are_first_live_replicas_with_full_isr():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    for p in range(3):
        state = c.state("t", p)
        replicas = c.admin.topic_assignments(["t"])["t"].partitions[p]
        assert state.leader == replicas[0]
        assert (
            state.leader_epoch == 0
            and sorted(state.isr) == [1, 2, 3]
            and state.partition_epoch == 0
        )
    # leaders spread across the brokers
    assert sorted(c.leader("t", p) for p in range(3)) == [1, 2, 3]
    # each replica got LeaderAndIsr(is_new) and believes what the store says
    for b in c.brokers.values():
        for p in range(3):
            assert b.leaders[TP("t", p)] == (c.leader("t", p), 0)
    new_flags = [
        s.is_new for _, r in c.sent if isinstance(r, LeaderAndIsrRequestData) for s in r.partitions
    ]
    assert new_flags and all(new_flags)


def test_update_metadata_goes_to_every_broker_before_leader_and_isr_on_failover():
    c = SimCluster(3)
    c.create_topic("t", 2, 3)
    c.sent.clear()
    c.kill(1)
    c.drain()
    first_per_broker = {}
    for dest, request in c.sent:
        first_per_broker.setdefault(dest, type(request))
    new = c.active()
    assert new is not None and new.broker_id == 2 and new.context.epoch == 2
    assert first_per_broker[2] is UpdateMetadataRequestData
    assert first_per_broker[3] is UpdateMetadataRequestData


def test_dead_leader_is_replaced_from_the_isr_with_a_bumped_epoch():
    c = SimCluster(3)
    c.create_topic("t", 1, 3, start=1)
    replicas = c.admin.topic_assignments(["t"])["t"].partitions[0]
    assert replicas == [2, 1, 3] and c.leader("t", 0) == 2
    c.kill(2)
    c.drain()
    state = c.state("t", 0)
    assert state.leader == 1 and state.leader_epoch == 1
    assert sorted(state.isr) == [1, 3]
    assert c.brokers[3].leaders[TP("t", 0)] == (1, 1)
    assert c.brokers[1].leaders[TP("t", 0)] == (1, 1)


def test_dead_follower_leaves_the_isr_and_the_epoch_grows():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)  # [1, 2, 3]
    c.kill(3)
    c.drain()
    state = c.state("t", 0)
    assert state.leader == 1 and sorted(state.isr) == [1, 2] and state.leader_epoch == 1


def test_last_isr_member_dying_leaves_the_partition_leaderless_until_it_returns():
    c = SimCluster(2)
    c.create_topic("t", 1, 1, start=1)  # [2]
    c.kill(2)
    c.drain()
    state = c.state("t", 0)
    assert state.leader == -1 and state.isr == [2]
    c.start(2)
    c.drain()
    state = c.state("t", 0)
    assert state.leader == 2 and state.isr == [2]


def test_returning_broker_gets_its_replicas_state():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    c.kill(3)
    c.drain()
    c.start(3)
    c.drain()
    for p in range(3):
        state = c.state("t", p)
        assert c.brokers[3].leaders[TP("t", p)] == (state.leader, state.leader_epoch)


def test_a_new_controller_after_the_controller_dies():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    c.kill(1)
    c.drain()
    active = c.active()
    assert active is not None and active.broker_id in (2, 3) and active.context.epoch == 2
    for p in range(3):
        assert c.leader("t", p) in (2, 3)
    assert {x.active_controller_id for x in c.controllers.values()} == {active.broker_id}


def test_a_zombie_controller_is_fenced_and_resigns():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    zombie = c.controllers[1]
    # Broker 1 is paused past its session timeout: ZooKeeper expires the session and
    # another broker takes over, while broker 1 has not yet seen the expiry.
    c.sessions[1].unwatch()
    c.sessions[1].expire_session()
    c.events = type(c.events)((b, e) for b, e in c.events if b != 1)
    c.drain()
    assert zombie.active and c.active() is not None
    successor = next(x for x in c.controllers.values() if x.active and x is not zombie)
    assert successor.context.epoch == zombie.context.epoch + 1
    before = {p: c.state("t", p) for p in range(3)}
    replies = []
    zombie.process(ev.ControlledShutdown(3, -1, lambda code, remaining: replies.append(code)))
    assert replies == [ErrorCode.NOT_CONTROLLER]
    assert not zombie.active
    assert {p: c.state("t", p) for p in range(3)} == before  # nothing it tried landed


def test_controlled_shutdown_moves_leadership_away_first():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    led = [p for p in range(3) if c.leader("t", p) == 2]
    assert led
    replies = []
    epoch = c.admin.live_brokers()[2].epoch
    c.submit(
        ev.ControlledShutdown(2, epoch, lambda code, remaining: replies.append((code, remaining)))
    )
    assert replies == [(ErrorCode.NONE, set())]
    for p in range(3):
        state = c.state("t", p)
        assert state.leader != 2 and 2 not in state.isr
    stops = [r for d, r in c.sent if d == 2 and isinstance(r, StopReplicaRequestData)]
    assert stops and all(not s.delete for r in stops for s in r.partitions)


def test_controlled_shutdown_with_a_stale_broker_epoch_is_refused():
    c = SimCluster(3)
    replies = []
    c.submit(ev.ControlledShutdown(2, 1, lambda code, remaining: replies.append(code)))
    assert replies == [ErrorCode.STALE_BROKER_EPOCH]
    c.submit(ev.ControlledShutdown(9, -1, lambda code, remaining: replies.append(code)))
    assert replies[-1] == ErrorCode.BROKER_NOT_AVAILABLE


def test_controlled_shutdown_keeps_single_replica_partitions():
    c = SimCluster(2)
    c.create_topic("solo", 1, 1, start=1)  # [2]
    replies = []
    c.submit(
        ev.ControlledShutdown(2, -1, lambda code, remaining: replies.append((code, remaining)))
    )
    assert replies == [(ErrorCode.NONE, set())]  # RF 1 partitions are not moved nor counted
    assert c.leader("solo", 0) == 2


def test_preferred_election_brings_leaders_back():
    c = SimCluster(3)
    c.create_topic("t", 3, 3)
    preferred = {p: c.admin.topic_assignments(["t"])["t"].partitions[p][0] for p in range(3)}
    c.kill(1)
    c.drain()
    c.start(1)
    c.drain()
    # broker 1 is back but leads nothing until an election; it must first rejoin the ISR
    moved = [p for p in range(3) if preferred[p] == 1]
    assert all(c.leader("t", p) != 1 for p in moved)
    results = []
    c.submit(ev.ReplicaLeaderElection({TP("t", p) for p in moved}, False, results.append))
    assert all(code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE for code, _ in results[0].values())
    # it catches up: the leader adds it back to the ISR through AlterPartition
    for p in moved:
        _rejoin(c, TP("t", p), 1)
    results.clear()
    c.submit(ev.ReplicaLeaderElection(None, False, results.append))
    assert {tp: code for tp, (code, _) in results[0].items()} == {
        TP("t", p): ErrorCode.NONE for p in moved
    }
    assert all(c.leader("t", p) == preferred[p] for p in range(3))
    results.clear()
    c.submit(ev.ReplicaLeaderElection({TP("t", 0)}, False, results.append))
    assert results[0][TP("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    results.clear()
    c.submit(ev.ReplicaLeaderElection({TP("nope", 0)}, False, results.append))
    assert results[0][TP("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _rejoin(c: SimCluster, tp: TopicPartition, replica: int) -> None:
    state = c.state(*tp)
    leader = state.leader
    replies = []
    item = ev.AlterPartitionItem(
        tp, state.leader_epoch, sorted(set(state.isr) | {replica}), state.partition_epoch
    )
    c.submit(
        ev.AlterPartition(
            leader,
            c.admin.live_brokers()[leader].epoch,
            [item],
            lambda e, r: replies.append((e, r)),
        )
    )
    assert replies[0][0] == ErrorCode.NONE and replies[0][1][tp].error == ErrorCode.NONE, replies


def test_auto_rebalance_elects_preferred_leaders_of_an_imbalanced_broker():
    c = SimCluster(
        3,
        ControllerConfig(
            auto_leader_rebalance_enable=True, leader_imbalance_per_broker_percentage=10
        ),
    )
    c.create_topic("t", 3, 3)
    c.kill(1)
    c.drain()
    c.start(1)
    c.drain()
    tp = next(
        TP("t", p) for p in range(3) if c.admin.topic_assignments(["t"])["t"].partitions[p][0] == 1
    )
    _rejoin(c, tp, 1)
    assert c.leader(*tp) != 1
    c.submit(ev.AutoPreferredReplicaLeaderElection())
    assert c.leader(*tp) == 1


def test_unclean_election_only_when_the_topic_allows_it():
    c = SimCluster(2)
    c.create_topic("t", 1, 2)  # [1, 2]
    # 2 falls out of the ISR (its leader says so), then the leader dies
    state = c.state("t", 0)
    replies = []
    item = ev.AlterPartitionItem(TP("t", 0), state.leader_epoch, [1], state.partition_epoch)
    c.submit(
        ev.AlterPartition(
            1, c.admin.live_brokers()[1].epoch, [item], lambda e, r: replies.append(r)
        )
    )
    assert c.state("t", 0).isr == [1]
    c.kill(1)
    c.drain()
    assert c.leader("t", 0) == -1
    c.admin.set_topic_configs("t", {"unclean.leader.election.enable": "true"})
    c.drain()
    state = c.state("t", 0)
    assert state.leader == 2 and state.isr == [2]


def test_elect_leaders_unclean():
    c = SimCluster(2)
    c.create_topic("t", 1, 2)
    state = c.state("t", 0)
    item = ev.AlterPartitionItem(TP("t", 0), state.leader_epoch, [1], state.partition_epoch)
    c.submit(ev.AlterPartition(1, -1, [item], lambda e, r: None))
    c.kill(1)
    c.drain()
    results = []
    c.submit(ev.ReplicaLeaderElection({TP("t", 0)}, True, results.append))
    assert results[0][TP("t", 0)][0] == ErrorCode.NONE
    assert c.leader("t", 0) == 2


def test_topic_deletion_stops_and_deletes_every_replica_then_the_znodes():
    c = SimCluster(3)
    c.create_topic("t", 2, 3)
    c.sent.clear()
    c.admin.mark_topic_for_deletion("t")
    c.drain()
    assert "t" not in c.admin.all_topics()
    assert "t" not in c.admin.topics_to_delete()
    for b in c.brokers.values():
        assert b.deleted == {TP("t", 0), TP("t", 1)}
    ums = [r for _, r in c.sent if isinstance(r, UpdateMetadataRequestData) and r.partitions]
    assert ums and all(s.leader == -2 for s in ums[0].partitions)


def test_topic_deletion_waits_for_a_dead_replica():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)
    c.kill(3)
    c.drain()
    c.admin.mark_topic_for_deletion("t")
    c.drain()
    assert "t" in c.admin.all_topics()
    c.start(3)
    c.drain()
    assert "t" not in c.admin.all_topics()


def test_reassignment_adds_then_removes_in_kafkas_order():
    c = SimCluster(4)
    c.create_topic("t", 1, 3)  # [1, 2, 3]
    replies = []
    c.submit(
        ev.ApiPartitionReassignment({TP("t", 0): [2, 3, 4]}, lambda e, r: replies.append((e, r)))
    )
    assert replies == [(ErrorCode.NONE, {TP("t", 0): (ErrorCode.NONE, None)})]
    a = c.admin.topic_assignments(["t"])["t"]
    assert a.partitions[0] == [2, 3, 4, 1] and a.adding == {0: [4]} and a.removing == {0: [1]}
    listed = []
    c.submit(ev.ListPartitionReassignments(None, lambda e, r: listed.append(r)))
    assert listed[0] == {TP("t", 0): ([2, 3, 4, 1], [4], [1])}
    assert c.brokers[4].leaders[TP("t", 0)][0] == 1  # 4 follows the leader
    _rejoin(c, TP("t", 0), 4)
    a = c.admin.topic_assignments(["t"])["t"]
    assert a.partitions[0] == [2, 3, 4] and not a.adding and not a.removing
    state = c.state("t", 0)
    assert state.leader == 2 and 1 not in state.isr
    assert TP("t", 0) in c.brokers[1].deleted


def test_reassignment_resumes_after_controller_failover():
    c = SimCluster(4)
    c.create_topic("t", 1, 3, start=1)
    assert c.admin.topic_assignments(["t"])["t"].partitions[0] == [2, 4, 1]
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): [2, 4, 3]}, lambda e, r: None))
    assert c.active().broker_id == 1
    c.kill(1)
    c.drain()
    assert c.active() is not None
    a = c.admin.topic_assignments(["t"])["t"]
    assert a.adding == {0: [3]} and a.removing == {0: [1]}
    _rejoin(c, TP("t", 0), 3)
    a = c.admin.topic_assignments(["t"])["t"]
    assert a.partitions[0] == [2, 4, 3] and not a.adding and not a.removing


def test_reassignment_validation_and_cancel():
    c = SimCluster(3)
    c.create_topic("t", 1, 2)
    replies = []
    c.submit(
        ev.ApiPartitionReassignment(
            {TP("t", 0): [], TP("t", 1): [1], TP("x", 0): [1]}, lambda e, r: replies.append(r)
        )
    )
    r = replies[0]
    assert r[TP("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert r[TP("t", 1)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): [1, 1]}, lambda e, r: replies.append(r)))
    assert replies[-1][TP("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): [1, 9]}, lambda e, r: replies.append(r)))
    assert replies[-1][TP("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): None}, lambda e, r: replies.append(r)))
    assert replies[-1][TP("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    before = c.admin.topic_assignments(["t"])["t"].partitions[0]
    third = ({1, 2, 3} - set(before)).pop()
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): [third]}, lambda e, r: replies.append(r)))
    assert c.admin.topic_assignments(["t"])["t"].adding == {0: [third]}
    c.submit(ev.ApiPartitionReassignment({TP("t", 0): None}, lambda e, r: replies.append(r)))
    a = c.admin.topic_assignments(["t"])["t"]
    assert a.partitions[0] == before and not a.adding and not a.removing
    assert TP("t", 0) in c.brokers[third].deleted


def test_alter_partition_checks():
    c = SimCluster(3)
    c.create_topic("t", 1, 3)
    state = c.state("t", 0)
    tp = TP("t", 0)
    epoch1 = c.admin.live_brokers()[1].epoch
    out = []

    def submit(broker, broker_epoch, item):
        c.submit(ev.AlterPartition(broker, broker_epoch, [item], lambda e, r: out.append((e, r))))
        return out[-1]

    assert (
        submit(1, epoch1 - 1, ev.AlterPartitionItem(tp, 0, [1, 2], 0))[0]
        == ErrorCode.STALE_BROKER_EPOCH
    )
    assert (
        submit(2, -1, ev.AlterPartitionItem(tp, 0, [1, 2], 0))[1][tp].error
        == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert (
        submit(1, epoch1, ev.AlterPartitionItem(tp, 5, [1, 2], 0))[1][tp].error
        == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        submit(1, epoch1, ev.AlterPartitionItem(tp, 0, [1, 2], 7))[1][tp].error
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert (
        submit(1, epoch1, ev.AlterPartitionItem(tp, 0, [1, 9], 0))[1][tp].error
        == ErrorCode.INELIGIBLE_REPLICA
    )
    ok = submit(1, epoch1, ev.AlterPartitionItem(tp, 0, [1, 2], 0))[1][tp]
    assert (
        ok.error == ErrorCode.NONE
        and ok.isr == (1, 2)
        and ok.partition_epoch == state.partition_epoch + 1
    )
    assert c.state("t", 0).leader_epoch == 0  # an ISR change by the leader keeps the epoch
    again = submit(1, epoch1, ev.AlterPartitionItem(tp, 0, [1, 2], 0))[1][tp]  # a retry
    assert again.error == ErrorCode.NONE and again.partition_epoch == ok.partition_epoch


def test_create_topics_waits_for_every_broker_metadata():
    c = SimCluster(3)
    ready = []
    c.submit(ev.CreateTopics({"t"}, ready.append))
    assert ready == []
    c.create_topic("t", 2, 2)
    assert ready == [{"t"}]


def test_new_partitions_through_partition_modifications():
    c = SimCluster(3)
    c.create_topic("t", 1, 2)
    a = c.admin.topic_assignments(["t"])["t"]
    parts = dict(a.partitions)
    parts[1] = [2, 3]
    from dataclasses import replace

    c.admin.set_topic_assignment("t", replace(a, partitions=parts))
    c.drain()
    assert c.leader("t", 1) == 2
