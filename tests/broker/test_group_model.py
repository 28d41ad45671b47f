"""Model-based test of the classic group coordinator (hypothesis state machine).

A few clients join, sync, heartbeat, leave and go silent in any order while a
:class:`~broker_py.utils.time.MockTime` moves in steps, against one real coordinator
(over a real broker's logs, never a socket). The coordinator is called directly, as
the request handlers call it; each client behaves as a consumer would: it keeps the
member id and generation of its last successful JoinGroup, forgets them on
UNKNOWN_MEMBER_ID, and as leader assigns ``b"<generation>:<member id>"`` to every
member its JoinGroup response listed.

Invariants checked after every step:

- A Stable group has a leader among its members, no member waiting in JoinGroup,
  and every member holds the assignment of the group's generation.
- Every SyncGroup answered without error hands the member the assignment of its
  generation.
- A group's generation never goes down.
- No member can outlive its session unnoticed: each has a live heartbeat timer due
  within its session timeout (the new-member timeout while new), unless it waits in
  JoinGroup or SyncGroup (then the rebalance times it); each pending member has a
  live expiry timer; a PreparingRebalance group has its pending join completion,
  and no other group has one.
- A member that goes silent is gone once its session timeout has passed.
- A coordinator failover brings a Stable group back as it was (generation, leader,
  members, assignments), its members timed from the load.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker_py.coordinator.group.group_coordinator import GroupCoordinator
from broker_py.coordinator.group.group_metadata import COMPLETING, DEAD, PREPARING, STABLE
from broker_py.coordinator.group.join_group import JoinGroupParams
from broker_py.coordinator.group.sync_group import SyncGroupParams
from broker_py.server.kafka_server import new_group_coordinator
from logstore.protocol.error_codes import ErrorCode

from .group_harness import SETTLE_TURNS, make_broker, mock_time

GROUP = "g"
CLIENTS = 3
E = ErrorCode


class Client:
    """What one consumer knows of its membership, and its requests in flight."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.members: list[str] = []  # the leader's JoinGroup response lists them
        self.metadata = b"a"
        self.join: asyncio.Task | None = None
        self.sync: asyncio.Task | None = None
        self.sync_generation = -1

    def forget(self) -> None:
        self.member_id, self.generation, self.leader, self.members = "", -1, False, []

    @property
    def busy(self) -> bool:
        return self.join is not None or self.sync is not None


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="groupmodel-")
        self.loop = asyncio.new_event_loop()
        self.coordinator: GroupCoordinator | None = None
        self.broker = None

    @initialize(initial_delay_ms=st.sampled_from([0, 0, 50]))
    def start(self, initial_delay_ms: int) -> None:
        self.initial_delay_ms = initial_delay_ms
        self.broker = make_broker(self.tmp, group_initial_rebalance_delay_ms=initial_delay_ms)
        self.time = mock_time()
        self.coordinator = new_group_coordinator(self.broker.apis, self.time)
        self.broker.apis.group_coordinator = self.coordinator
        self.loop.run_until_complete(self.coordinator.start())
        self.clients = [Client(f"client-{i}") for i in range(CLIENTS)]
        self.generations: dict[int, int] = {}  # id(group) -> highest generation seen

    def teardown(self) -> None:
        try:
            if self.coordinator is not None:
                self.loop.run_until_complete(self.coordinator.stop())
                self.settle()
            for c in getattr(self, "clients", []):
                for task in (c.join, c.sync):
                    if task is not None and not task.done():
                        task.cancel()
            self.settle()
        finally:
            self.loop.close()
            if self.broker is not None:
                self.broker.log_manager.shutdown()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- driving the loop and the clock ----

    def on_loop(self, fn, *args):
        """Calls ``fn(*args)`` from a task of the loop, as the broker calls the
        coordinator (and as its timers run)."""

        async def call():
            return fn(*args)

        return self.loop.run_until_complete(call())

    def turns(self) -> None:
        """Lets every task run until it waits."""

        async def turns():
            for _ in range(SETTLE_TURNS):
                await asyncio.sleep(0)

        self.loop.run_until_complete(turns())
        for c in getattr(self, "clients", []):
            self._collect(c)

    def settle(self) -> None:
        """Lets every task run until it waits, running the timers already due (as the
        loop runs them) without moving the clock."""
        self.turns()
        self.on_loop(self.time.advance, 0)
        self.turns()

    def advance(self, seconds: float) -> None:
        self.settle()
        self.on_loop(self.time.advance, seconds)
        self.settle()

    def _collect(self, c: Client) -> None:
        """Takes in the answers of ``c``'s finished requests, as the client would."""
        if c.join is not None and c.join.done():
            result, c.join = c.join.result(), None
            if result.error == E.NONE:
                c.member_id, c.generation = result.member_id, result.generation_id
                c.leader = result.leader_id == result.member_id
                c.members = [m for m, _, _ in result.members]
            elif result.error == E.MEMBER_ID_REQUIRED:
                c.member_id = result.member_id
            elif result.error == E.UNKNOWN_MEMBER_ID:
                c.forget()
        if c.sync is not None and c.sync.done():
            result, c.sync = c.sync.result(), None
            if result.error == E.NONE:
                assert result.assignment == f"{c.sync_generation}:{c.member_id}".encode(), (
                    c.name,
                    result,
                )
            elif result.error == E.UNKNOWN_MEMBER_ID:
                c.forget()

    def group(self):
        return self.coordinator.groups.get(GROUP)

    # ---- rules ----

    @rule(
        i=st.integers(0, CLIENTS - 1),
        session_ms=st.sampled_from([100, 300]),
        rebalance_ms=st.sampled_from([100, 500]),
        require_known=st.booleans(),
        change_metadata=st.booleans(),
    )
    def join(self, i, session_ms, rebalance_ms, require_known, change_metadata):
        c = self.clients[i]
        if c.busy:
            return
        if change_metadata:
            c.metadata = b"b" if c.metadata == b"a" else b"a"
        c.join = self.loop.create_task(
            self.coordinator.join_group(
                JoinGroupParams(
                    GROUP,
                    c.member_id,
                    None,
                    require_known,
                    False,
                    c.name,
                    "/10.0.0.1",
                    rebalance_ms,
                    session_ms,
                    "consumer",
                    [("range", c.metadata)],
                )
            )
        )
        self.settle()

    @rule(i=st.integers(0, CLIENTS - 1))
    def sync(self, i):
        c = self.clients[i]
        if c.busy or c.generation < 0:
            return
        assignments = {m: f"{c.generation}:{m}".encode() for m in c.members} if c.leader else {}
        c.sync_generation = c.generation
        c.sync = self.loop.create_task(
            self.coordinator.sync_group(
                SyncGroupParams(
                    GROUP, c.generation, c.member_id, "consumer", "range", None, assignments
                )
            )
        )
        self.settle()

    @rule(
        session_ms=st.sampled_from([100, 300]),
        rebalance_ms=st.sampled_from([100, 500]),
        require_known=st.booleans(),
        then_wait_ms=st.sampled_from([0, 60, 250]),
    )
    def everyone_joins(self, session_ms, rebalance_ms, require_known, then_wait_ms):
        """Every idle client (re)joins, as consumers do when a rebalance starts (those
        told MEMBER_ID_REQUIRED join again with their id), then the clock moves on."""
        for _ in range(2):
            for i in range(CLIENTS):
                self.join(i, session_ms, rebalance_ms, require_known, False)
        self.advance(then_wait_ms / 1000)

    @rule(leader_first=st.booleans())
    def everyone_syncs(self, leader_first):
        """Every idle client with a generation sends SyncGroup, the leader first or last."""
        order = sorted(range(CLIENTS), key=lambda i: self.clients[i].leader != leader_first)
        for i in order:
            self.sync(i)

    @rule(
        session_ms=st.sampled_from([100, 300]),
        rebalance_ms=st.sampled_from([100, 500]),
        require_known=st.booleans(),
    )
    def rebalance_round(self, session_ms, rebalance_ms, require_known):
        """Every idle client rejoins, the rebalance gets the time it needs (its initial
        delay, twice), and every client syncs: a Stable group, unless one was busy."""
        self.everyone_joins(session_ms, rebalance_ms, require_known, 0)
        self.advance(2 * self.initial_delay_ms / 1000 + 0.01)
        self.everyone_syncs(True)

    @rule(i=st.integers(0, CLIENTS - 1))
    def heartbeat(self, i):
        c = self.clients[i]
        if not c.member_id:
            return
        error = self.on_loop(self.coordinator.heartbeat, GROUP, c.member_id, None, c.generation)
        if error == E.UNKNOWN_MEMBER_ID:
            c.forget()
        self.settle()

    @rule(ms=st.sampled_from([10, 60]))
    def everyone_heartbeats(self, ms):
        """The clock moves a little, then every client with a member id heartbeats."""
        self.advance(ms / 1000)
        for i in range(CLIENTS):
            self.heartbeat(i)

    @rule(i=st.integers(0, CLIENTS - 1))
    def leave(self, i):
        c = self.clients[i]
        if not c.member_id:
            return
        self.on_loop(self.coordinator.leave_group, GROUP, [(c.member_id, None, None)])
        c.forget()
        self.settle()

    @rule(ms=st.sampled_from([0, 10, 60, 150, 400]))
    def advance_clock(self, ms):
        self.advance(ms / 1000)

    @rule(i=st.integers(0, CLIENTS - 1))
    def go_silent(self, i):
        """A member with nothing in flight stops talking: its session timeout later it
        is gone (whatever the rebalances meanwhile)."""
        c = self.clients[i]
        group = self.group()
        if c.busy or group is None or c.member_id not in group.members:
            return
        member = group.members[c.member_id]
        if member.is_new:
            return
        self.advance(member.session_timeout_ms / 1000 + 0.01)
        group = self.group()
        assert group is None or c.member_id not in group.members, (c.name, group)

    @rule()
    def coordinator_moves(self):
        """The group's offsets partition is led elsewhere and then here again (a
        coordinator failover onto a broker with the same log): waiting JoinGroup and
        SyncGroup requests get NOT_COORDINATOR, and the group is rebuilt from its
        records. A Stable group comes back Stable in its generation, with the same
        members and assignments, each member timed from the load."""
        manager = self.coordinator.manager
        p = self.coordinator.partition_for(GROUP)
        if p not in manager.owned:
            return  # the offsets topic does not exist yet
        before = self.group()
        kept = None
        if before is not None and before.is_(STABLE):
            kept = (
                before.generation_id,
                before.leader_id,
                {m.member_id: m.assignment for m in before.members.values()},
            )
        self.on_loop(self.coordinator.on_resignation, p)
        self.settle()
        self.on_loop(self.coordinator.on_election, p)
        task = manager.loads.tasks.get(p)
        if task is not None:
            self.loop.run_until_complete(asyncio.wait([task]))
        self.settle()
        assert p in manager.owned and p not in manager.loading
        self.generations.clear()  # a new Group object: generations count from the load
        after = self.group()
        if kept is not None:
            assert after is not None and after.is_(STABLE), after
            assert (
                after.generation_id,
                after.leader_id,
                {m.member_id: m.assignment for m in after.members.values()},
            ) == kept

    # ---- invariants ----

    @invariant()
    def stable_group_members_hold_their_generations_assignment(self):
        group = self.group() if self.coordinator is not None else None
        if group is None or not group.is_(STABLE):
            return
        assert group.leader_id in group.members
        for member in group.members.values():
            assert not member.is_awaiting_join, member
            assert member.assignment == f"{group.generation_id}:{member.member_id}".encode(), (
                group,
                member,
            )

    @invariant()
    def generation_never_goes_down(self):
        group = self.group() if self.coordinator is not None else None
        if group is None:
            return
        seen = self.generations.get(id(group), 0)
        assert group.generation_id >= seen, (group, seen)
        self.generations[id(group)] = group.generation_id

    @invariant()
    def every_member_is_timed(self):
        group = self.group() if self.coordinator is not None else None
        if group is None or group.is_(DEAD):
            return
        now = self.time.monotonic()
        for member in group.members.values():
            if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
                continue  # its expiry is ignored while it waits; the rebalance times it
            timer = member.heartbeat_timer
            assert timer is not None and not timer.cancelled(), member
            limit = (
                self.coordinator.new_member_join_timeout_ms
                if member.is_new
                else member.session_timeout_ms
            )
            assert now < timer.deadline <= now + limit / 1000 + 1e-9, (member, timer.deadline - now)
        for member_id in group.pending_members:
            timer = group.pending_member_timers.get(member_id)
            assert timer is not None and not timer.cancelled(), member_id
        if group.is_(PREPARING):
            op = group.delayed_join
            assert op is not None and op.timer is not None and not op.timer.cancelled(), group
        if group.is_(COMPLETING) or group.is_(STABLE):
            assert group.delayed_join is None, group


GroupMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupModel = GroupMachine.TestCase
