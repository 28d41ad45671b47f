"""Model-based test of moving a group between the classic and consumer protocols
(hypothesis state machine over :class:`GroupMigration` and a MockTime): clients on either
protocol start, heartbeat, leave, crash and switch protocol (a rolling upgrade or
downgrade, one restart at a time); one is a static member, whose restart on the classic
protocol takes its consumer-protocol incarnation's place by instance id. While the group
is classic it is modelled as Kafka's classic coordinator behaves for eager members:
every join or leave is a stop-the-world rebalance handing out ranges; a consumer-protocol
client joining it upgrades it, and the last consumer-protocol client leaving (or
expiring, or being replaced) downgrades it, followed by such a rebalance. Clients
consume exactly what their last response gave them.

Invariants after every step:
- no partition is consumed by two live clients, and the coordinator never holds a
  partition for two members (replay refuses it);
- while the group has members, its epoch (its generation while classic) never goes
  backwards across conversions, and a member's epoch only grows while it stays in it;
- an upgrade keeps every classic member with its assignment; a downgrade keeps every
  member left, each with its target assignment;
- replaying every consumer-group record written so far rebuilds the same group.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import re2
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker_py.coordinator.group.modern.classic_member import (
    ClassicGroupView,
    ClassicMemberView,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.migration import (
    ClassicJoinRequest,
    Downgrade,
    GroupMigration,
    LeavingMember,
)
from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

FOO = TopicMetadata(uuid.UUID(int=7), "foo", 6)
N_CLIENTS = 4
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def compile_re2(pattern):
    compiled = re2.compile(pattern)
    return lambda name: compiled.fullmatch(name) is not None


def sub(owned=()):
    return encode_subscription(["foo"], version=1, owned={"foo": sorted(owned)})


@dataclass
class Client:
    name: str
    classic: bool = True
    # A static member keeps its instance id across restarts, with a new member id.
    instance_id: str | None = None
    incarnation: int = 0
    joined: bool = False
    member_id: str = ""
    epoch: int = 0
    owned: set = field(default_factory=set)


class MigrationModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.time = MockTime()
        manager = ConsumerGroupManager(ConsumerGroupConfig(), self.time, compile_re2)
        manager.update_topics([FOO])
        self.mig = GroupMigration(manager)
        self.clients = [Client(f"c{i}", classic=i % 2 == 0) for i in range(N_CLIENTS)]
        self.clients[-1].instance_id = "static"
        # The classic group: member id -> client, its generation.
        self.classic_members: dict[str, Client] = {}
        self.generation = 0
        self.records = []
        self.max_epoch = 0
        self.member_epochs: dict[str, int] = {}

    # --- the coordinator -----------------------------------------------------------

    @property
    def consumer_group(self):
        return self.mig.manager.groups.get("g")

    def classic_rebalance(self):
        """Kafka's classic coordinator with eager members: everyone revokes, then ranges."""
        for c in self.classic_members.values():
            c.owned = set()
        if not self.classic_members:
            return
        self.generation += 1
        ids = sorted(self.classic_members)
        for i, mid in enumerate(ids):
            c = self.classic_members[mid]
            c.owned = {p for p in range(FOO.num_partitions) if p % len(ids) == i}
            c.epoch = self.generation

    def classic_view(self):
        return ClassicGroupView(
            group_id="g",
            generation_id=self.generation,
            protocol_type="consumer",
            protocol_name="range",
            state="Stable",
            leader_id=min(self.classic_members),
            members=tuple(
                ClassicMemberView(
                    mid,
                    c.instance_id,
                    c.name,
                    "/h",
                    REBALANCE_MS,
                    SESSION_MS,
                    (("range", sub()),),
                    encode_assignment({"foo": sorted(c.owned)}, 1),
                )
                for mid, c in sorted(self.classic_members.items())
            ),
        )

    def install_downgrade(self, down: Downgrade):
        group = down.group
        self.records.extend(down.records)
        by_id = {c.member_id: c for c in self.clients if c.joined}
        assert {m.member_id for m in group.members} == set(by_id)
        assert group.generation_id >= self.max_epoch
        self.generation = group.generation_id
        self.classic_members = {m.member_id: by_id[m.member_id] for m in group.members}
        for m in group.members:
            assert decode_assignment(m.assignment).partitions.keys() <= {"foo"}
        self.classic_rebalance()

    # --- client actions ------------------------------------------------------------

    def new_id(self, c):
        c.incarnation += 1
        return f"{c.name}-{c.incarnation}"

    def drop(self, c):
        c.joined, c.owned, c.epoch, c.member_id = False, set(), 0, ""

    def consumer_beat(self, c, epoch=None):
        request = HeartbeatRequest(
            "g",
            c.member_id,
            c.epoch if epoch is None else epoch,
            instance_id=c.instance_id,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=("foo",),
            topic_partitions={FOO.topic_id: frozenset(c.owned)} if c.owned else {},
        )
        group = self.consumer_group
        if group is None and self.classic_members and request.member_epoch == 0:
            view = self.classic_view()
            result = self.mig.upgrade(view, request)
            if result.response.error_code is ErrorCode.NONE:
                converted = self.consumer_group
                for m in view.members:
                    member = converted.members[m.member_id]
                    assert member.uses_classic_protocol
                    assert member.assigned_partitions == (
                        {FOO.topic_id: frozenset(self.classic_members[m.member_id].owned)}
                        if self.classic_members[m.member_id].owned
                        else {}
                    )
                self.classic_members = {}
        else:
            result = self.mig.heartbeat(request)
        response = result.response
        self.records.extend(result.records)
        if response.error_code is not ErrorCode.NONE:
            self.drop(c)
            return result
        c.epoch = response.member_epoch
        if response.assignment is not None:
            c.owned = set(response.assignment.get(FOO.topic_id, frozenset()))
        return result

    def classic_round(self, c):
        """A classic client in a consumer group: heartbeat, and on REBALANCE_IN_PROGRESS
        join with what it owns and sync (a few times at most)."""
        for _ in range(3):
            code, _ = self.mig.classic_heartbeat("g", c.member_id, c.instance_id, c.epoch)
            if code is ErrorCode.NONE:
                return
            if code is not ErrorCode.REBALANCE_IN_PROGRESS:
                self.drop(c)
                return
            if not self.classic_join(c):
                return

    def classic_join(self, c):
        join = self.mig.join(
            ClassicJoinRequest(
                "g",
                c.member_id,
                "consumer",
                (("range", sub(c.owned)),),
                SESSION_MS,
                REBALANCE_MS,
                instance_id=c.instance_id,
            )
        )
        self.records.extend(join.records)
        if join.response.error_code is not ErrorCode.NONE:
            self.drop(c)
            return False
        c.member_id = join.response.member_id
        if join.downgrade is not None:
            # A static classic member replaced the last consumer-protocol member.
            self.install_downgrade(join.downgrade)
            return False
        sync = self.mig.sync(
            "g", c.member_id, c.instance_id, join.response.generation_id, None, None
        )
        if sync.error_code is ErrorCode.NONE:
            c.epoch = join.response.generation_id
            c.owned = set(decode_assignment(sync.assignment).partitions.get("foo", ()))
        elif sync.error_code is ErrorCode.REBALANCE_IN_PROGRESS:
            c.epoch = join.response.generation_id
        else:
            self.drop(c)
            return False
        return True

    # --- rules ---------------------------------------------------------------------

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def start(self, i):
        c = self.clients[i]
        if c.joined:
            return
        c.member_id = self.new_id(c)
        group = self.consumer_group
        if c.classic:
            if group is not None and not group.members:
                self.records.extend(self.mig.manager.delete_group("g"))
                group = None
            if group is None:
                c.joined = True
                self.classic_members[c.member_id] = c
                self.classic_rebalance()
                return
            c.member_id = ""
            c.joined = True
            if c.instance_id is None:
                required = self.mig.join(
                    ClassicJoinRequest(
                        "g", "", "consumer", (("range", sub()),), SESSION_MS, REBALANCE_MS
                    )
                )
                assert required.response.error_code is ErrorCode.MEMBER_ID_REQUIRED
                c.member_id = required.response.member_id
            if self.classic_join(c) and self.consumer_group is not None:
                self.classic_round(c)
            return
        c.joined = True
        self.consumer_beat(c, epoch=0)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def beat(self, i):
        c = self.clients[i]
        if not c.joined or self.consumer_group is None:
            return
        if c.classic:
            self.classic_round(c)
        else:
            self.consumer_beat(c)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def leave(self, i):
        c = self.clients[i]
        if not c.joined:
            return
        if self.consumer_group is None:
            del self.classic_members[c.member_id]
            self.drop(c)
            self.classic_rebalance()
            return
        if c.classic:
            result = self.mig.leave("g", [LeavingMember(c.member_id)])
            self.records.extend(result.records)
            self.drop(c)
            return
        result = self.consumer_beat(c, epoch=-1)
        self.drop(c)
        if result.downgrade is not None:
            self.install_downgrade(result.downgrade)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def switch_protocol(self, i):
        """A restart with the other group.protocol (committed first, so nothing is lost)."""
        c = self.clients[i]
        if c.joined:
            self.leave(i)
            self.epochs_only_grow()
        c.classic = not c.classic
        self.start(i)

    @rule()
    def static_restart_switching_protocol(self):
        """The static client restarts with the other group.protocol and its instance id; a
        consumer-protocol one leaves for a while first (epoch -2), so the classic one
        takes its place (and its partitions) under a new member id."""
        c = self.clients[-1]
        group = self.consumer_group
        if not c.joined or group is None or c.classic:
            return
        result = self.consumer_beat(c, epoch=-2)
        assert result.response.error_code is ErrorCode.NONE
        self.drop(c)
        c.classic = True
        self.start(len(self.clients) - 1)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def crash(self, i):
        """The process dies: it consumes nothing more; the others keep heartbeating until
        its session (or rebalance) timer removes it."""
        c = self.clients[i]
        if not c.joined or self.consumer_group is None:
            return
        crashed_id = c.member_id
        self.drop(c)
        for _ in range(20):
            self.time.advance(4)
            for other in self.clients:
                if other.joined and self.consumer_group is not None:
                    if other.classic:
                        self.classic_round(other)
                    else:
                        self.consumer_beat(other)
            self.expire()
            group = self.consumer_group
            if group is None or crashed_id not in group.members:
                return

    def expire(self):
        result = self.mig.expire()
        self.records.extend(result.records)
        for t in result.timers:
            for c in self.clients:
                if c.joined and c.member_id == t.member_id:
                    self.drop(c)
        for down in result.downgrades:
            self.install_downgrade(down)

    # --- invariants ----------------------------------------------------------------

    @invariant()
    def no_partition_consumed_twice(self):
        seen = {}
        for c in self.clients:
            if not c.joined:
                continue
            for p in c.owned:
                assert p not in seen, f"partition {p} consumed by {seen[p]} and {c.name}"
                seen[p] = c.name

    @invariant()
    def epochs_only_grow(self):
        group = self.consumer_group
        epoch = self.generation if group is None else group.group_epoch
        if not (group is not None and group.members) and not self.classic_members:
            # No members left: a consumer member joining next starts a new group (Kafka
            # replaces an empty classic group), whose epochs start over.
            self.max_epoch = 0
            return
        assert epoch >= self.max_epoch
        self.max_epoch = epoch
        if group is None:
            return
        for mid, member in group.members.items():
            assert member.member_epoch >= self.member_epochs.get(mid, 0)
            self.member_epochs[mid] = member.member_epoch

    @invariant()
    def records_rebuild_the_group(self):
        other = ConsumerGroupManager(ConsumerGroupConfig(), self.time, compile_re2)
        for record in self.records:
            other.replay(record)
        group, replayed = self.consumer_group, other.groups.get("g")
        if group is None or group.deleted:
            assert replayed is None or replayed.deleted
            return
        assert replayed is not None
        assert replayed.members == group.members
        assert replayed.group_epoch == group.group_epoch
        assert replayed.target_assignment == group.target_assignment


MigrationModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestMigrationModel = MigrationModel.TestCase
