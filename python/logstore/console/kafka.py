"""The console's connection to the cluster: one AdminClient (the CLI's
:class:`~logstore.cli.admin.Admin`) shared by every page, and the thread pool its blocking
calls run in so the web server's event loop never waits on a broker.

:meth:`Kafka.sample` is what the sampler records every interval: the sum of the high
watermarks of each non-internal topic (``topic:NAME``; their rates summed are the
records written per second), the sum of the offsets each consumer group committed
(``committed:GROUP``; summed, the records consumed per second; at most
:data:`SAMPLED_GROUPS` groups, those whose pages were opened first), and each group's
lag over the partitions it committed (``lag:GROUP``); for each share group whose page
was opened (at most :data:`SAMPLED_GROUPS`), its records in flight (``lag:GROUP``: from
its share-partition start offsets to the log end, as ``logstore group describe`` counts
them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from logstore.cli.admin import Admin, kafka_error
from logstore.cli.common import CliError
from logstore.cli.connection import ClientOptions
from logstore.cli.group import committed
from logstore.cli.share_group_describe import in_flight, share_group_at
from logstore.cli.topic import is_internal

T = TypeVar("T")
SAMPLED_GROUPS = 50
WORKERS = 8
# Longest wait for one broker's answer on a page (seconds; --timeout when shorter).
PAGE_TIMEOUT = 4.0
# How long a broker that let a request time out is skipped for offsets (seconds).
SUSPECT_SECONDS = 15.0
METADATA_TTL = 1.0


class ConsoleAdmin(Admin):
    """The CLI's Admin with offsets that never wait on a dead leader: a partition whose
    leader is not in the latest Metadata answer (at most :data:`METADATA_TTL` old), or
    let a request time out in the last :data:`SUSPECT_SECONDS`, gets
    LEADER_NOT_AVAILABLE instead of a request; the others are asked at once and each
    waited for until one shared deadline."""

    def __init__(self, options: ClientOptions) -> None:
        super().__init__(options)
        self._metadata: tuple[float, Any] | None = None
        self._suspects: dict[int, float] = {}

    def _leaders(self) -> tuple[set[int], dict[tuple[str, int], int]]:
        now = time.monotonic()
        if self._metadata is None or now - self._metadata[0] > METADATA_TTL:
            self._metadata = (now, self.metadata())
        md = self._metadata[1]
        leaders = {
            (name, p.id): p.leader for name, t in md.topics.items() for p in t.partitions.values()
        }
        return set(md.brokers), leaders

    def offsets(
        self, partitions: list[tuple[str, int]], spec: str | int
    ) -> dict[tuple[str, int], int | KafkaException]:
        if not partitions:
            return {}
        now = time.monotonic()
        live, leaders = self._leaders()
        suspects = {b for b, until in self._suspects.items() if until > now}
        out: dict[tuple[str, int], int | KafkaException] = {}
        asked = []
        for tp in partitions:
            leader = leaders.get(tp, -1)
            if leader in live and leader not in suspects:
                asked.append(tp)
            else:
                out[tp] = KafkaException(
                    KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"leader {leader} is not up")
                )
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()
        else:
            offset_spec = OffsetSpec.for_timestamp(int(spec))
        if not asked:
            return out
        futures = self.client.list_offsets(
            {TopicPartition(t, p): offset_spec for t, p in asked}, **self.kwargs()
        )
        deadline = time.monotonic() + self.timeout + 1
        try:
            for tp, future in futures.items():
                key = (tp.topic, tp.partition)
                try:
                    offset = future.result(timeout=max(0.0, deadline - time.monotonic())).offset
                    if offset < -1 or (offset == -1 and spec in ("earliest", "latest")):
                        # librdkafka's OFFSET_INVALID for a partition whose leader never
                        # answered within the request timeout
                        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
                    out[key] = offset
                except KafkaException as exc:
                    out[key] = exc
                    kerr = kafka_error(exc)
                    if kerr is not None and kerr.code() in (
                        KafkaError._TIMED_OUT,
                        KafkaError._TRANSPORT,
                    ):
                        self._suspects[leaders[key]] = time.monotonic() + SUSPECT_SECONDS
                except TimeoutError:
                    out[key] = KafkaException(KafkaError(KafkaError._TIMED_OUT))
                    self._suspects[leaders[key]] = time.monotonic() + SUSPECT_SECONDS
        finally:
            self.client.poll(0)
        return out


@dataclasses.dataclass
class Node:
    id: int
    host: str
    port: int
    rack: str | None


class Kafka:
    def __init__(self, options: ClientOptions) -> None:
        # every wait on a broker is at most PAGE_TIMEOUT (or --timeout when shorter)
        self.options = dataclasses.replace(options, timeout=min(options.timeout, PAGE_TIMEOUT))
        self._admin: ConsoleAdmin | None = None
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="console")
        # Every broker seen alive (by id), so one that stops is still listed, as down.
        self.nodes: dict[int, Node] = {}
        # Groups whose pages were opened: sampled before the others.
        self.watched: dict[str, None] = {}
        # Share groups whose pages were opened: their records in flight are sampled.
        self.shares: dict[str, None] = {}

    @property
    def admin(self) -> ConsoleAdmin:
        with self._lock:
            if self._admin is None:
                self._admin = ConsoleAdmin(self.options)
            return self._admin

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def remember(self, nodes: list[Any]) -> None:
        """Keeps each broker's address (and rack: DescribeCluster's nodes carry one,
        Metadata's as confluent-kafka gives them do not)."""
        for n in nodes:
            known = self.nodes.get(n.id)
            rack = getattr(n, "rack", None) or (known.rack if known else None)
            self.nodes[n.id] = Node(n.id, n.host, n.port, rack)

    def sample(self) -> dict[str, float]:
        admin = self.admin
        md = admin.metadata()
        self.remember(list(md.brokers.values()))
        tps = [
            (name, p)
            for name, t in md.topics.items()
            if not is_internal(name) and t.error is None
            for p in t.partitions
        ]
        ends = admin.offsets(tps, "latest")
        values: dict[str, float] = {}
        for (topic, _p), end in ends.items():
            if isinstance(end, int) and end >= 0:
                values[f"topic:{topic}"] = values.get(f"topic:{topic}", 0) + end
        listed = admin.result(
            admin.client.list_consumer_groups(**admin.kwargs()), "list groups"
        ).valid
        names = sorted(g.group_id for g in listed)
        names = sorted(names, key=lambda g: g not in self.watched)[:SAMPLED_GROUPS]
        for group_id in names:
            try:
                offsets = committed(admin, group_id)
            except Exception:
                continue
            lag = 0
            values[f"committed:{group_id}"] = sum(offsets.values())
            for tp, offset in offsets.items():
                end = ends.get(tp)
                if isinstance(end, int):
                    lag += max(0, end - offset)
            values[f"lag:{group_id}"] = lag
        for group_id in list(self.shares)[:SAMPLED_GROUPS]:
            try:
                share = share_group_at(self.options, group_id)
            except CliError:
                continue
            if share is not None:
                values[f"lag:{group_id}"] = sum(
                    in_flight(start, None, ends.get(tp)) or 0
                    for tp, start in share["start_offsets"].items()
                )
        return values
