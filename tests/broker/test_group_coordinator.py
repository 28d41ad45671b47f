"""The group coordinator, driven through its request handlers with decoded requests.

Every request body is encoded and decoded at its version before it reaches the
handler, and every response is encoded and decoded back, so only fields that exist
at that version count. The broker underneath is real (real ``logstore.Log``s under
``tmp_path``) but never binds a socket.

The coordinator runs on a :class:`~broker_py.utils.time.MockTime`: its timers
(initial delay, rebalance timeout, pending sync, session and pending-member expiry,
offset expiration) fire only when a test moves the clock with ``Cluster.advance``,
and nothing waits in real time for a timer. ``Cluster.settle`` only yields to the
loop so that requests under way reach the point where they wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import types

import pytest

import logstore
from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.config.kafka_config import BrokerConfig
from broker_py.coordinator.group.group_metadata_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    partition_for,
)
from broker_py.server.handlers import call
from broker_py.server.handlers.groups import HANDLERS
from broker_py.server.kafka_server import KafkaServer, new_group_coordinator
from broker_py.utils.time import MockTime
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.frame import Request
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from logstore.protocol.messages.group_admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from logstore.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetFetchRequest,
)

E = ErrorCode
PARTITIONS = 5  # of __consumer_offsets, to keep the tests light
CONNECTION = types.SimpleNamespace(peer="10.1.2.3:54321")
# Loop turns that let every request under way run until it waits: a reply travels
# through a few futures and tasks (handler, gather) before the caller has it.
SETTLE_TURNS = 20


def make_broker(data_dir, **overrides) -> KafkaServer:
    props = {
        "log.dirs": str(data_dir),
        "listeners": "PLAINTEXT://127.0.0.1:19092",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "10",
        "offsets.topic.num.partitions": str(PARTITIONS),
        **{k.replace("_", "."): str(v) for k, v in overrides.items()},
    }
    broker = KafkaServer(BrokerConfig(props))
    # What KafkaServer.start() does before it starts the coordinators (minus the sockets).
    broker.startup_logs()
    return broker


def mock_time() -> MockTime:
    """A clock that starts at the real wall-clock time (the handlers stamp commits with
    the real clock) and moves only when a test advances it."""
    return MockTime(wall_ms=int(time.time() * 1000))


class Cluster:
    """One broker with its coordinator; ``call`` sends a request through a handler."""

    def __init__(self, broker: KafkaServer) -> None:
        self.broker = broker
        self.apis = broker.apis
        self.coordinator = broker.apis.group_coordinator
        self.time: MockTime = self.coordinator.time

    # ---- time ----

    async def settle(self) -> None:
        """Yields to the loop until every request under way waits (for a reply or a
        timer); the clock does not move."""
        for _ in range(SETTLE_TURNS):
            await asyncio.sleep(0)

    async def advance(self, seconds: float = 0.0) -> None:
        """Lets the requests under way reach their wait, moves the clock ``seconds`` on,
        running the timers due by then (0: only those already due, as the loop runs
        them), and lets their effects reach the requests."""
        await self.settle()
        self.time.advance(seconds)
        await self.settle()

    async def completed(self, awaitable, after: float = 0.0):
        """Awaits ``awaitable`` once the clock has moved ``after`` seconds on while it
        waited (for a rebalance's initial delay, say; 0 for one of 0 ms)."""
        task = asyncio.ensure_future(awaitable)
        await self.advance(after)
        return await task

    def initial_delay_s(self) -> float:
        return self.apis.config["group.initial.rebalance.delay.ms"] / 1000

    async def call(self, api_key: ApiKey, version: int, body, client_id: str = "consumer-1"):
        wire = body.encode(version)
        decoded = type(body).decode(wire, version)
        header = RequestHeader(
            api_key=int(api_key), api_version=version, correlation_id=1, client_id=client_id
        )
        response = await call(
            HANDLERS[api_key],
            self.apis,
            Request(header=header, body=decoded, size=len(wire)),
            CONNECTION,
        )
        return type(response).decode(response.encode(version), version)

    # ---- group calls ----

    async def join(
        self,
        group="g",
        member_id="",
        *,
        version=5,
        session=10_000,
        rebalance=2_000,
        protocols=(("range", b"sub"),),
        protocol_type="consumer",
        instance=None,
        client_id="consumer-1",
    ):
        body = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols
            ],
        )
        return await self.call(ApiKey.JOIN_GROUP, version, body, client_id)

    async def join_new(self, group="g", **kwargs):
        """A new member as modern clients join: MEMBER_ID_REQUIRED, then the real join."""
        first = await self.join(group, "", **kwargs)
        assert first.error_code == E.MEMBER_ID_REQUIRED
        return await self.join(group, first.member_id, **kwargs)

    async def sync(
        self, member_id, generation, assignments=None, group="g", version=3, instance=None
    ):
        body = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ],
        )
        return await self.call(ApiKey.SYNC_GROUP, version, body)

    async def heartbeat(self, member_id, generation, group="g", version=3, instance=None):
        body = HeartbeatRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
        return (await self.call(ApiKey.HEARTBEAT, version, body)).error_code

    async def leave(self, member_ids, group="g", version=3):
        if version < 3:
            body = LeaveGroupRequest(group_id=group, member_id=member_ids[0])
        else:
            body = LeaveGroupRequest(
                group_id=group,
                members=[LeaveGroupRequest.MemberIdentity(member_id=m) for m in member_ids],
            )
        return await self.call(ApiKey.LEAVE_GROUP, version, body)

    async def commit(self, offsets, group="g", generation=-1, member_id="", version=8):
        """offsets: {(topic, partition): (offset, metadata[, leader_epoch])}."""
        topics: dict[str, list] = {}
        for (topic, partition), value in offsets.items():
            offset, metadata, *epoch = value
            topics.setdefault(topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch[0] if epoch else -1,
                    committed_metadata=metadata,
                )
            )
        body = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        response = await self.call(ApiKey.OFFSET_COMMIT, version, body)
        return {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
        }

    async def fetch(self, partitions=None, group="g", version=7):
        """{(topic, partition): (offset, leader_epoch, metadata, error)}; top-level error."""
        if partitions is None:
            topics = None
        else:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [(t, ps) for t, ps in by_topic.items()]
        if version >= 8:
            body = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(
                        group_id=group,
                        topics=None
                        if topics is None
                        else [
                            OffsetFetchRequest.OffsetFetchRequestTopics(
                                name=t, partition_indexes=ps
                            )
                            for t, ps in topics
                        ],
                    )
                ]
            )
            response = await self.call(ApiKey.OFFSET_FETCH, version, body)
            (g,) = response.groups
            assert g.group_id == group
            error, response_topics = g.error_code, g.topics
        else:
            body = OffsetFetchRequest(
                group_id=group,
                topics=None
                if topics is None
                else [
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in topics
                ],
            )
            response = await self.call(ApiKey.OFFSET_FETCH, version, body)
            error, response_topics = response.error_code, response.topics
        out = {
            (t.name, p.partition_index): (
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for t in response_topics
            for p in t.partitions
        }
        return out, error

    async def describe(self, group="g", version=5):
        response = await self.call(
            ApiKey.DESCRIBE_GROUPS, version, DescribeGroupsRequest(groups=[group])
        )
        (described,) = response.groups
        return described

    def offsets_log_records(self, group="g"):
        """(key, value) of every record in the group's __consumer_offsets partition."""
        log = self.apis.replica_manager.get_partition(
            OFFSETS_TOPIC, partition_for(group, PARTITIONS)
        ).log.local_log
        data = (
            log.read(log.log_start_offset, 1 << 20)
            if log.log_end_offset > log.log_start_offset
            else b""
        )
        return [(r.key, r.value) for b in logstore.decode_batches(data) for r in b.records]


@contextlib.asynccontextmanager
async def cluster(data_dir, **overrides):
    broker = make_broker(data_dir, **overrides)
    coordinator = new_group_coordinator(broker.apis, mock_time())
    broker.apis.group_coordinator = coordinator
    await coordinator.start()
    try:
        yield Cluster(broker)
    finally:
        await coordinator.stop()
        broker.log_manager.shutdown()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 15))


