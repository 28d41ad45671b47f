"""Model-based test of the consumer protocol's coordinator logic (hypothesis state
machine): consumers (two of them static members) join, heartbeat, lose responses, leave
(for good, or a static one for a while), crash and restart, go silent, stop revoking,
change subscriptions (by names or by an RE2 regex) while topics are created and grow and a
MockTime moves. Each consumer behaves as a client does: it consumes exactly the
assignment of its last response, drops everything and rejoins on FENCED_MEMBER_EPOCH
or UNKNOWN_MEMBER_ID, and reports what it owns.

Invariants after every step:
- the coordinator never has a partition held (assigned or pending revocation) by two
  members, and no two consumers still in the group consume the same partition; each
  consumes only partitions the coordinator has it holding;
- the group epoch, and each member's epoch while it stays in the group, only grow;
- replaying every record written so far on a second coordinator gives the same group.
And once the consumers heartbeat without change (the ``settle`` rule): the group is
STABLE, every partition of every subscribed topic is assigned to exactly one member,
and each consumer consumes exactly its assignment.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import re2
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.group import ConsumerGroupState
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.member import MemberState
from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

N_CLIENTS = 4
TOPIC_NAMES = ["a", "b", "c"]
REGEXES = ["a|b", "c.*", "[a-c]"]
REBALANCE_TIMEOUT_MS = 10_000


def compile_re2(pattern):
    compiled = re2.compile(pattern)
    return lambda name: compiled.fullmatch(name) is not None


@dataclass
class Client:
    name: str
    # Static members: a restart comes back with the same instance id, a new member id.
    instance_id: str | None = None
    incarnation: int = 0
    topics: tuple[str, ...] = ("a",)
    regex: str | None = None
    joined: bool = False
    epoch: int = 0
    owned: dict = field(default_factory=dict)
    silent: bool = False
    # Stuck: slow to reconcile; the last assignment received waits in ``received``.
    stuck: bool = False
    received: dict | None = None
    subscription_changed: bool = False
    # After a lost response a client sends every field (a full request).
    resend_all: bool = False

    @property
    def member_id(self) -> str:
        return f"{self.name}-{self.incarnation}"

    def reset(self):
        self.joined, self.epoch, self.owned, self.received = False, 0, {}, None

    def unstick(self):
        self.stuck = False
        if self.received is not None:
            self.owned, self.received = self.received, None


subscriptions = st.one_of(
    st.tuples(st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, unique=True), st.none()),
    st.tuples(st.just([]), st.sampled_from(REGEXES)),
)


class ConsumerProtocolModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.time = MockTime()
        config = ConsumerGroupConfig(assignors=("uniform", "range"))
        self.coordinator = ConsumerGroupManager(config, self.time, compile_re2)
        self.shadow = ConsumerGroupManager(config, MockTime(), compile_re2)
        self.topics = {
            "a": TopicMetadata(uuid.UUID(int=1), "a", 3),
            "b": TopicMetadata(uuid.UUID(int=2), "b", 2),
        }
        self.coordinator.update_topics(self.topics.values())
        # The last two consumers are static members.
        self.clients = [
            Client(f"c{i}", instance_id=f"i{i}" if i >= N_CLIENTS - 2 else None)
            for i in range(N_CLIENTS)
        ]
        self.last_group_epoch = 0
        # Whether due regexes are resolved right after each heartbeat (else only by the
        # resolve_regexes rule and in settle).
        self.resolve_at_once = False
        self.last_member_epochs: dict[str, int] = {}

    # --- the consumers ----------------------------------------------------------------

    def _send(self, client: Client, full: bool = False, lost: bool = False):
        if not client.joined:
            request = HeartbeatRequest(
                group_id="g",
                member_id=client.member_id,
                member_epoch=0,
                instance_id=client.instance_id,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                subscribed_topic_names=tuple(client.topics),
                subscribed_topic_regex=client.regex or "",
                topic_partitions={},
            )
        else:
            full = full or client.resend_all
            send_subs = full or client.subscription_changed
            request = HeartbeatRequest(
                group_id="g",
                member_id=client.member_id,
                member_epoch=client.epoch,
                instance_id=client.instance_id,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
                subscribed_topic_names=tuple(client.topics) if send_subs else None,
                subscribed_topic_regex=(client.regex or "") if send_subs else None,
                topic_partitions=dict(client.owned),
            )
        result = self.coordinator.heartbeat(request)
        self._persisted(result.records)
        if self.resolve_at_once:
            # The live coordinator resolves due regexes on the next turn of its loop.
            self._persisted(self.coordinator.resolve_pending_regexes("g"))
        r = result.response
        if lost:
            # The client resends every field next, and drops an assignment it had not
            # applied yet: the answer to the full request replaces it.
            client.resend_all = True
            client.received = None
            return result
        client.resend_all = False
        if r.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            client.reset()
        elif r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID:
            # Its previous incarnation still holds the instance id: retry later.
            assert not client.joined
        elif r.error_code == ErrorCode.FENCED_INSTANCE_ID:
            client.reset()
            client.incarnation += 1
        else:
            assert r.error_code == ErrorCode.NONE, r
            client.joined, client.epoch = True, r.member_epoch
            client.subscription_changed = False
            if r.assignment is not None:
                if client.stuck:
                    client.received = dict(r.assignment)
                else:
                    client.owned = dict(r.assignment)
        return result

    def _persisted(self, records):
        for record in records:
            self.shadow.replay(record)

    def _expire(self):
        for fired in self.coordinator.expire():
            self._persisted(fired.records)

    def _advance(self, seconds: float):
        """Time passes in steps of at most 5 s; consumers not silent heartbeat each step."""
        while seconds > 0:
            step = min(5.0, seconds)
            for client in self.clients:
                if client.joined and not client.silent:
                    self._send(client)
            self.time.advance(step)
            self._expire()
            seconds -= step

    @rule(i=st.integers(0, N_CLIENTS - 1), sub=subscriptions)
    def join(self, i, sub):
        client = self.clients[i]
        if client.joined or client.silent:
            return
        client.topics, client.regex = tuple(sub[0]), sub[1]
        self._send(client)

    @rule(i=st.integers(0, N_CLIENTS - 1), full=st.booleans())
    def heartbeat(self, i, full):
        client = self.clients[i]
        if client.joined and not client.silent:
            self._send(client, full=full)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def heartbeat_response_lost(self, i):
        client = self.clients[i]
        if client.joined and not client.silent:
            self._send(client, lost=True)

    @rule(i=st.integers(0, N_CLIENTS - 1), temporarily=st.booleans())
    def leave(self, i, temporarily):
        """The consumer closes: a static one with -2 (it will be back) or -1."""
        client = self.clients[i]
        if not client.joined or client.silent:
            return
        epoch = -2 if temporarily and client.instance_id else -1
        request = HeartbeatRequest(
            group_id="g",
            member_id=client.member_id,
            member_epoch=epoch,
            instance_id=client.instance_id,
        )
        result = self.coordinator.heartbeat(request)
        # A member the coordinator already removed is told so; it closes all the same.
        assert result.response.error_code in (
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.FENCED_INSTANCE_ID,
        ), result.response
        self._persisted(result.records)
        client.reset()
        if client.instance_id:
            client.incarnation += 1

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def crash_and_restart(self, i):
        """The process dies without a word; a static consumer restarts under a new
        member id (refused until its old incarnation is released or times out)."""
        client = self.clients[i]
        client.reset()
        client.silent = False
        client.incarnation += 1

    @rule(i=st.integers(0, N_CLIENTS - 1), sub=subscriptions)
    def change_subscription(self, i, sub):
        client = self.clients[i]
        client.topics, client.regex = tuple(sub[0]), sub[1]
        client.subscription_changed = True

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def go_silent(self, i):
        self.clients[i].silent = True

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def wake_up(self, i):
        self.clients[i].silent = False

    @rule(i=st.integers(0, N_CLIENTS - 1), stuck=st.booleans())
    def set_stuck(self, i, stuck):
        if stuck:
            self.clients[i].stuck = True
        else:
            self.clients[i].unstick()

    @rule(seconds=st.sampled_from([1.0, 5.0, 12.0, 30.0, 50.0]))
    def advance_time(self, seconds):
        self._advance(seconds)

    @rule(name=st.sampled_from(TOPIC_NAMES), more=st.integers(1, 3))
    def grow_or_create_topic(self, name, more):
        old = self.topics.get(name)
        if old is None:
            self.topics[name] = TopicMetadata(
                uuid.UUID(int=TOPIC_NAMES.index(name) + 1), name, more
            )
        else:
            self.topics[name] = TopicMetadata(old.topic_id, name, old.num_partitions + more)
        self.coordinator.update_topics(self.topics.values())

    @rule()
    def resolve_regexes(self):
        self._persisted(self.coordinator.resolve_pending_regexes("g"))

    @rule(at_once=st.booleans())
    def set_resolve_at_once(self, at_once):
        self.resolve_at_once = at_once

    @precondition(lambda self: any(c.joined for c in self.clients))
    @rule()
    def settle(self):
        self.resolve_at_once = True
        for client in self.clients:
            client.unstick()
        # Silent consumers time out; the others heartbeat until nothing changes.
        self._advance(50.0)
        for _ in range(12):
            written = 0
            for client in self.clients:
                if client.joined and not client.silent:
                    written += len(self._send(client, full=False).records)
            if written == 0:
                break
        group = self.coordinator.groups.get("g")
        assert group is not None
        live = [c for c in self.clients if c.joined and not c.silent]
        assert {c.member_id for c in live} == set(group.members)
        if not live:
            assert group.state is ConsumerGroupState.EMPTY
            return
        assert group.state is ConsumerGroupState.STABLE, group.state
        held: dict = {}
        for member in group.members.values():
            assert member.state is MemberState.STABLE
            assert member.member_epoch == group.group_epoch == group.assignment_epoch
            for t, ps in member.assigned_partitions.items():
                for p in ps:
                    assert (t, p) not in held
                    held[(t, p)] = member.member_id
        subscribed = group.subscribed_topic_names()
        expected = {
            (self.topics[n].topic_id, p)
            for n in subscribed
            if n in self.topics
            for p in range(self.topics[n].num_partitions)
        }
        assert set(held) == expected
        for client in live:
            assert client.owned == dict(group.members[client.member_id].assigned_partitions)
        for regex in group.regexes_in_use():
            matches = compile_re2(regex)
            assert group.resolved_regexes[regex].topics == {n for n in self.topics if matches(n)}

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def no_partition_held_twice(self):
        group = self.coordinator.groups.get("g")
        if group is None:
            return
        holder: dict = {}
        for member in group.members.values():
            for tp in member.owned_partitions():
                assert tp not in holder, f"{tp} held by {holder.get(tp)} and {member.member_id}"
                holder[tp] = member.member_id
        consumed: dict = {}
        for client in self.clients:
            if client.member_id not in group.members:
                continue  # removed: it will learn so on its next heartbeat
            for t, ps in client.owned.items():
                for p in ps:
                    assert (t, p) not in consumed, f"{t}-{p} consumed twice"
                    consumed[(t, p)] = client.member_id
                    assert holder.get((t, p)) == client.member_id

    @invariant()
    def epochs_only_grow(self):
        group = self.coordinator.groups.get("g")
        if group is None:
            return
        assert group.group_epoch >= self.last_group_epoch
        assert group.assignment_epoch <= group.group_epoch
        self.last_group_epoch = group.group_epoch
        for member_id, member in group.members.items():
            if member.member_epoch != -2:  # a static member away
                assert member.member_epoch >= self.last_member_epochs.get(member_id, 0)
        self.last_member_epochs = {k: v.member_epoch for k, v in group.members.items()}

    @invariant()
    def records_rebuild_the_group(self):
        a = self.coordinator.groups.get("g")
        b = self.shadow.groups.get("g")
        if a is None:
            assert b is None
            return
        assert (a.group_epoch, a.assignment_epoch) == (b.group_epoch, b.assignment_epoch)
        assert a.members == b.members
        assert a.target_assignment == b.target_assignment
        assert a.subscription_metadata == b.subscription_metadata
        assert a.partition_owner == b.partition_owner
        assert {k: v.topics for k, v in a.resolved_regexes.items()} == {
            k: v.topics for k, v in b.resolved_regexes.items()
        }


ConsumerProtocolModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)
TestConsumerProtocolModel = ConsumerProtocolModel.TestCase
