"""The load and unload operations of a coordinator's partitions (partition_loads): an
empty partition owned at once, a load as a task, one load per election, a resignation
while the log is read, a load that fails, and the coordinator error of each state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from broker_py.coordinator.partition_loads import PartitionLoads
from logstore.protocol.error_codes import ErrorCode

TOPIC = "__state"


@dataclass
class Part:
    is_leader: bool = True
    log_start_offset: int = 0
    log_end_offset: int = 5


@dataclass
class Topic:
    partitions: int


class Writer:
    """The partitions of the coordinator's topic this broker holds; a read of a log waits
    until the test releases it."""

    def __init__(self, parts: dict[int, Part]) -> None:
        self.parts = parts
        self.release = asyncio.Event()
        self.reads: list[int] = []

    def topic(self, name: str) -> Topic | None:
        return Topic(3) if name == TOPIC else None

    def partition(self, tp: tuple[str, int]) -> Part | None:
        return self.parts.get(tp[1]) if tp[0] == TOPIC else None

    async def read_keyed_records(self, tp, buffer_bytes):
        self.reads.append(tp[1])
        await self.release.wait()
        return [(b"k", b"v")], {}


class Coordinator:
    """A coordinator owning what it loaded (``fail``: partitions whose load raises)."""

    def __init__(self, writer: Writer) -> None:
        self.owned: dict[int, list] = {}
        self.fail: set[int] = set()
        self.loads = PartitionLoads(TOPIC, writer, self.load, self.owned.__contains__, self.own)

    def own(self, p: int) -> None:
        self.owned[p] = []

    async def load(self, p: int) -> None:
        read = await self.loads.read(p, 1024)
        if read is None:
            return
        if p in self.fail:
            raise RuntimeError("corrupt")
        self.loads.loading.discard(p)
        self.owned[p] = read[0]


def test_elections_loads_and_resignations() -> None:
    async def run() -> None:
        writer = Writer({0: Part(log_end_offset=0), 1: Part(), 2: Part(is_leader=False)})
        c = Coordinator(writer)
        loads = c.loads
        assert loads.led_partitions() == [0, 1]
        assert loads.coordinator_error(0) == ErrorCode.NOT_COORDINATOR
        loads.on_election(0)  # empty: owned at once, no load
        assert c.owned == {0: []} and not loads.tasks and loads.coordinator_error(0) is None
        loads.on_election(2)  # not its leader
        assert loads.coordinator_error(2) == ErrorCode.NOT_COORDINATOR and not loads.tasks
        loads.on_election(1)
        loads.on_election(1)  # one load per election
        await asyncio.sleep(0)
        assert writer.reads == [1]
        assert loads.coordinator_error(1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        writer.release.set()
        await asyncio.wait_for(asyncio.gather(*loads.tasks.values()), 5)
        assert c.owned[1] == [(b"k", b"v")] and not loads.tasks
        assert loads.coordinator_error(1) is None

    asyncio.run(run())


def test_a_resignation_while_the_log_is_read_keeps_nothing() -> None:
    async def run() -> None:
        writer = Writer({1: Part()})
        c = Coordinator(writer)
        # A load run directly (as at start), resigned while it reads: nothing is owned.
        direct = asyncio.get_running_loop().create_task(c.load(1))
        await asyncio.sleep(0)
        c.loads.on_resignation(1)
        writer.release.set()
        await asyncio.wait_for(direct, 5)
        assert 1 not in c.owned and c.loads.coordinator_error(1) == ErrorCode.NOT_COORDINATOR
        # An election's load is cancelled by the resignation.
        writer.release.clear()
        c.loads.on_election(1)
        task = c.loads.tasks[1]
        await asyncio.sleep(0)
        c.loads.on_resignation(1)
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled() and 1 not in c.owned and not c.loads.loading

    asyncio.run(run())


def test_a_failed_load_leaves_the_partition_unowned_and_cancel_stops_loads() -> None:
    async def run() -> None:
        writer = Writer({0: Part(), 1: Part()})
        c = Coordinator(writer)
        c.fail.add(0)
        c.loads.on_election(0)
        writer.release.set()
        await asyncio.wait_for(asyncio.gather(*c.loads.tasks.values()), 5)
        assert c.loads.coordinator_error(0) == ErrorCode.NOT_COORDINATOR and not c.loads.tasks
        writer.release.clear()
        c.loads.on_election(1)
        tasks = c.loads.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert len(tasks) == 1 and tasks[0].cancelled() and not c.loads.tasks

    asyncio.run(run())


def test_a_partition_that_is_not_open_is_not_loaded() -> None:
    async def run() -> None:
        c = Coordinator(Writer({}))
        await c.load(2)
        assert not c.owned and not c.loads.loading

    asyncio.run(run())
