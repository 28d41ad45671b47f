"""The group coordinator's membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup
through the request handlers, on the harness of ``group_harness``."""

from __future__ import annotations

import asyncio

import pytest

from broker_py.coordinator.group.group_metadata_records import (
    GroupMetadataKey,
    decode_group_metadata_value,
    decode_key,
)
from broker_py.server.kafka_server import new_group_coordinator
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.group import (
    LeaveGroupRequest,
)
from tests.broker.group_harness import (
    Cluster,
    E,
    cluster,
    make_broker,
    make_topic,
    mock_time,
    run,
    stable_group,
)

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
