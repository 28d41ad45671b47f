"""The follower partitions' fetchers (Kafka's ``ReplicaFetcherManager``).

A partition is fetched by fetcher ``(leader id, fetcher id)`` with fetcher id
``abs(31 * hashCode(topic) + partition) % num.replica.fetchers`` (Java's
``String.hashCode``, Kafka's ``Utils.abs``), so each leader gets up to
``num.replica.fetchers`` connections from this broker. A fetcher is made on first use,
remade when its leader's endpoint changed, and shut down once it fetches nothing.
Every client id is ``broker-<id>-fetcher-<fetcher id>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from broker_py.common.java_string_hash import java_string_hashcode
from broker_py.network.network_client import NetworkClient
from broker_py.replication.leader_end_point import (
    FetchConfig,
    PartitionFetchState,
    RemoteLeaderEndPoint,
    TopicPartition,
)
from broker_py.replication.replica_fetcher_thread import ReplicaFetcherThread

if TYPE_CHECKING:
    from broker_py.controller.controller_store import BrokerRegistration
    from broker_py.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# (host, port) of a broker's inter-broker endpoint, or None when unknown.
Endpoint = tuple[str, int]


class ReplicaFetcherManager:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        num_fetchers: int,
        make_client: Callable[[str, int, str], NetworkClient],
        endpoint_of: Callable[[int, BrokerRegistration | None], Endpoint | None],
        fetch_config: FetchConfig,
        backoff_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.num_fetchers = num_fetchers
        self._make_client = make_client
        self._endpoint_of = endpoint_of
        self.fetch_config = fetch_config
        self.backoff_ms = backoff_ms
        self.fetchers: dict[tuple[int, int], tuple[Endpoint, ReplicaFetcherThread]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def fetcher_id(self, topic: str, index: int) -> int:
        return ((31 * java_string_hashcode(topic) + index) & 0x7FFFFFFF) % self.num_fetchers

    def add_fetcher_for_partitions(
        self,
        partitions: dict[TopicPartition, tuple[int, PartitionFetchState]],
        live_leaders: dict[int, BrokerRegistration] | None = None,
    ) -> list[TopicPartition]:
        """Starts fetching each partition from its leader (``live_leaders``: the leaders'
        registrations a LeaderAndIsr named); returns those whose leader's endpoint is
        unknown (they wait for the next LeaderAndIsr)."""
        unknown: list[TopicPartition] = []
        grouped: dict[tuple[int, int], dict[TopicPartition, PartitionFetchState]] = {}
        for tp, (leader_id, state) in partitions.items():
            grouped.setdefault((leader_id, self.fetcher_id(*tp)), {})[tp] = state
        for (leader_id, fetcher_id), states in grouped.items():
            endpoint = self._endpoint_of(leader_id, (live_leaders or {}).get(leader_id))
            if endpoint is None:
                log.warning("no endpoint of broker %d to fetch %s from", leader_id, sorted(states))
                unknown.extend(states)
                continue
            held = self.fetchers.get((leader_id, fetcher_id))
            if held is not None and held[0] != endpoint:
                states = {**held[1].partitions, **states}
                self._close(held[1])
                held = None
            if held is None:
                name = f"broker-{self.broker_id}-fetcher-{fetcher_id}"
                client = self._make_client(endpoint[0], endpoint[1], name)
                fetcher = ReplicaFetcherThread(
                    f"{name}-from-{leader_id}",
                    leader_id,
                    RemoteLeaderEndPoint(self.broker_id, client, self.fetch_config),
                    self.replica_manager,
                    self.backoff_ms,
                )
                held = (endpoint, fetcher)
                self.fetchers[(leader_id, fetcher_id)] = held
            held[1].add_partitions(states)
        return unknown

    def remove_fetcher_for_partitions(
        self, tps: Iterable[TopicPartition], shutdown_idle: bool = True
    ) -> None:
        tps = list(tps)
        for _, fetcher in self.fetchers.values():
            fetcher.remove_partitions(tps)
        if shutdown_idle:
            self.shutdown_idle_fetchers()

    def shutdown_idle_fetchers(self) -> None:
        for key, (_, fetcher) in list(self.fetchers.items()):
            if fetcher.idle:
                del self.fetchers[key]
                self._close(fetcher)

    def _close(self, fetcher: ReplicaFetcherThread) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.shutdown())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def fetching(self, tp: TopicPartition) -> PartitionFetchState | None:
        for _, fetcher in self.fetchers.values():
            state = fetcher.partitions.get(tp)
            if state is not None:
                return state
        return None

    async def shutdown(self) -> None:
        fetchers = [f for _, f in self.fetchers.values()]
        self.fetchers.clear()
        await asyncio.gather(
            *(f.shutdown() for f in fetchers), *self._closing, return_exceptions=True
        )