async def stable_group(c: Cluster, n: int, group="g", **join_kwargs):
    """n members joined and synced; returns (generation, leader id, [member ids]).

    The clock moves by twice the initial rebalance delay (members that joined during
    the first delay make the group wait once more) and 10 ms: timers are due at float
    deadlines, and the margin keeps every advance off them."""
    joins = await c.completed(
        asyncio.gather(
            *(c.join_new(group, client_id=f"consumer-{i}", **join_kwargs) for i in range(n))
        ),
        after=2 * c.initial_delay_s() + 0.01,
    )
    assert {j.error_code for j in joins} == {0}
    generation = joins[0].generation_id
    leader = joins[0].leader
    members = [j.member_id for j in joins]
    assignments = {m: f"assignment-of-{m}".encode() for m in members}
    syncs = await asyncio.gather(
        *(c.sync(m, generation, assignments if m == leader else None, group=group) for m in members)
    )
    assert [s.assignment for s in syncs] == [assignments[m] for m in members]
    return generation, leader, members


def make_topic(c: Cluster, name="orders", partitions=3):
    c.apis.topic_admin_manager.ensure_topic(name, partitions, {})


# ---- membership ----


def test_three_members_one_leader_and_everyone_gets_its_assignment(tmp_path):
    async def main():
        # The initial delay lets all three join the first generation together.
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=150) as c:
            metadata = {f"consumer-{i}": f"subscription-{i}".encode() for i in range(3)}
            joining = asyncio.gather(
                *(
                    c.join_new(client_id=cid, protocols=[("range", md)])
                    for cid, md in metadata.items()
                )
            )
            await c.advance(0.1)
            assert not joining.done()
            # 150 ms: members joined during the delay, so the group waits 150 ms more.
            await c.advance(0.1)
            assert not joining.done()
            await c.advance(0.11)
            assert joining.done()
            joins = await joining
            assert [j.error_code for j in joins] == [0, 0, 0]
            assert {j.generation_id for j in joins} == {1}
            assert {j.protocol_name for j in joins} == {"range"}
            leader = joins[0].leader
            assert {j.leader for j in joins} == {leader}
            member_ids = [j.member_id for j in joins]
            assert len(set(member_ids)) == 3 and leader in member_ids
            for cid, j in zip(metadata, joins):
                assert j.member_id.startswith(cid + "-")
                if j.member_id == leader:
                    assert {m.member_id: m.metadata for m in j.members} == {
                        mid: metadata[c_id] for mid, c_id in zip(member_ids, metadata)
                    }
                else:
                    assert j.members == []

            # Followers sync first and wait for the leader's assignments.
            followers = [m for m in member_ids if m != leader]
            waiting = [asyncio.ensure_future(c.sync(m, 1)) for m in followers]
            await c.advance(0.05)
            assert not any(w.done() for w in waiting)
            assert (await c.describe()).group_state == "CompletingRebalance"
            assignments = {m: f"partitions-for-{m}".encode() for m in member_ids}
            leader_sync = await c.sync(leader, 1, assignments)
            assert (leader_sync.error_code, leader_sync.assignment) == (0, assignments[leader])
            for m, w in zip(followers, waiting):
                r = await w
                assert (r.error_code, r.assignment) == (0, assignments[m])

            described = await c.describe()
            assert (
                described.error_code,
                described.group_state,
                described.protocol_type,
                described.protocol_data,
            ) == (
                0,
                "Stable",
                "consumer",
                "range",
            )
            assert {
                m.member_id: (m.member_metadata, m.member_assignment) for m in described.members
            } == {mid: (metadata[cid], assignments[mid]) for mid, cid in zip(member_ids, metadata)}
            assert {m.client_host for m in described.members} == {"/10.1.2.3"}
            for m in member_ids:
                assert await c.heartbeat(m, 1) == E.NONE

            # The completed rebalance is in __consumer_offsets as GroupMetadata v3.
            (_key, value) = [
                (k, v)
                for k, v in c.offsets_log_records()
                if isinstance(decode_key(k), GroupMetadataKey)
            ][-1]
            stored = decode_group_metadata_value(value)
            assert (stored.generation, stored.protocol_type, stored.protocol, stored.leader) == (
                1,
                "consumer",
                "range",
                leader,
            )
            assert {m.member_id: (m.subscription, m.assignment) for m in stored.members} == {
                mid: (metadata[cid], assignments[mid]) for mid, cid in zip(member_ids, metadata)
            }

    run(main())


