"""A transaction's marker that lands on an offsets partition while the partition loads,
over a real broker's log: the load reads the log up to its end as it was when the read
began, so it may find the transaction open although its marker is written meanwhile.
The marker must still end the transaction once the load is done (COMMIT applies the
offsets, ABORT drops them); left pending, OffsetFetch with require_stable would answer
UNSTABLE_OFFSET_COMMIT for the partition for ever and a read_committed consumer of the
group would never start fetching."""

from __future__ import annotations

import asyncio

import pytest

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata import Group, OffsetAndMetadata
from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker_py.server.kafka_server import _partition_writer
from logstore.protocol.error_codes import ErrorCode

from .group_harness import make_broker, mock_time

GROUP = "copier"
PRODUCER = (4242, 0)
TP = ("eos-in", 1)


@pytest.fixture
def broker(tmp_path):
    server = make_broker(tmp_path)
    yield server
    server.log_manager.shutdown()


class ReadThen:
    """A partition writer whose read for a load runs ``after_read()`` once the log is
    read and before the load gets the records: what lands on the log then is past the
    end the load read."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.after_read = None

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def read_keyed_records(self, tp, buffer_bytes):
        read = await self._inner.read_keyed_records(tp, buffer_bytes)
        if self.after_read is not None:
            await self.after_read()
        return read


def new_manager(broker, writer) -> GroupMetadataManager:
    return GroupMetadataManager(broker.apis.config, writer, cluster=False, time=mock_time())


async def commit_in_txn(manager: GroupMetadataManager, offset: int) -> None:
    """The producer's TxnOffsetCommit of ``offset`` for TP, written to the log."""
    group = manager.add_group(Group(GROUP, manager.time.milliseconds()))
    done: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
    manager.store_txn_offsets(group, *PRODUCER, {TP: OffsetAndMetadata(offset)}, done.set_result)
    assert await asyncio.wait_for(done, 10) == {TP: ErrorCode.NONE}


async def write_marker(manager: GroupMetadataManager, commit: bool) -> None:
    """The transaction coordinator's marker on the group's partition and, once it is
    written, the completion the broker then calls (as WriteTxnMarkers does)."""
    p = manager.partition_for(GROUP)
    marker = (OFFSETS_TOPIC, p, *PRODUCER, commit, 0)
    errors = await asyncio.wait_for(manager._writer.append_markers(10_000, [marker]), 10)
    assert errors == {(OFFSETS_TOPIC, p): ErrorCode.NONE}
    manager.complete_txn_offsets(PRODUCER[0], p, commit)


def pending_and_committed(manager: GroupMetadataManager) -> tuple[dict, int | None]:
    group = manager.get_group(GROUP)
    if group is None:  # nothing of the group in the log but aborted offsets
        return {}, None
    committed = group.offsets.get(TP)
    return group.pending_txn_offsets, None if committed is None else committed.offset


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_marker_written_while_the_partition_loads_ends_the_transaction(broker, commit):
    async def scenario() -> None:
        writer = ReadThen(_partition_writer(broker.apis))
        before = new_manager(broker, writer)
        await commit_in_txn(before, 17)
        # A new coordinator loads the partition; the marker lands after its read.
        after = new_manager(broker, writer)
        writer.after_read = lambda: write_marker(after, commit)
        await after.load_partition(after.partition_for(GROUP))
        pending, committed = pending_and_committed(after)
        assert pending == {}
        assert committed == (17 if commit else None)
        assert after.partition_for(GROUP) in after.owned

        # Once loaded, a second load of the same log (marker in it) agrees.
        writer.after_read = None
        again = new_manager(broker, writer)
        await again.load_partition(again.partition_for(GROUP))
        assert pending_and_committed(again) == ({}, 17 if commit else None)

    asyncio.run(scenario())
