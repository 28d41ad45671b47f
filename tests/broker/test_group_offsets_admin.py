"""The group coordinator's offsets (OffsetCommit, OffsetFetch, reload, expiry) and
administration (DescribeGroups, ListGroups, DeleteGroups, FindCoordinator), through the
request handlers on the harness of ``group_harness``."""

from __future__ import annotations

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata_records import (
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
    partition_for,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest
from logstore.protocol.messages.group_admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from tests.broker.group_harness import (
    PARTITIONS,
    E,
    cluster,
    make_topic,
    run,
    stable_group,
)

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
