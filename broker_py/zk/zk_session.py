"""The broker's ZooKeeper session: the chroot, Kafka's top-level paths, session states and
the cluster id.

Calls block (kazoo's own threads do the I/O); the broker makes them through
``asyncio.to_thread``, and session-state changes reach it through ``on_state``, which runs
on a kazoo thread and must only hand the event to the event loop.

Invariants:
- The chroot of ``zookeeper.connect`` is created before the session uses it, and the
  top-level persistent paths Kafka creates exist once :meth:`ZkSession.start` returns.
- Paths given to the client are chroot-relative absolute paths; data is bytes in
  :mod:`broker_py.zk.zk_data`'s formats.
- ``/cluster/id`` is written once, by the first broker to start; every later one reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError

from broker_py.zk import zk_data
from broker_py.zk.zk_errors import ZooKeeperClientTimeoutError, ZooKeeperError

__all__ = ["CONNECTED", "LOST", "PERSISTENT_PATHS", "SUSPENDED", "ZkSession"]

log = logging.getLogger(__name__)

# Kafka's KafkaZkClient.createTopLevelPaths (ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    "/consumers",
    "/admin/delete_topics",
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/config/changes",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)

# The session states a state listener is called with (kazoo's ``KazooState`` names).
CONNECTED, SUSPENDED, LOST = KazooState.CONNECTED, KazooState.SUSPENDED, KazooState.LOST


class ZkSession:
    """One kazoo client, its session ids and state listeners; the base of every family of
    :class:`~broker_py.zk.kafka_zk_client.KafkaZkClient`'s methods."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        self.connect = connect
        self._hosts, self._chroot = zk_data.split_chroot(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = (
            connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        )
        self._on_state = on_state
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._zk.add_listener(self._state_changed)
        self._sessions: set[int] = set()  # every session id this client has had
        self._state_listeners: list[Callable[[str], None]] = []

    def start(self) -> None:
        """Connects (creating the chroot first) and makes Kafka's top-level paths."""
        if self._chroot:
            bootstrap = KazooClient(hosts=self._hosts, timeout=self.session_timeout_ms / 1000)
            self._start(bootstrap)
            try:
                bootstrap.ensure_path(self._chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._start(self._zk)
        for path in PERSISTENT_PATHS:
            self._zk.ensure_path(path)

    def _start(self, client: KazooClient) -> None:
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise ZooKeeperClientTimeoutError(
                f"no connection to ZooKeeper at {self.connect} within "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
            ) from None

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()

    def _state_changed(self, state: str) -> None:
        """Runs on a kazoo thread: records the session and hands the state on."""
        if state == KazooState.CONNECTED and self._zk.client_id is not None:
            self._sessions.add(self._zk.client_id[0])
        if self._on_state is not None:
            self._on_state(state)
        for listener in list(self._state_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener %r failed", listener)

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """Also calls ``listener(state)`` (a KazooState name) on each session-state change,
        on kazoo's connection thread: it must not block nor call ZooKeeper."""
        self._state_listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[str], None]) -> None:
        if listener in self._state_listeners:
            self._state_listeners.remove(listener)

    @property
    def session_id(self) -> int:
        client_id = self._zk.client_id
        if client_id is None:
            raise ZooKeeperError("no ZooKeeper session")
        return client_id[0]

    @property
    def connected(self) -> bool:
        return self._zk.state == KazooState.CONNECTED

    def create_or_get_cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``/cluster/id`` if some broker wrote it, else ``proposed``."""
        try:
            self._zk.create(
                zk_data.ClusterIdZNode.PATH, zk_data.ClusterIdZNode.encode(proposed), makepath=True
            )
            return proposed
        except NodeExistsError:
            data, _ = self._zk.get(zk_data.ClusterIdZNode.PATH)
            return zk_data.ClusterIdZNode.decode(data)
