"""Bounds on creating partitions, and the stepwise creation of a broker alone.

Limits (KIP-578's keys), checked before any replica is placed or any file touched, so a
request past them is refused up front with POLICY_VIOLATION naming the limit:

- ``max.broker.partitions``: replicas one broker may host; -1 takes the broker's file
  descriptor budget (``broker_py/network/fd_budget.py``), the same on every broker;
- ``max.partitions``: partitions in the cluster (-1: no limit).
Partitions being created count against both from the moment they are planned, so two
requests at once cannot together pass a limit each stays under.

Creation on a broker alone (:class:`LocalPartitionCreator`), in steps of at most
``STEP_PARTITIONS`` partitions: the step's logs are opened on a worker thread (the
storage engine works without the interpreter lock), registered on the event loop, and
only then is the step written to the controller store, whose controller leads them at
once. Between steps the event loop serves clients. Invariants:

- the store never names a partition whose log does not exist, so a crash at any point
  leaves a store the broker starts from; logs opened for a step the store never got are
  stray at the next start and set aside (``LogManager.set_aside_stray_logs``);
- a step that fails deletes the logs it opened, and a topic whose creation failed after
  its first step is deleted again, so a refused creation leaves nothing behind;
- a topic has at most one creation or growth under way (others get INVALID_REQUEST).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable

from broker_py.common.topic import TopicInfo
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.network import fd_budget
from logstore.protocol.errors import (
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

STEP_PARTITIONS = 256  # partitions written to the store per step
OPEN_CHUNK = 32  # logs opened per worker-thread call
# worker-thread calls at once: a new log is mostly fsyncs, made without the interpreter lock
OPEN_CHUNKS_AT_ONCE = 4


class PartitionLimits:
    def __init__(self, config, metadata_cache) -> None:
        self.config = config
        self.cache = metadata_cache
        self.reserved_replicas: dict[
            int, int
        ] = {}  # broker -> replicas planned, not yet in the metadata
        self.reserved_partitions = 0
        self._counted: tuple[object, tuple[int, dict[int, int]]] | None = None

    @property
    def max_broker_partitions(self) -> int:
        value = self.config["max.broker.partitions"]
        return fd_budget.current().max_partitions if value < 0 else value

    def _counts(self) -> tuple[int, dict[int, int]]:
        """(partitions in the cluster, replicas per broker) as the metadata has them;
        computed again only when the metadata changed (it then builds a new ``topics``)."""
        topics = self.cache.topics
        if self._counted is not None and self._counted[0] is topics:
            return self._counted[1]
        counts = self._count()
        self._counted = (topics, counts)
        return counts

    def _count(self) -> tuple[int, dict[int, int]]:
        partitions = 0
        replicas: dict[int, int] = {}
        for topic in self.cache.topics.values():
            for p in range(topic.partitions):
                state = self.cache.raw_partition_state(topic.name, p)
                if state is None:
                    continue
                partitions += 1
                for b in state.replicas:
                    replicas[b] = replicas.get(b, 0) + 1
        return partitions, replicas

    def check_count(
        self, new_partitions: int, replication_factor: int, brokers: Iterable[int]
    ) -> None:
        """Before placement: refuses what could not fit even spread evenly."""
        partitions, replicas = self._counts()
        cluster_max = self.config["max.partitions"]
        if (
            cluster_max >= 0
            and partitions + self.reserved_partitions + new_partitions > cluster_max
        ):
            raise PolicyViolationError(
                f"{new_partitions} new partitions would exceed max.partitions={cluster_max} "
                f"(the cluster has {partitions + self.reserved_partitions})"
            )
        limit = self.max_broker_partitions
        brokers = list(brokers)
        room = sum(
            max(0, limit - replicas.get(b, 0) - self.reserved_replicas.get(b, 0)) for b in brokers
        )
        needed = new_partitions * max(replication_factor, 1)
        if needed > room:
            raise PolicyViolationError(
                f"{new_partitions} new partitions with {replication_factor} replicas each "
                f"would exceed max.broker.partitions={limit} (room for {room} more replicas "
                f"on {len(brokers)} live brokers)"
            )

    def check_assignment(self, assignment: dict[int, list[int]]) -> None:
        """After placement (or for an explicit assignment): each broker within its limit."""
        _, replicas = self._counts()
        added: dict[int, int] = {}
        for rs in assignment.values():
            for b in rs:
                added[b] = added.get(b, 0) + 1
        limit = self.max_broker_partitions
        for b, n in sorted(added.items()):
            have = replicas.get(b, 0) + self.reserved_replicas.get(b, 0)
            if have + n > limit:
                raise PolicyViolationError(
                    f"broker {b} would host {have + n} partition replicas, "
                    f"more than max.broker.partitions={limit}"
                )

    def reserve(self, assignment: dict[int, list[int]]) -> None:
        self.reserved_partitions += len(assignment)
        for rs in assignment.values():
            for b in rs:
                self.reserved_replicas[b] = self.reserved_replicas.get(b, 0) + 1

    def unreserve(self, assignment: dict[int, list[int]]) -> None:
        self.reserved_partitions -= len(assignment)
        for rs in assignment.values():
            for b in rs:
                n = self.reserved_replicas.get(b, 0) - 1
                if n > 0:
                    self.reserved_replicas[b] = n
                else:
                    self.reserved_replicas.pop(b, None)


class LocalPartitionCreator:
    """Creates topics and grows them on a broker alone, in steps (see the module doc)."""

    def __init__(self, admin) -> None:
        self.admin = admin  # TopicAdminManager
        self.busy: set[str] = set()  # topics being created or grown

    def claim(self, name: str) -> None:
        if name in self.busy:
            raise InvalidRequestError(
                f"topic {name!r} is already being created or given partitions; "
                "retry once that is done"
            )
        self.busy.add(name)

    async def create_topic(
        self, name: str, assignment: TopicAssignment, configs: dict[str, str]
    ) -> None:
        """Creates the topic in steps; KafkaError leaves nothing of it."""
        admin = self.admin
        parts = sorted(assignment.partitions)
        first = {p: assignment.partitions[p] for p in parts[:STEP_PARTITIONS]}
        topic = TopicInfo(name, assignment.topic_id, len(first), configs)
        await self._open_logs(topic, list(first))
        try:
            admin._create_here(name, TopicAssignment(assignment.topic_id, first), configs)
        except BaseException:
            self._delete_logs(name, list(first))
            raise
        admin._created_here(name, len(first))
        try:
            await self.grow(
                name,
                TopicAssignment(assignment.topic_id, first),
                {p: assignment.partitions[p] for p in parts[STEP_PARTITIONS:]},
            )
        except KafkaError:
            admin.support.store.mark_topic_for_deletion(name)
            raise

    async def grow(self, name: str, current: TopicAssignment, added: dict[int, list[int]]) -> None:
        """Adds ``added`` partitions to the topic, a step at a time; KafkaError when a step
        fails (the steps before it stay)."""
        admin = self.admin
        store = admin.support.store
        parts = sorted(added)
        for i in range(0, len(parts), STEP_PARTITIONS):
            step = {p: added[p] for p in parts[i : i + STEP_PARTITIONS]}
            info = admin._metadata.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(
                    f"topic {name!r} was deleted while it was given partitions"
                )
            await self._open_logs(dataclasses.replace(info, partitions=max(step) + 1), list(step))
            grown = dataclasses.replace(current, partitions={**current.partitions, **step})
            try:
                store.set_topic_assignment(name, grown)
            except BaseException:
                self._delete_logs(name, list(step))
                raise
            current = grown
            failure = next(
                (f for p in step if (f := admin.support.log_failures.get((name, p))) is not None),
                None,
            )
            if failure is not None:
                raise failure
            await asyncio.sleep(0)

    async def _open_logs(self, topic: TopicInfo, partitions: list[int]) -> None:
        """Opens the logs of new partitions on worker threads, OPEN_CHUNK per call and
        OPEN_CHUNKS_AT_ONCE calls at a time, and registers them; all or none (those opened
        are deleted again on failure)."""
        lm = self.admin._log_manager
        config = self.admin.log_configs.effective_config(topic)
        opened: list[int] = []
        planned: dict[str, int] = {}
        chunks: list[list[tuple[int, str, bool]]] = []
        for i in range(0, len(partitions), OPEN_CHUNK):
            places = []
            for p in partitions[i : i + OPEN_CHUNK]:
                log_dir, existed = lm.place(topic.name, p, planned)
                planned[log_dir] = planned.get(log_dir, 0) + 1
                places.append((p, log_dir, existed))
            chunks.append(places)
        try:
            for i in range(0, len(chunks), OPEN_CHUNKS_AT_ONCE):
                group = chunks[i : i + OPEN_CHUNKS_AT_ONCE]
                results = await asyncio.gather(
                    *(asyncio.to_thread(_open_chunk, lm, topic, c, config) for c in group),
                    return_exceptions=True,
                )
                for places, logs in zip(group, results):
                    if isinstance(logs, BaseException):
                        continue
                    for (p, log_dir, _), plog in zip(places, logs):
                        lm.register(topic.name, p, plog, log_dir)
                        opened.append(p)
                failed = next((r for r in results if isinstance(r, BaseException)), None)
                if failed is not None:
                    raise failed
        except BaseException:
            self._delete_logs(topic.name, opened)
            raise

    def _delete_logs(self, name: str, partitions: list[int]) -> None:
        for p in partitions:
            try:
                self.admin._log_manager.delete_log(name, p)
            except Exception:
                log.exception("deleting the log of %s-%d after a failed creation", name, p)


def _open_chunk(
    lm, topic: TopicInfo, places: list[tuple[int, str, bool]], config: dict[str, str]
) -> list:
    """On a worker thread: opens each log; on failure closes and deletes the new ones of
    this chunk and raises."""
    import os
    import shutil

    logs = []
    try:
        for p, log_dir, existed in places:
            logs.append(lm.open_files(topic, p, log_dir, existed, config))
    except BaseException:
        for (p, log_dir, existed), plog in zip(places, logs):
            plog.close()
            if not existed:
                shutil.rmtree(os.path.join(log_dir, f"{topic.name}-{p}"), ignore_errors=True)
        raise
    return logs