def test_members_joining_a_stable_group_rebalance_it(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            # Without an initial delay the first member forms generation 1 alone.
            generation, leader, _ = await stable_group(c, 1)
            assert generation == 1
            joining = [asyncio.ensure_future(c.join_new(client_id=f"new-{i}")) for i in range(2)]
            await c.advance(0.05)
            assert await c.heartbeat(leader, 1) == E.REBALANCE_IN_PROGRESS
            rejoin = await c.join(member_id=leader)
            others = await asyncio.gather(*joining)
            assert {r.generation_id for r in [rejoin, *others]} == {2}
            assert rejoin.leader == leader and len(rejoin.members) == 3
            assert all(r.members == [] for r in others)

    run(main())


def test_member_id_required_flow(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            first = await c.join(version=4, client_id="rdkafka")
            assert first.error_code == E.MEMBER_ID_REQUIRED
            assert (
                first.member_id.startswith("rdkafka-")
                and len(first.member_id) > len("rdkafka-") + 30
            )
            assert first.generation_id == -1
            # No initial delay: the rebalance completes when the clock runs its due timers.
            second = await c.completed(
                c.join(member_id=first.member_id, version=4, client_id="rdkafka")
            )
            assert (second.error_code, second.member_id, second.generation_id, second.leader) == (
                0,
                first.member_id,
                1,
                first.member_id,
            )
            # Before v4 a new member gets its id at once.
            direct = await c.completed(c.join("g2", version=3, client_id="old-client"))
            assert direct.error_code == 0 and direct.member_id.startswith("old-client-")
            # A member id that was never handed out is unknown.
            bogus = await c.join(member_id="nobody", version=4)
            assert bogus.error_code == E.UNKNOWN_MEMBER_ID
            assert (
                await c.join("no-such-group", member_id="nobody")
            ).error_code == E.UNKNOWN_MEMBER_ID

    run(main())


def test_pending_member_that_never_rejoins_expires(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            _generation, _leader, _ = await stable_group(c, 1, session=150)
            pending = await c.join(session=150)
            assert pending.error_code == E.MEMBER_ID_REQUIRED
            assert pending.member_id in c.coordinator.groups["g"].pending_members
            await c.advance(0.14)
            assert pending.member_id in c.coordinator.groups["g"].pending_members
            await c.advance(0.16)  # past its 150 ms session timeout
            assert pending.member_id not in c.coordinator.groups["g"].pending_members
            assert (await c.join(member_id=pending.member_id)).error_code == E.UNKNOWN_MEMBER_ID

    run(main())


@pytest.mark.parametrize("leave_version", [0, 3])
def test_leave_group_rebalances_with_a_new_generation(tmp_path, leave_version):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=100) as c:
            generation, leader, members = await stable_group(c, 2)
            follower = next(m for m in members if m != leader)
            response = await c.leave([follower], version=leave_version)
            assert response.error_code == 0
            if leave_version >= 3:
                assert [(m.member_id, m.error_code) for m in response.members] == [(follower, 0)]
            assert await c.heartbeat(leader, generation) == E.REBALANCE_IN_PROGRESS
            assert (await c.describe()).group_state == "PreparingRebalance"
            rejoin = await c.join(member_id=leader)  # every remaining member rejoined: done
            assert (rejoin.error_code, rejoin.generation_id, rejoin.leader) == (
                0,
                generation + 1,
                leader,
            )
            assert [m.member_id for m in rejoin.members] == [leader]
            assert (await c.sync(leader, generation + 1, {leader: b"all"})).assignment == b"all"
            assert await c.heartbeat(follower, generation + 1) == E.UNKNOWN_MEMBER_ID
            # Leaving again is an unknown member; so is leaving a group that is not there.
            again = await c.leave([follower], version=leave_version)
            if leave_version >= 3:
                assert again.error_code == 0 and again.members[0].error_code == E.UNKNOWN_MEMBER_ID
            else:
                assert again.error_code == E.UNKNOWN_MEMBER_ID
            # The last member leaving empties the group (generation bumps again).
            await c.leave([leader], version=leave_version)
            described = await c.describe()
            assert (described.group_state, described.members) == ("Empty", [])
            assert c.coordinator.groups["g"].generation_id == generation + 2

    run(main())


def test_session_expiry_removes_the_member(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            generation, leader, members = await stable_group(c, 2, session=200)
            follower = next(m for m in members if m != leader)
            # The leader keeps heartbeating; the follower goes silent.
            errors = []
            for _ in range(8):
                await c.advance(0.05)
                errors.append(await c.heartbeat(leader, generation))
            assert errors[0] == E.NONE and errors[-1] == E.REBALANCE_IN_PROGRESS
            # The follower's 200 ms session runs out at the 4th step (50 ms each): the
            # heartbeats before it see the group Stable, those after it the rebalance.
            assert errors[:3] == [E.NONE] * 3 and errors[4:] == [E.REBALANCE_IN_PROGRESS] * 4
            assert follower not in c.coordinator.groups["g"].members
            rejoin = await c.join(member_id=leader, session=200)
            assert (rejoin.generation_id, [m.member_id for m in rejoin.members]) == (
                generation + 1,
                [leader],
            )
            assert await c.heartbeat(follower, generation) == E.UNKNOWN_MEMBER_ID

    run(main())


def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            generation, leader, _members = await stable_group(c, 3, rebalance=300)
            # The leader rejoining starts a rebalance; nobody else comes back.
            started = c.time.monotonic()
            rejoining = asyncio.ensure_future(c.join(member_id=leader, rebalance=300))
            await c.advance(0.29)
            assert not rejoining.done()
            await c.advance(0.02)  # past the 300 ms rebalance timeout
            rejoin = await rejoining
            assert 0.25 <= c.time.monotonic() - started < 2
            assert (rejoin.generation_id, [m.member_id for m in rejoin.members]) == (
                generation + 1,
                [leader],
            )
            assert len(c.coordinator.groups["g"].members) == 1

    run(main())


def test_follower_that_never_syncs_is_removed(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            joins = await c.completed(
                asyncio.gather(
                    c.join_new(rebalance=250), c.join_new(rebalance=250, client_id="c2")
                ),
                after=0.11,
            )
            leader = joins[0].leader
            follower = next(j.member_id for j in joins if j.member_id != leader)
            await c.sync(leader, 1, {leader: b"a", follower: b"b"})
            assert (await c.describe()).group_state == "Stable"
            await c.advance(0.2)
            assert follower in c.coordinator.groups["g"].members
            await c.advance(0.2)  # the follower never sent SyncGroup within the 250 ms
            assert follower not in c.coordinator.groups["g"].members
            assert await c.heartbeat(leader, 1) == E.REBALANCE_IN_PROGRESS

    run(main())


def test_rejoin_without_changes_keeps_the_generation(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            generation, leader, members = await stable_group(c, 2)
            follower = next(m for m in members if m != leader)
            same = await c.join(member_id=follower)
            assert (same.error_code, same.generation_id, same.leader, same.members) == (
                0,
                generation,
                leader,
                [],
            )
            assert (await c.describe()).group_state == "Stable"
            assert (
                await c.sync(follower, generation)
            ).assignment == f"assignment-of-{follower}".encode()
            # Changed metadata does rebalance.
            changed = asyncio.ensure_future(
                c.join(member_id=follower, protocols=[("range", b"new-subscription")])
            )
            await c.advance(0.05)
            assert (await c.describe()).group_state == "PreparingRebalance"
            lead = await c.join(member_id=leader)
            assert (await changed).generation_id == lead.generation_id == generation + 1
            assert {m.member_id: m.metadata for m in lead.members}[follower] == b"new-subscription"

    run(main())


def test_protocol_selection_by_vote(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=100) as c:
            joins = await c.completed(
                asyncio.gather(
                    c.join_new(protocols=[("roundrobin", b"1"), ("range", b"1")]),
                    c.join_new(
                        protocols=[("range", b"2"), ("roundrobin", b"2"), ("sticky", b"2")],
                        client_id="c2",
                    ),
                    c.join_new(protocols=[("range", b"3"), ("roundrobin", b"3")], client_id="c3"),
                ),
                after=0.21,
            )
            assert {j.protocol_name for j in joins} == {"range"}
            # A member that shares no protocol with the group cannot join it.
            odd = await c.join(protocols=[("sticky", b"")])
            assert odd.error_code == E.INCONSISTENT_GROUP_PROTOCOL
            other_type = await c.join(protocol_type="connect")
            assert other_type.error_code == E.INCONSISTENT_GROUP_PROTOCOL

    run(main())


def test_error_codes(tmp_path):
    async def main():
        async with cluster(
            tmp_path, group_initial_rebalance_delay_ms=50, group_max_session_timeout_ms=60000
        ) as c:
            assert (await c.join(group="")).error_code == E.INVALID_GROUP_ID
            assert (await c.join(session=5)).error_code == E.INVALID_SESSION_TIMEOUT
            assert (await c.join(session=60001)).error_code == E.INVALID_SESSION_TIMEOUT
            assert (await c.join(protocols=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            assert await c.heartbeat("m", 0, group="") == E.INVALID_GROUP_ID
            assert await c.heartbeat("nobody", 1, group="no-such-group") == E.UNKNOWN_MEMBER_ID
            assert (
                await c.sync("nobody", 1, group="no-such-group")
            ).error_code == E.UNKNOWN_MEMBER_ID

            generation, leader, members = await stable_group(c, 2)
            follower = next(m for m in members if m != leader)
            assert await c.heartbeat(leader, generation + 1) == E.ILLEGAL_GENERATION
            assert await c.heartbeat("stranger", generation) == E.UNKNOWN_MEMBER_ID
            assert (await c.sync(leader, generation - 1)).error_code == E.ILLEGAL_GENERATION
            assert (await c.sync("stranger", generation)).error_code == E.UNKNOWN_MEMBER_ID

            make_topic(c)
            tp = ("orders", 0)
            assert (await c.commit({tp: (5, "")}, generation=generation + 1, member_id=leader))[
                tp
            ] == E.ILLEGAL_GENERATION
            assert (await c.commit({tp: (5, "")}, generation=generation, member_id="stranger"))[
                tp
            ] == E.UNKNOWN_MEMBER_ID
            # A simple (generation -1) commit is not allowed into a group with members.
            assert (await c.commit({tp: (5, "")}))[tp] == E.UNKNOWN_MEMBER_ID
            # An unknown generation for a group that does not exist.
            assert (await c.commit({tp: (5, "")}, group="gone", generation=3, member_id="m"))[
                tp
            ] == E.ILLEGAL_GENERATION

            # PreparingRebalance: heartbeats and syncs say so; commits still work.
            rejoin = asyncio.ensure_future(c.join(member_id=leader))
            await c.advance(0.02)
            assert await c.heartbeat(follower, generation) == E.REBALANCE_IN_PROGRESS
            assert (await c.sync(follower, generation)).error_code == E.REBALANCE_IN_PROGRESS
            assert (await c.commit({tp: (6, "")}, generation=generation, member_id=follower))[
                tp
            ] == E.NONE
            follower_join = await c.join(member_id=follower)
            lead = await rejoin
            assert lead.generation_id == follower_join.generation_id == generation + 1
            # CompletingRebalance: a commit must wait for the assignment; heartbeats are fine.
            assert (await c.commit({tp: (7, "")}, generation=generation + 1, member_id=follower))[
                tp
            ] == E.REBALANCE_IN_PROGRESS
            assert await c.heartbeat(follower, generation + 1) == E.NONE
            # A follower waiting in SyncGroup is told to rejoin when a rebalance starts.
            waiting = asyncio.ensure_future(c.sync(follower, generation + 1))
            await c.advance(0.02)
            changed = asyncio.ensure_future(
                c.join(member_id=leader, protocols=[("range", b"changed")])
            )
            assert (await waiting).error_code == E.REBALANCE_IN_PROGRESS
            await c.join(member_id=follower)
            assert (await changed).error_code == 0

    run(main())


def test_group_max_size(tmp_path):
    async def main():
        async with cluster(tmp_path, group_max_size=2, group_initial_rebalance_delay_ms=50) as c:
            await stable_group(c, 2)
            third = await c.join()
            assert third.error_code == E.GROUP_MAX_SIZE_REACHED

    run(main())


def test_static_member_rejoin_keeps_its_assignment(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            a, b = await c.completed(
                asyncio.gather(c.join(instance="i-a"), c.join(instance="i-b", client_id="c2")),
                after=0.11,
            )
            assert {a.error_code, b.error_code} == {0}  # static members need no MEMBER_ID_REQUIRED
            leader = a.leader
            assignments = {a.member_id: b"A", b.member_id: b"B"}
            await asyncio.gather(
                *(c.sync(m, 1, assignments if m == leader else None) for m in assignments)
            )
            follower, follower_instance = (
                (b.member_id, "i-b") if leader == a.member_id else (a.member_id, "i-a")
            )
            # The follower restarts: same instance id, no member id, same subscription.
            again = await c.join(instance=follower_instance)
            assert again.error_code == 0 and again.member_id != follower
            assert (again.generation_id, again.leader) == (1, leader)
            assert (await c.describe()).group_state == "Stable"
            assert (
                await c.sync(again.member_id, 1, instance=follower_instance)
            ).assignment == assignments[follower]
            # The old member id of that instance is fenced.
            assert (
                await c.heartbeat(follower, 1, instance=follower_instance) == E.FENCED_INSTANCE_ID
            )
            assert await c.heartbeat(again.member_id, 1, instance=follower_instance) == E.NONE
            # LeaveGroup by instance id alone removes the member.
            body = LeaveGroupRequest(
                group_id="g",
                members=[
                    LeaveGroupRequest.MemberIdentity(
                        member_id="", group_instance_id=follower_instance
                    )
                ],
            )
            left = await c.call(ApiKey.LEAVE_GROUP, 4, body)
            assert left.members[0].error_code == 0
            assert again.member_id not in c.coordinator.groups["g"].members

    run(main())


def test_stop_answers_waiting_joins(tmp_path):
    async def main():
        broker = make_broker(tmp_path, group_initial_rebalance_delay_ms=10_000)
        broker.apis.group_coordinator = coordinator = new_group_coordinator(
            broker.apis, mock_time()
        )
        await coordinator.start()
        c = Cluster(broker)
        joining = asyncio.ensure_future(c.join_new())
        await c.advance(0.05)
        assert not joining.done()
        await coordinator.stop()
        assert (await joining).error_code == E.NOT_COORDINATOR
        assert await c.heartbeat("m", 1) == E.COORDINATOR_NOT_AVAILABLE
        group = coordinator.groups["g"]
        assert group.delayed_join is None and all(
            m.heartbeat_timer is None for m in group.members.values()
        )
        broker.log_manager.shutdown()

    run(main())


# ---- offsets ----


def test_commit_and_fetch_offsets(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 3)
            make_topic(c, "audit", 1)
            errors = await c.commit(
                {
                    ("orders", 0): (100, "worker-7 checkpoint", 4),
                    ("orders", 1): (0, ""),
                    ("audit", 0): (17, None),
                    ("orders", 9): (1, ""),  # no such partition
                    ("missing", 0): (1, ""),  # no such topic
                },
                group="simple",
            )
            assert errors == {
                ("orders", 0): 0,
                ("orders", 1): 0,
                ("audit", 0): 0,
                ("orders", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
            }
            wanted = [("orders", 0), ("orders", 1), ("orders", 2), ("audit", 0), ("missing", 0)]
            fetched, error = await c.fetch(wanted, group="simple")
            assert error == 0
            assert fetched == {
                ("orders", 0): (100, 4, "worker-7 checkpoint", 0),
                ("orders", 1): (0, -1, "", 0),
                ("orders", 2): (-1, -1, "", 0),
                ("audit", 0): (17, -1, "", 0),
                ("missing", 0): (-1, -1, "", 0),
            }
            # Null topics: everything the group committed (v2+), and the v8+ batch form.
            everything, _ = await c.fetch(None, group="simple")
            assert set(everything) == {("orders", 0), ("orders", 1), ("audit", 0)}
            assert (await c.fetch(None, group="simple", version=8))[0] == everything
            # v1: no leader epoch on the wire.
            old, _ = await c.fetch([("orders", 0)], group="simple", version=1)
            assert old == {("orders", 0): (100, -1, "worker-7 checkpoint", 0)}
            # Unknown group: -1 for everything asked, nothing when asking for all.
            assert (await c.fetch([("orders", 0)], group="nobody"))[0] == {
                ("orders", 0): (-1, -1, "", 0)
            }
            assert (await c.fetch(None, group="nobody"))[0] == {}
            # A later commit wins; OffsetCommit v2 carries no leader epoch.
            await c.commit({("orders", 0): (150, "later", 9)}, group="simple", version=2)
            assert (await c.fetch([("orders", 0)], group="simple"))[0] == {
                ("orders", 0): (150, -1, "later", 0)
            }
            # The group shows up as an Empty group without protocol type.
            listed = await c.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
            assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
                ("simple", "", "Empty")
            ]

    run(main())


def test_offset_metadata_too_large_fails_only_that_partition(tmp_path):
    async def main():
        async with cluster(tmp_path, offset_metadata_max_bytes=10) as c:
            make_topic(c)
            errors = await c.commit({("orders", 0): (1, "x" * 11), ("orders", 1): (2, "x" * 10)})
            assert errors == {("orders", 0): E.OFFSET_METADATA_TOO_LARGE, ("orders", 1): 0}
            fetched, _ = await c.fetch([("orders", 0), ("orders", 1)])
            assert fetched == {("orders", 0): (-1, -1, "", 0), ("orders", 1): (2, -1, "x" * 10, 0)}

    run(main())


def test_group_members_commit_with_their_generation(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            make_topic(c)
            generation, _leader, members = await stable_group(c, 2)
            for i, m in enumerate(members):
                errors = await c.commit(
                    {("orders", i): (10 * (i + 1), f"by {m}")}, generation=generation, member_id=m
                )
                assert errors == {("orders", i): 0}
            fetched, _ = await c.fetch([("orders", 0), ("orders", 1)], version=8)
            assert fetched == {
                ("orders", 0): (10, -1, f"by {members[0]}", 0),
                ("orders", 1): (20, -1, f"by {members[1]}", 0),
            }

    run(main())


def test_commits_are_kafka_records_in_the_groups_partition(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c)
            await c.commit({("orders", 2): (77, "meta", 3)}, group="billing")
            records = c.offsets_log_records("billing")
            key, value = records[-1]
            assert decode_key(key) == OffsetCommitKey("billing", "orders", 2, 1)
            assert key[:2] == b"\x00\x01" and value[:2] == b"\x00\x03"
            v = decode_offset_commit_value(value)
            assert (v.offset, v.leader_epoch, v.metadata) == (77, 3, "meta")
            # The other partitions hold nothing for this group.
            topic = c.apis.metadata_cache.get(OFFSETS_TOPIC)
            assert topic.configs == {"cleanup.policy": "compact", "segment.bytes": "104857600"}
            for p in range(PARTITIONS):
                plog = c.apis.replica_manager.get_partition(OFFSETS_TOPIC, p).log
                expected = 1 if p == partition_for("billing", PARTITIONS) else 0
                assert plog.log_end_offset == expected

    run(main())


def test_restart_reloads_the_stable_group_with_its_members_and_offsets(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            make_topic(c)
            generation, leader, members = await stable_group(c, 2)
            await c.commit(
                {("orders", 0): (42, "first", 2)}, generation=generation, member_id=leader
            )
            await c.commit({("orders", 1): (7, "")}, group="simple")
            await c.commit({("orders", 1): (8, "newer")}, group="simple")
            await c.commit({("orders", 0): (1, "")}, group="deleted")
            assert (
                await c.call(ApiKey.DELETE_GROUPS, 1, DeleteGroupsRequest(groups_names=["deleted"]))
            ).results[0].error_code == 0

        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            assert (await c.fetch([("orders", 0)]))[0] == {("orders", 0): (42, 2, "first", 0)}
            assert (await c.fetch(None, group="simple"))[0] == {("orders", 1): (8, -1, "newer", 0)}
            assert (await c.fetch(None, group="deleted"))[0] == {}
            # The group is Stable in its generation, with its members and their
            # assignments: a member that heartbeats goes on without a rebalance.
            described = await c.describe()
            assert (described.group_state, described.protocol_type) == ("Stable", "consumer")
            assert sorted(m.member_id for m in described.members) == sorted(members)
            assert {m.member_id: m.member_assignment for m in described.members} == {
                m: f"assignment-of-{m}".encode() for m in members
            }
            (follower,) = [m for m in members if m != leader]
            assert await c.heartbeat(follower, generation) == E.NONE
            rejoined = await c.join(member_id=follower)  # same metadata: no rebalance
            assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (
                0,
                generation,
                leader,
            )
            # The leader never comes back: it is removed once its session (10 s, from
            # the load) is up, and the group rebalances without it.
            await c.advance(6)
            assert await c.heartbeat(follower, generation) == E.NONE
            await c.advance(5)
            assert await c.heartbeat(follower, generation) == E.REBALANCE_IN_PROGRESS
            rejoin = await c.completed(c.join(member_id=follower), after=0.01)
            assert (rejoin.error_code, rejoin.generation_id, rejoin.leader) == (
                0,
                generation + 1,
                follower,
            )
            listed = await c.call(ApiKey.LIST_GROUPS, 0, ListGroupsRequest())
            assert sorted(g.group_id for g in listed.groups) == ["g", "simple"]

    run(main())


def test_a_reloaded_group_over_group_max_size_rebalances(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            make_topic(c)
            generation, _leader, members = await stable_group(c, 3)

        async with cluster(tmp_path, group_max_size=2) as c:
            described = await c.describe()
            assert (described.group_state, len(described.members)) == ("PreparingRebalance", 3)
            assert {await c.heartbeat(m, generation) for m in members} == {E.REBALANCE_IN_PROGRESS}

    run(main())


def test_offsets_expire_from_empty_groups(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c)
            await c.commit({("orders", 0): (5, "")}, group="old")
            manager = c.coordinator.manager
            assert manager.expire_offsets() == 0  # within offsets.retention.minutes
            far_future = (
                manager.groups["old"].offsets[("orders", 0)].commit_timestamp
                + 7 * 24 * 3600 * 1000
                + 1
            )
            assert manager.expire_offsets(far_future) == 1
            assert "old" not in c.coordinator.groups
            assert c.offsets_log_records("old")[-1][1] is None  # tombstone

    run(main())


def test_offsets_expire_on_the_check_interval(tmp_path):
    async def main():
        async with cluster(tmp_path, offsets_retention_minutes=15) as c:
            make_topic(c)
            await c.commit({("orders", 0): (5, "")}, group="old")
            # offsets.retention.check.interval.ms is 10 minutes: the first check is at
            # 10 minutes, before the 15 minutes of retention are up.
            await c.advance(599)
            await c.advance(2)
            assert "old" in c.coordinator.groups
            await c.advance(610)  # the second check, at 20 minutes
            assert "old" not in c.coordinator.groups
            assert c.offsets_log_records("old")[-1][1] is None  # tombstone

    run(main())


def test_deleting_a_topic_drops_its_offsets(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders")
            make_topic(c, "audit", 1)
            await c.commit({("orders", 0): (5, ""), ("audit", 0): (6, "")}, group="both")
            await c.commit({("orders", 1): (7, "")}, group="orders-only")
            assert c.coordinator.on_topic_deleted("orders") == 2
            assert (await c.fetch(None, group="both"))[0] == {("audit", 0): (6, -1, "", 0)}
            assert "orders-only" not in c.coordinator.groups  # Empty and without offsets: gone

    run(main())


# ---- administration ----


def test_describe_list_and_delete_groups(tmp_path):
    async def main():
        async with cluster(tmp_path, group_initial_rebalance_delay_ms=50) as c:
            make_topic(c)
            await stable_group(c, 1, group="active")
            await c.commit({("orders", 0): (3, "")}, group="idle")

            unknown = await c.describe("nope")
            assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", [])
            with_ops = await c.call(
                ApiKey.DESCRIBE_GROUPS,
                3,
                DescribeGroupsRequest(groups=["active"], include_authorized_operations=True),
            )
            assert with_ops.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)

            listed = await c.call(
                ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=["stable"])
            )
            assert [(g.group_id, g.group_state) for g in listed.groups] == [("active", "Stable")]
            listed = await c.call(
                ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["consumer"])
            )
            assert listed.groups == []
            listed = await c.call(
                ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["classic"])
            )
            assert sorted((g.group_id, g.group_type) for g in listed.groups) == [
                ("active", "classic"),
                ("idle", "classic"),
            ]

            deleted = await c.call(
                ApiKey.DELETE_GROUPS,
                2,
                DeleteGroupsRequest(groups_names=["active", "idle", "nope"]),
            )
            assert [(r.group_id, r.error_code) for r in deleted.results] == [
                ("active", E.NON_EMPTY_GROUP),
                ("idle", 0),
                ("nope", E.GROUP_ID_NOT_FOUND),
            ]
            assert (await c.fetch([("orders", 0)], group="idle"))[0] == {
                ("orders", 0): (-1, -1, "", 0)
            }
            assert c.offsets_log_records("idle")[-1][1] is None  # the offset's tombstone
            listed = await c.call(ApiKey.LIST_GROUPS, 0, ListGroupsRequest())
            assert [g.group_id for g in listed.groups] == ["active"]

    run(main())


def test_find_coordinator(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            assert c.apis.metadata_cache.get(OFFSETS_TOPIC) is None  # created on first use
            for version in (0, 1, 3):
                r = await c.call(ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key="g"))
                assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, "127.0.0.1", 19092)
            topic = c.apis.metadata_cache.get(OFFSETS_TOPIC)
            assert topic.partitions == PARTITIONS and topic.configs["cleanup.policy"] == "compact"
            r = await c.call(
                ApiKey.FIND_COORDINATOR,
                4,
                FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]),
            )
            assert [(x.key, x.error_code, x.node_id, x.port) for x in r.coordinators] == [
                ("a", 0, 0, 19092),
                ("b", 0, 0, 19092),
            ]
            r = await c.call(
                ApiKey.FIND_COORDINATOR,
                4,
                FindCoordinatorRequest(key_type=1, coordinator_keys=["txn"]),
            )
            assert (r.coordinators[0].error_code, r.coordinators[0].node_id) == (
                E.COORDINATOR_NOT_AVAILABLE,
                -1,
            )
            r = await c.call(
                ApiKey.FIND_COORDINATOR, 2, FindCoordinatorRequest(key="txn", key_type=1)
            )
            assert r.error_code == E.COORDINATOR_NOT_AVAILABLE

    run(main())
