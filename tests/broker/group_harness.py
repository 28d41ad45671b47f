"""A broker whose group coordinator is driven through its request handlers with decoded
requests: the harness of the group coordinator's tests.

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

import logstore
from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.config.kafka_config import BrokerConfig
from broker_py.coordinator.group.group_metadata_records import (
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
from logstore.protocol.messages.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from logstore.protocol.messages.group_admin import (
    DescribeGroupsRequest,
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
