"""Loading an offsets partition that holds consumer-group records (KIP-848), over a real
broker's logs: the records reach the consumer-group loader in log order, tombstones
included, and rebuild the same group; a classic group and a consumer group of the same
id supersede each other, the later in the log winning; unknown and unreadable records are
skipped; offset expiry neither drops nor brings back consumer-group records."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import re2

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker_py.coordinator.group.group_metadata_records import (
    GroupMetadataValue,
    MemberMetadataValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.record_serde import serialize
from broker_py.coordinator.group.modern.records import (
    GroupEpochRecord,
    MemberMetadataTombstone,
    Record,
    TopicMetadata,
)
from broker_py.server.kafka_server import _partition_writer
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

from .group_harness import make_broker, mock_time

GROUP = "cg"
FOO = TopicMetadata(uuid.UUID(int=1), "foo", 6)


def compile_re2(pattern: str):
    compiled = re2.compile(pattern)
    return lambda name: compiled.fullmatch(name) is not None


class Loaded:
    """A consumer-group loader that keeps what each load handed it."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[Record]]] = []

    def __call__(self, partition: int, records: list[Record]) -> None:
        self.calls.append((partition, records))

    def last(self) -> list[Record]:
        return self.calls[-1][1]


@pytest.fixture
def broker(tmp_path):
    server = make_broker(tmp_path)
    yield server
    server.log_manager.shutdown()


def new_manager(broker, loader=None) -> GroupMetadataManager:
    kwargs = {} if loader is None else {"consumer_group_loader": loader}
    return GroupMetadataManager(
        broker.apis.config,
        _partition_writer(broker.apis),
        cluster=False,
        time=mock_time(),
        **kwargs,
    )


async def append(manager: GroupMetadataManager, records: list[tuple[bytes, bytes | None]]) -> None:
    """Appends one batch to GROUP's partition (whatever the records' group ids) and waits
    for it to commit."""
    done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
    ts = manager.time.milliseconds()
    manager._append(GROUP, [(k, v, [], ts) for k, v in records], done.set_result)
    assert await asyncio.wait_for(done, 10) == ErrorCode.NONE


async def load(manager: GroupMetadataManager) -> None:
    await manager.load_partition(manager.partition_for(GROUP))


def log_end(manager: GroupMetadataManager) -> int:
    partition = manager._writer.partition((OFFSETS_TOPIC, manager.partition_for(GROUP)))
    assert partition is not None
    return partition.log_end_offset


def classic_value(generation: int = 3) -> bytes:
    member = MemberMetadataValue("c-1", None, "client", "/h", 30_000, 10_000, b"sub", b"asg")
    return encode_group_metadata_value(
        GroupMetadataValue("consumer", generation, "range", "c-1", 1, [member])
    )


def consumer_group_records() -> tuple[ConsumerGroupManager, list[Record]]:
    """A group of two members, one of them gone, as the heartbeats of the consumer
    protocol write it: the records of every step, in order."""
    m = ConsumerGroupManager(ConsumerGroupConfig(), MockTime(), compile_re2)
    m.update_topics([FOO])
    written: list[Record] = []

    def beat(member_id: str, epoch: int, owned=None, **kw) -> dict:
        request = HeartbeatRequest(
            group_id=GROUP,
            member_id=member_id,
            member_epoch=epoch,
            topic_partitions=owned,
            **kw,
        )
        result = m.heartbeat(request)
        written.extend(result.records)
        return result.response.assignment

    joined = dict(rebalance_timeout_ms=5000, subscribed_topic_names=("foo",))
    a1 = beat("m1", 0, {}, **joined)
    a2 = beat("m2", 0, {}, **joined)
    a1 = beat("m1", 1, a1) or a1
    beat("m2", 2, a2)
    beat("m1", 2, a1)
    beat("m3", 0, {}, **joined)
    beat("m2", -1)
    return m, written


def test_the_loader_gets_the_records_in_log_order_and_rebuilds_the_group(broker):
    async def scenario() -> None:
        source, records = consumer_group_records()
        assert any(isinstance(r, MemberMetadataTombstone) for r in records)
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        # Offset commits of the group in between its records.
        half = len(records) // 2
        await append(manager, [serialize(r) for r in records[:half]])
        await append(
            manager,
            [(encode_offset_commit_key(GROUP, "foo", 0), encode_offset_commit_value(42, 1, "", 5))],
        )
        await append(manager, [serialize(r) for r in records[half:]])
        await load(manager)
        p = manager.partition_for(GROUP)
        assert loaded.calls == [(p, records)]
        assert p in manager.owned and p not in manager.loading
        # The offsets are the classic manager's; it has no classic group with members.
        holder = manager.get_group(GROUP)
        assert holder is not None and not holder.members
        assert holder.offsets[("foo", 0)].offset == 42

        rebuilt = ConsumerGroupManager(ConsumerGroupConfig(), MockTime(), compile_re2)
        for record in loaded.last():
            rebuilt.replay(record)
        before, after = source.groups[GROUP], rebuilt.groups[GROUP]
        assert after.group_epoch == before.group_epoch
        assert after.assignment_epoch == before.assignment_epoch
        assert after.members == before.members
        assert after.target_assignment == before.target_assignment
        assert after.partition_owner == before.partition_owner

    asyncio.run(scenario())


def test_a_manager_without_a_consumer_group_coordinator_loads_around_them(broker):
    async def scenario() -> None:
        _, records = consumer_group_records()
        manager = new_manager(broker)
        await append(manager, [serialize(r) for r in records])
        await append(manager, [(encode_group_metadata_key("classic"), classic_value())])
        await load(manager)
        assert manager.get_group(GROUP) is None
        assert manager.get_group("classic") is not None
        assert manager.partition_for(GROUP) in manager.owned

    asyncio.run(scenario())


