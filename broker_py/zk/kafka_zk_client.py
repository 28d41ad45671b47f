"""The broker's ZooKeeper client (Kafka's ``KafkaZkClient``), the only kazoo user.

Calls block (kazoo's own threads do the I/O); the broker makes them through
``asyncio.to_thread``, and session-state changes reach it through ``on_state``, which
runs on a kazoo thread and must only hand the event to the event loop.

Invariants:
- The chroot of ``zookeeper.connect`` is created before the client uses it, and the
  top-level persistent paths Kafka creates exist once :meth:`start` returns.
- Broker registration is ``multi(create(/brokers/ids/N, EPHEMERAL), setData(.., 0))``;
  the broker epoch is the node's czxid. A node left by an earlier session of this
  client is deleted and created again; a node of any other session means another live
  broker has the id, and registration fails.
- Controller election is ``multi(create(/controller, EPHEMERAL), setData(/controller_epoch,
  e+1, version v))``; the winner keeps (epoch, zkVersion of /controller_epoch), and
  every later controller write is ``multi(check(/controller_epoch, zkVersion), ...)``,
  so a controller that lost its place fails with :class:`ControllerMovedError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from broker_py.zk import zk_data
from logstore.protocol.errors import KafkaException

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


class ZooKeeperError(KafkaException):
    """ZooKeeper could not be reached or refused an operation."""


class ZooKeeperClientTimeoutError(ZooKeeperError):
    """No connection to ZooKeeper within ``zookeeper.connection.timeout.ms``."""


class BrokerIdInUseError(ZooKeeperError):
    """Another live broker holds ``/brokers/ids/N``."""


class ControllerMovedError(ZooKeeperError):
    """A controller write found ``/controller_epoch`` changed: another controller exists."""


@dataclass(frozen=True)
class ControllerEpoch:
    epoch: int
    zk_version: int


class KafkaZkClient:
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
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        self._on_state = on_state
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._zk.add_listener(self._state_changed)
        self._sessions: set[int] = set()  # every session id this client has had

    # ---- lifecycle ----

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
                f"no connection to ZooKeeper at {self.connect} within {self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
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

    @property
    def session_id(self) -> int:
        client_id = self._zk.client_id
        if client_id is None:
            raise ZooKeeperError("no ZooKeeper session")
        return client_id[0]

    @property
    def connected(self) -> bool:
        return self._zk.state == KazooState.CONNECTED

    # ---- cluster id ----

    def create_or_get_cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``/cluster/id`` if some broker wrote it, else ``proposed``."""
        try:
            self._zk.create(zk_data.ClusterIdZNode.PATH, zk_data.ClusterIdZNode.encode(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self._zk.get(zk_data.ClusterIdZNode.PATH)
            return zk_data.ClusterIdZNode.decode(data)

    # ---- brokers ----

    def register_broker(self, broker_id: int, data: bytes) -> int:
        """Creates ``/brokers/ids/<broker_id>`` for this session; returns the broker
        epoch (the node's czxid). BrokerIdInUseError if another live broker has it."""
        path = zk_data.BrokerIdZNode.path(broker_id)
        for _ in range(3):
            try:
                return self._create_ephemeral(path, data)
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue  # its session just ended: try again
                owner = stat.ephemeralOwner
                if owner == self.session_id:
                    return stat.czxid  # ours already (a retried create)
                if owner in self._sessions:
                    log.info("deleting %s left by an earlier session of this broker", path)
                    try:
                        self._zk.delete(path, version=stat.version)
                    except (NoNodeError, BadVersionError):
                        pass
                    continue
                raise BrokerIdInUseError(
                    f"broker.id {broker_id} is registered at {path} by another live broker (session 0x{owner:x}); "
                    "two brokers cannot share a broker.id"
                ) from None
        raise ZooKeeperError(f"could not register {path}")

    def _create_ephemeral(self, path: str, data: bytes) -> int:
        transaction = self._zk.transaction()
        transaction.create(path, b"", ephemeral=True)
        transaction.set_data(path, data, version=0)
        results = transaction.commit()
        if isinstance(results[0], NodeExistsError):
            raise results[0]
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise ZooKeeperError(f"registering {path}: {result!r}")
        stat: ZnodeStat = results[1]
        return stat.czxid

    def get_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self._zk.get_children(zk_data.BrokerIdsZNode.PATH) if c.isdigit())

    def get_broker(self, broker_id: int) -> tuple[bytes, int] | None:
        """(the registration's data, the broker epoch), or None if not registered."""
        try:
            data, stat = self._zk.get(zk_data.BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return data, stat.czxid

    # ---- controller ----

    def get_controller_id(self) -> int | None:
        try:
            data, _ = self._zk.get(zk_data.ControllerZNode.PATH)
        except NoNodeError:
            return None
        return zk_data.ControllerZNode.decode(data)

    def get_controller_epoch(self) -> ControllerEpoch | None:
        try:
            data, stat = self._zk.get(zk_data.ControllerEpochZNode.PATH)
        except NoNodeError:
            return None
        return ControllerEpoch(zk_data.ControllerEpochZNode.decode(data), stat.version)

    def register_controller_and_increment_epoch(self, controller_id: int, timestamp_ms: int) -> ControllerEpoch:
        """Tries to become the controller: creates ``/controller`` and bumps
        ``/controller_epoch`` in one multi. Returns the new epoch and its zkVersion;
        ControllerMovedError when another broker is (or just became) the controller."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._zk.create(zk_data.ControllerEpochZNode.PATH, zk_data.ControllerEpochZNode.encode(0))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        new_epoch = current.epoch + 1
        transaction = self._zk.transaction()
        transaction.create(zk_data.ControllerZNode.PATH, zk_data.ControllerZNode.encode(controller_id, timestamp_ms), ephemeral=True)
        transaction.set_data(zk_data.ControllerEpochZNode.PATH, zk_data.ControllerEpochZNode.encode(new_epoch), version=current.zk_version)
        results = transaction.commit()
        if not any(isinstance(r, Exception) for r in results):
            return ControllerEpoch(new_epoch, results[1].version)
        # NODEEXISTS or BADVERSION: won only if both nodes say so (a retried multi).
        after = self.get_controller_epoch()
        if self.get_controller_id() == controller_id and after is not None and after.epoch == new_epoch:
            try:
                _, stat = self._zk.get(zk_data.ControllerZNode.PATH)
            except NoNodeError:
                stat = None
            if stat is not None and stat.ephemeralOwner == self.session_id:
                return after
        raise ControllerMovedError(f"broker {self.get_controller_id()} is the controller (epoch {after.epoch if after else '?'})")

    def controller_transaction(self, epoch_zk_version: int, build: Callable[[object], None]) -> list:
        """Runs ``build(transaction)``'s operations in one multi behind
        ``check(/controller_epoch, epoch_zk_version)``; returns their results (the
        check's left out). ControllerMovedError if the epoch moved; the first error of
        an operation is raised as it is."""
        transaction = self._zk.transaction()
        transaction.check(zk_data.ControllerEpochZNode.PATH, epoch_zk_version)
        build(transaction)
        results = transaction.commit()
        if isinstance(results[0], BadVersionError) or isinstance(results[0], NoNodeError):
            raise ControllerMovedError(f"/controller_epoch is no longer at version {epoch_zk_version}: another controller exists")
        for result in results[1:]:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result
        return results[1:]

    def resign_controller(self) -> None:
        """Deletes ``/controller`` if this session holds it."""
        try:
            _, stat = self._zk.get(zk_data.ControllerZNode.PATH)
            if stat.ephemeralOwner == self.session_id:
                self._zk.delete(zk_data.ControllerZNode.PATH, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass
