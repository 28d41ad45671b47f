"""The live consumer-group coordinator (KIP-848), driven through its handlers with decoded
requests over a real broker's logs (no sockets), on a MockTime: a heartbeat's records are
in ``__consumer_offsets`` when it is answered; a write that fails (a batch over
``message.max.bytes``) is answered with Kafka's mapped error and the group is rebuilt
from what was written; a member whose session times out is removed and its removal
written; bad requests get INVALID_REQUEST, unknown groups GROUP_ID_NOT_FOUND, a classic
group with members is not a consumer group."""

from __future__ import annotations

import uuid

from broker_py.coordinator.group.modern import record_serde
from broker_py.coordinator.group.modern.records import (
    CurrentAssignmentRecord,
    CurrentAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataTombstone,
)
from broker_py.server.handlers import call
from broker_py.server.handlers.consumer_group import HANDLERS
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.frame import Request
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from tests.broker.group_harness import CONNECTION, cluster, make_topic, run

E = ErrorCode


async def _call(c, api_key: ApiKey, body, version: int = 1):
    wire = body.encode(version)
    decoded = type(body).decode(wire, version)
    header = RequestHeader(
        api_key=int(api_key), api_version=version, correlation_id=1, client_id="cg-test"
    )
    response = await call(
        HANDLERS[api_key], c.apis, Request(header=header, body=decoded, size=len(wire)), CONNECTION
    )
    return type(response).decode(response.encode(version), version)


async def _join(c, group: str, member_id: str, topics: list[str]):
    return await _call(
        c,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=topics,
            topic_partitions=[],
        ),
    )


async def _describe(c, group: str):
    response = await _call(
        c,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
    )
    (described,) = response.groups
    return described


def _consumer_group_records(c, group: str):
    out = []
    for key, value in c.offsets_log_records(group):
        record = record_serde.deserialize(key, value)
        if record is not None:
            out.append(record)
    return out


def test_heartbeat_records_are_written_before_the_answer(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 3)
            member = uuid.uuid4().hex
            response = await _join(c, "g", member, ["orders"])
            assert (response.error_code, response.member_id, response.member_epoch) == (
                0,
                member,
                1,
            )
            assert sorted(
                p for tp in response.assignment.topic_partitions for p in tp.partitions
            ) == [
                0,
                1,
                2,
            ]
            records = _consumer_group_records(c, "g")
            assert GroupEpochRecord("g", 1) in records
            (current,) = [r for r in records if isinstance(r, CurrentAssignmentRecord)]
            assert (current.member_id, current.member_epoch) == (member, 1)
            d = await _describe(c, "g")
            assert (d.error_code, d.group_state, d.group_epoch) == (0, "Stable", 1)
            assert [(m.member_id, m.client_id, m.client_host) for m in d.members] == [
                (member, "cg-test", "/10.1.2.3")
            ]

    run(main())


def test_a_failed_write_is_answered_and_the_group_rebuilt_from_what_was_written(tmp_path):
    async def main():
        async with cluster(tmp_path, message_max_bytes=2000) as c:
            make_topic(c, "orders", 2)
            first = uuid.uuid4().hex
            assert (await _join(c, "g", first, ["orders"])).error_code == 0
            # A member whose metadata record alone is over message.max.bytes.
            many = [f"topic-with-a-long-name-{i:04d}-" + "x" * 40 for i in range(60)]
            refused = await _join(c, "g", uuid.uuid4().hex, ["orders", *many])
            assert refused.error_code == E.UNKNOWN_SERVER_ERROR
            d = await _describe(c, "g")
            assert [m.member_id for m in d.members] == [first]
            assert (d.group_epoch, d.assignment_epoch, d.group_state) == (1, 1, "Stable")
            # The first member carries on at its epoch.
            again = await _call(
                c,
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                ConsumerGroupHeartbeatRequest(group_id="g", member_id=first, member_epoch=1),
            )
            assert (again.error_code, again.member_epoch) == (0, 1)

    run(main())


def test_session_timeout_removes_the_member_and_writes_it(tmp_path):
    async def main():
        async with cluster(
            tmp_path,
            group_consumer_min_session_timeout_ms=1000,
            group_consumer_session_timeout_ms=1000,
            group_consumer_min_heartbeat_interval_ms=100,
            group_consumer_heartbeat_interval_ms=100,
        ) as c:
            make_topic(c, "orders", 2)
            a, b = uuid.uuid4().hex, uuid.uuid4().hex
            assert (await _join(c, "g", a, ["orders"])).error_code == 0
            await c.advance(0.6)
            assert (await _join(c, "g", b, ["orders"])).error_code == 0
            await c.advance(0.6)  # a's session (1 s) is over; b's is not
            d = await _describe(c, "g")
            assert [m.member_id for m in d.members] == [b]
            records = _consumer_group_records(c, "g")
            assert CurrentAssignmentTombstone("g", a) in records
            assert MemberMetadataTombstone("g", a) in records

    run(main())


def test_bad_requests_and_the_group_namespace(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 1)
            hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
            blank = await _call(
                c, hb, ConsumerGroupHeartbeatRequest(group_id="g", member_id="", member_epoch=0)
            )
            assert (blank.error_code, blank.error_message) == (
                E.INVALID_REQUEST,
                "MemberId can't be empty.",
            )
            unknown = await _call(
                c, hb, ConsumerGroupHeartbeatRequest(group_id="nope", member_id="m", member_epoch=3)
            )
            assert unknown.error_code == E.GROUP_ID_NOT_FOUND
            bad_regex = await _call(
                c,
                hb,
                ConsumerGroupHeartbeatRequest(
                    group_id="g",
                    member_id="m",
                    member_epoch=0,
                    rebalance_timeout_ms=1000,
                    subscribed_topic_regex="(",
                    topic_partitions=[],
                ),
            )
            assert bad_regex.error_code == E.INVALID_REGULAR_EXPRESSION
            missing = await _describe(c, "nope")
            assert (missing.error_code, missing.error_message) == (
                E.GROUP_ID_NOT_FOUND,
                "Group nope not found.",
            )
            empty = await _describe(c, "")
            assert empty.error_code == E.INVALID_GROUP_ID

    run(main())


async def _commit_offsets(c, group: str, member: str, epoch: int, offsets: dict):
    from broker_py.server.handlers.groups import HANDLERS as GROUP_HANDLERS
    from logstore.protocol.messages.offset_commit import OffsetCommitRequest

    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=""
                    )
                ],
            )
            for (topic, p), o in offsets.items()
        ],
    )
    wire = body.encode(9)
    header = RequestHeader(
        api_key=int(ApiKey.OFFSET_COMMIT), api_version=9, correlation_id=1, client_id="cg-test"
    )
    response = await call(
        GROUP_HANDLERS[ApiKey.OFFSET_COMMIT],
        c.apis,
        Request(header=header, body=OffsetCommitRequest.decode(wire, 9), size=len(wire)),
        CONNECTION,
    )
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def test_offsets_of_subscribed_topics_are_kept_until_the_group_empties(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 1)
            make_topic(c, "other", 1)
            member = uuid.uuid4().hex
            assert (await _join(c, "g", member, ["orders"])).error_code == 0
            committed = await _commit_offsets(
                c, "g", member, 1, {("orders", 0): 5, ("other", 0): 7}
            )
            assert committed == {("orders", 0): 0, ("other", 0): 0}
            coordinator = c.coordinator
            # OffsetDelete keeps a subscribed topic's offsets.
            error, errors = coordinator.delete_offsets("g", [("orders", 0)])
            assert (error, errors) == (E.NONE, {("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
            # Expiry long after the commits: only the unsubscribed topic's offset goes.
            later = c.apis.time.milliseconds() + 8 * 24 * 3600 * 1000
            assert coordinator.expire_offsets(later) == 1
            assert coordinator.fetch_offsets("g", None, member, 1)[1] == {
                ("orders", 0): coordinator.manager.get_group("g").offsets[("orders", 0)]
            }
            left = await _call(
                c,
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                ConsumerGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=-1),
            )
            assert (left.error_code, left.member_epoch) == (0, -1)
            # Without members, the last offset expires and the empty group is deleted.
            assert coordinator.expire_offsets(later) == 1
            assert (await _describe(c, "g")).error_code == E.GROUP_ID_NOT_FOUND
            records = _consumer_group_records(c, "g")
            assert records[-1] == GroupEpochTombstone("g")

    run(main())


def test_txn_offset_commits_are_fenced_by_member_epoch(tmp_path):
    from broker_py.coordinator.group.group_metadata import OffsetAndMetadata
    from broker_py.coordinator.group.offsets import TxnOffsetCommitParams

    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 1)
            member = uuid.uuid4().hex
            assert (await _join(c, "g", member, ["orders"])).error_code == 0
            offsets = {("orders", 0): OffsetAndMetadata(offset=3, leader_epoch=-1, metadata="")}

            def commit(member_id: str, epoch: int):
                result = c.coordinator.commit_txn_offsets(
                    TxnOffsetCommitParams("g", 1000, 0, member_id, None, epoch, offsets)
                )
                assert isinstance(result, dict)
                return result[("orders", 0)]

            assert commit(member, 0) == E.STALE_MEMBER_EPOCH
            assert commit("stranger", 1) == E.UNKNOWN_MEMBER_ID
            # Fenced by nothing: the transaction itself is then checked (none is known).
            assert commit(member, 1) == E.INVALID_TXN_STATE
            assert commit("", -1) == E.INVALID_TXN_STATE

    run(main())


_ANSWERS = {
    E.NONE,
    E.INVALID_REQUEST,
    E.UNKNOWN_MEMBER_ID,
    E.FENCED_MEMBER_EPOCH,
    E.UNSUPPORTED_ASSIGNOR,
    E.UNRELEASED_INSTANCE_ID,
    E.FENCED_INSTANCE_ID,
    E.GROUP_ID_NOT_FOUND,
    E.INVALID_REGULAR_EXPRESSION,
}


def _heartbeats():
    from hypothesis import strategies as st

    topic_partitions = st.lists(
        st.builds(
            ConsumerGroupHeartbeatRequest.TopicPartitions,
            topic_id=st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=7)]),
            partitions=st.lists(st.integers(-2, 5), max_size=3),
        ),
        max_size=2,
    )
    joins = st.builds(
        ConsumerGroupHeartbeatRequest,
        group_id=st.sampled_from(["g", "h"]),
        member_id=st.sampled_from(["m1", "m2", "m3"]),
        member_epoch=st.just(0),
        rebalance_timeout_ms=st.just(5000),
        subscribed_topic_names=st.just(["orders"]),
        topic_partitions=st.just([]),
    )
    steady = st.builds(
        ConsumerGroupHeartbeatRequest,
        group_id=st.sampled_from(["g", "h"]),
        member_id=st.sampled_from(["m1", "m2", "m3"]),
        member_epoch=st.integers(-1, 4),
    )
    anything = st.builds(
        ConsumerGroupHeartbeatRequest,
        group_id=st.sampled_from(["g", "h", "", " "]),
        member_id=st.sampled_from(["m1", "m2", "", " "]),
        member_epoch=st.integers(-3, 4),
        instance_id=st.sampled_from([None, "i1", ""]),
        rack_id=st.sampled_from([None, "r"]),
        rebalance_timeout_ms=st.sampled_from([-1, 0, 5000]),
        subscribed_topic_names=st.one_of(
            st.none(), st.lists(st.sampled_from(["orders", "missing", ""]), max_size=3)
        ),
        subscribed_topic_regex=st.sampled_from([None, "", "ord.*", "(", "[a-"]),
        server_assignor=st.sampled_from([None, "uniform", "range", "bogus"]),
        topic_partitions=st.one_of(st.none(), topic_partitions),
    )
    return st.one_of(joins, steady, anything)


def test_any_heartbeat_is_answered_with_a_kafka_error(tmp_path_factory):
    """Arbitrary heartbeats (bad ids, epochs, regexes, assignors, owned partitions) from a
    few members: each is answered with one of the heartbeat's error codes, none raises,
    and a heartbeat that succeeded leaves no partition held by two members."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(requests=st.lists(_heartbeats(), min_size=1, max_size=25))
    def check(requests):
        async def main():
            async with cluster(tmp_path_factory.mktemp("hb")) as c:
                make_topic(c, "orders", 3)
                for body in requests:
                    response = await _call(c, ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
                    assert ErrorCode(response.error_code) in _ANSWERS, response
                    for group in c.coordinator.consumer_groups.groups():
                        held = [
                            (t, p)
                            for m in group.members.values()
                            for t, parts in m.assigned_partitions.items()
                            for p in parts
                        ]
                        assert len(held) == len(set(held))

        run(main())

    check()


def test_a_groups_own_timeouts_are_in_force(tmp_path):
    from broker_py.coordinator.group.group_metadata_records import partition_for
    from tests.broker.group_harness import PARTITIONS

    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 1)
            own = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}
            assert c.apis.group_configs.alter("g", lambda _: dict(own), False) is None
            member = uuid.uuid4().hex
            joined = await _join(c, "g", member, ["orders"])
            assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 6000)
            manager = c.coordinator.consumer_groups.manager
            deadline = manager.timer_deadline("session", "g", member)
            assert deadline == c.time.monotonic() + 50
            other = await _join(c, "h", uuid.uuid4().hex, ["orders"])
            assert other.heartbeat_interval_ms == 5000  # the broker's default
            # Reloaded (a new coordinator), the member's session is the group's too.
            p = partition_for("g", PARTITIONS)
            c.coordinator.on_resignation(p)
            c.time.advance(10)
            c.coordinator.consumer_groups.load_records(p, _consumer_group_records(c, "g"))
            assert manager.timer_deadline("session", "g", member) == c.time.monotonic() + 50

    run(main())


def test_an_empty_classic_group_becomes_a_consumer_group_keeping_its_offsets(tmp_path):
    from broker_py.coordinator.group.group_metadata_records import GroupMetadataKey, decode_key
    from tests.broker.group_harness import stable_group

    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 2)
            generation, _, (classic_member,) = await stable_group(c, 1)
            committed = await c.commit(
                {("orders", 1): (42, "m")}, generation=generation, member_id=classic_member
            )
            assert (await c.leave([classic_member])).error_code == 0
            member = uuid.uuid4().hex
            joined = await _join(c, "g", member, ["orders"])
            assert (joined.error_code, joined.member_epoch) == (0, 1), committed
            # The classic group's metadata is deleted; its offsets stay the group's.
            metadata = [
                value
                for key, value in c.offsets_log_records("g")
                if isinstance(decode_key(key), GroupMetadataKey)
            ]
            assert metadata[-1] is None
            offsets, error = await c.fetch(version=8)
            assert (error, offsets[("orders", 1)][0]) == (0, 42)
            assert (await c.describe()).group_state == "Dead"  # DescribeGroups up to v5
            d = await _describe(c, "g")
            assert (d.error_code, [m.member_id for m in d.members]) == (0, [member])

    run(main())


def test_coordinator_errors_and_resignation(tmp_path):
    from broker_py.coordinator.group.group_metadata_records import partition_for
    from tests.broker.group_harness import PARTITIONS

    async def main():
        async with cluster(tmp_path) as c:
            make_topic(c, "orders", 1)
            member = uuid.uuid4().hex
            assert (await _join(c, "g", member, ["orders"])).error_code == 0
            p = partition_for("g", PARTITIONS)
            groups = c.coordinator.manager
            heartbeat = ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=member, member_epoch=1
            )
            groups.loading.add(p)
            loading = await _call(c, ApiKey.CONSUMER_GROUP_HEARTBEAT, heartbeat)
            assert loading.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            assert (await _describe(c, "g")).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            groups.loading.discard(p)
            # The partition's leadership goes: so do its groups.
            c.coordinator.on_resignation(p)
            assert c.coordinator.consumer_groups.group("g") is None
            moved = await _call(c, ApiKey.CONSUMER_GROUP_HEARTBEAT, heartbeat)
            assert (moved.error_code, moved.error_message) == (
                E.NOT_COORDINATOR,
                "This is not the correct coordinator.",
            )

    run(main())