def test_classic_to_consumer_the_consumer_group_wins(broker):
    async def scenario() -> None:
        _, records = consumer_group_records()
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        # The upgrade as Kafka writes it: the classic group's tombstone, then the new records.
        await append(manager, [(encode_group_metadata_key(GROUP), classic_value())])
        await append(manager, [(encode_group_metadata_key(GROUP), None)])
        await append(manager, [serialize(r) for r in records])
        await load(manager)
        assert loaded.last() == records
        assert manager.get_group(GROUP) is None

    asyncio.run(scenario())


def test_a_consumer_group_record_supersedes_an_earlier_classic_group(broker):
    async def scenario() -> None:
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        await append(manager, [(encode_group_metadata_key(GROUP), classic_value())])
        await append(manager, [serialize(GroupEpochRecord(GROUP, 4))])
        await load(manager)
        assert loaded.last() == [GroupEpochRecord(GROUP, 4)]
        assert manager.get_group(GROUP) is None

    asyncio.run(scenario())


def test_a_later_classic_group_supersedes_the_consumer_group(broker):
    async def scenario() -> None:
        _, records = consumer_group_records()
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        await append(manager, [serialize(r) for r in records])
        await append(manager, [serialize(GroupEpochRecord("other", 2))])
        await append(manager, [(encode_group_metadata_key(GROUP), classic_value(generation=9))])
        await load(manager)
        # The records of another group in the partition stay; GROUP is a classic group
        # again, with its members.
        assert loaded.last() == [GroupEpochRecord("other", 2)]
        group = manager.get_group(GROUP)
        assert group is not None and group.generation_id == 9 and set(group.members) == {"c-1"}

    asyncio.run(scenario())


def test_a_consumer_group_tombstone_after_a_classic_group_keeps_the_classic_group(broker):
    async def scenario() -> None:
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        await append(manager, [(encode_group_metadata_key(GROUP), classic_value())])
        await append(manager, [serialize(MemberMetadataTombstone(GROUP, "gone"))])
        await load(manager)
        assert loaded.last() == [MemberMetadataTombstone(GROUP, "gone")]
        assert manager.get_group(GROUP) is not None

    asyncio.run(scenario())


def test_unknown_and_unreadable_records_are_skipped(broker, caplog):
    async def scenario() -> None:
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        streams_key = b"\x00\x11" + len(GROUP).to_bytes(2, "big") + GROUP.encode()
        key, _ = serialize(GroupEpochRecord(GROUP, 1))
        await append(
            manager,
            [
                (streams_key, b"\x00\x00\x00"),  # a streams group's metadata (type 17)
                (key, b"\x00\x00\x00"),  # a consumer group's metadata cut short
                serialize(GroupEpochRecord(GROUP, 2)),
            ],
        )
        await load(manager)
        assert loaded.last() == [GroupEpochRecord(GROUP, 2)]
        assert "unknown type 17" in caplog.text
        assert "unreadable" in caplog.text

    asyncio.run(scenario())


def test_offset_expiry_neither_drops_nor_brings_back_consumer_group_records(broker):
    async def scenario() -> None:
        _, records = consumer_group_records()
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        await append(manager, [serialize(r) for r in records])
        await append(
            manager,
            [(encode_offset_commit_key(GROUP, "foo", 0), encode_offset_commit_value(7, 1, "", 5))],
        )
        await load(manager)
        assert manager.get_group(GROUP) is not None
        retention_ms = manager.config["offsets.retention.minutes"] * 60_000

        before = log_end(manager)
        now = manager.time.milliseconds() + retention_ms + 10**6
        assert manager.expire_offsets(now=now) == 1
        # The offset's tombstone is written (bounded wait).
        for _ in range(500):
            if log_end(manager) > before:
                break
            await asyncio.sleep(0.01)
        assert log_end(manager) == before + 1
        assert manager.get_group(GROUP) is None
        # No classic group tombstone and no consumer-group record was written: a reload hands
        # the same records and no offsets.
        reloaded = Loaded()
        again = new_manager(broker, reloaded)
        await load(again)
        assert reloaded.last() == records
        assert again.get_group(GROUP) is None

    asyncio.run(scenario())


def test_a_deleted_consumer_group_stays_deleted_and_its_id_can_be_classic_again(broker):
    async def scenario() -> None:
        source, records = consumer_group_records()
        for member_id in list(source.groups[GROUP].members):
            result = source.heartbeat(
                HeartbeatRequest(group_id=GROUP, member_id=member_id, member_epoch=-1)
            )
            records.extend(result.records)
        records.extend(source.delete_group(GROUP))
        loaded = Loaded()
        manager = new_manager(broker, loaded)
        await append(manager, [serialize(r) for r in records])
        await load(manager)
        rebuilt = ConsumerGroupManager(ConsumerGroupConfig(), MockTime(), compile_re2)
        for record in loaded.last():
            rebuilt.replay(record)
        assert GROUP not in rebuilt.groups
        # The id is then a classic group's: a reload finds that one only.
        await append(manager, [(encode_group_metadata_key(GROUP), classic_value(generation=1))])
        again = Loaded()
        second = new_manager(broker, again)
        await load(second)
        assert all(r.group_id != GROUP for r in again.last())
        group = second.get_group(GROUP)
        assert group is not None and group.generation_id == 1

    asyncio.run(scenario())
