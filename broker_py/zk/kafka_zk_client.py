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
- Paths given to the low-level methods are chroot-relative absolute paths; data is bytes
  in :mod:`broker_py.zk.zk_data`'s formats. Calls on many nodes pipeline their requests
  (at most :data:`PIPELINE` in flight) and answer in the order asked.
- The entity methods (configs, ACLs: versioned reads, conditional writes, sequential
  notification nodes) return the outcomes they name (False for a write another writer
  got in first) and raise :class:`ZooKeeperError`, only that, when ZooKeeper fails;
  :func:`zk_failure` is how an admin request answers it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker_py.controller import controller_store
from broker_py.controller.controller_store import ControllerEpoch, ControllerMovedError
from broker_py.zk import zk_data
from logstore.protocol.errors import KafkaError, KafkaException, UnknownServerError

__all__ = [
    "BATCH",
    "CONNECTED",
    "LOST",
    "SUSPENDED",
    "BrokerIdInUseError",
    "ControllerEpoch",
    "ControllerMovedError",
    "CreateOp",
    "DeleteOp",
    "KafkaZkClient",
    "PERSISTENT_PATHS",
    "PIPELINE",
    "SetDataOp",
    "ZkOp",
    "ZooKeeperClientTimeoutError",
    "ZooKeeperError",
    "first_error",
    "zk_failure",
]

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


class ZooKeeperError(KafkaException):
    """ZooKeeper could not be reached or refused an operation."""


def zk_failure(e: ZooKeeperError) -> KafkaError:
    """How an admin request that could not reach ZooKeeper is answered: as Kafka answers an
    exception that is not an ApiException, UNKNOWN_SERVER_ERROR (with what failed)."""
    return UnknownServerError(f"ZooKeeper is not available: {e}")


class ZooKeeperClientTimeoutError(ZooKeeperError):
    """No connection to ZooKeeper within ``zookeeper.connection.timeout.ms``."""


class BrokerIdInUseError(ZooKeeperError, controller_store.BrokerIdInUseError):
    """Another live broker holds ``/brokers/ids/N``."""


PIPELINE = 1000  # requests in flight at once in the batched calls
BATCH = 100  # items per multi in controller_ops


class CreateOp(NamedTuple):
    path: str
    data: bytes = b""

    def add_to(self, transaction: TransactionRequest) -> None:
        transaction.create(self.path, self.data)


class SetDataOp(NamedTuple):
    path: str
    data: bytes
    version: int = -1

    def add_to(self, transaction: TransactionRequest) -> None:
        transaction.set_data(self.path, self.data, version=self.version)


class DeleteOp(NamedTuple):
    path: str
    version: int = -1

    def add_to(self, transaction: TransactionRequest) -> None:
        transaction.delete(self.path, version=self.version)


ZkOp = CreateOp | SetDataOp | DeleteOp  # one operation of a multi (persistent nodes only)


def _zk_failures(method: Callable) -> Callable:
    """ZooKeeper's own failures (kazoo's exceptions the method does not handle) as
    ZooKeeperError."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (KazooException, KazooTimeoutError) as e:
            raise ZooKeeperError(f"ZooKeeper {method.__name__}: {e!r}") from e

    return wrapper


def first_error(results: Sequence[object]) -> Exception | None:
    """The error that failed a multi: its first result that is an exception other than the
    RolledBackError / RuntimeInconsistency ZooKeeper gives the operations around it."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, (RolledBackError, RuntimeInconsistency)
        ):
            return result
    return None


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
        self.connection_timeout_ms = (
            connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        )
        self._on_state = on_state
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._zk.add_listener(self._state_changed)
        self._sessions: set[int] = set()  # every session id this client has had
        self._state_listeners: list[Callable[[str], None]] = []

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

    # ---- cluster id ----

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

    # ---- producer ids ----

    @_zk_failures
    def generate_broker_sequence_id(self) -> int:
        """A number no other call (of any broker) gets: the version ``/brokers/seqid``
        reaches when this call writes it (Kafka's ``generateBrokerSequenceId``)."""
        path = zk_data.BrokerSequenceIdZNode.PATH
        try:
            return self._zk.set(path, b"").version
        except NoNodeError:
            self._zk.ensure_path(path)
            return self._zk.set(path, b"").version

    def claim_producer_id_block(self, broker_id: int) -> zk_data.ProducerIdsBlock:
        """Claims the next block of ``BLOCK_SIZE`` producer ids for ``broker_id``: reads
        ``/latest_producer_id_block`` and writes the block after it, conditional on the
        version read (another broker's claim in between → read again). The first block
        starts at 0."""
        path = zk_data.ProducerIdBlockZNode.PATH
        size = zk_data.ProducerIdBlockZNode.BLOCK_SIZE
        while True:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                try:
                    self._zk.create(path, b"", makepath=True)
                except NodeExistsError:
                    pass
                continue
            first = zk_data.ProducerIdBlockZNode.decode(data).last_producer_id + 1 if data else 0
            block = zk_data.ProducerIdsBlock(broker_id, first, size)
            try:
                self._zk.set(path, zk_data.ProducerIdBlockZNode.encode(block), version=stat.version)
            except BadVersionError:
                continue
            return block

    # ---- brokers ----

    def register_broker(self, broker_id: int, data: bytes, wait_ms: int = 0) -> int:
        """Creates ``/brokers/ids/<broker_id>`` for this session; returns the broker
        epoch (the node's czxid). A registration held by another session is waited on
        for up to ``wait_ms`` (a broker restarted after a crash finds its old session's
        node until that session expires, as KAFKA-7165 retries); BrokerIdInUseError if
        it is still there then (another live broker has the id)."""
        path = zk_data.BrokerIdZNode.path(broker_id)
        deadline = time.monotonic() + wait_ms / 1000
        attempts = 0
        while True:
            attempts += 1
            if attempts > 3 and time.monotonic() > deadline:
                raise ZooKeeperError(f"could not register {path}")
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
                if time.monotonic() < deadline:
                    if attempts == 1:
                        log.info(
                            "%s is held by session 0x%x; waiting up to %d ms for it to expire",
                            path,
                            owner,
                            wait_ms,
                        )
                    time.sleep(0.2)
                    continue
                raise BrokerIdInUseError(
                    f"broker.id {broker_id} is registered at {path} by another live broker (session 0x{owner:x}); "
                    "two brokers cannot share a broker.id"
                ) from None

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
        return sorted(
            int(c) for c in self._zk.get_children(zk_data.BrokerIdsZNode.PATH) if c.isdigit()
        )

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

    def register_controller_and_increment_epoch(
        self, controller_id: int, timestamp_ms: int
    ) -> ControllerEpoch:
        """Tries to become the controller: creates ``/controller`` and bumps
        ``/controller_epoch`` in one multi. Returns the new epoch and its zkVersion;
        ControllerMovedError when another broker is (or just became) the controller."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._zk.create(
                    zk_data.ControllerEpochZNode.PATH, zk_data.ControllerEpochZNode.encode(0)
                )
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        new_epoch = current.epoch + 1
        transaction = self._zk.transaction()
        transaction.create(
            zk_data.ControllerZNode.PATH,
            zk_data.ControllerZNode.encode(controller_id, timestamp_ms),
            ephemeral=True,
        )
        transaction.set_data(
            zk_data.ControllerEpochZNode.PATH,
            zk_data.ControllerEpochZNode.encode(new_epoch),
            version=current.zk_version,
        )
        results = transaction.commit()
        if not any(isinstance(r, Exception) for r in results):
            return ControllerEpoch(new_epoch, results[1].version)
        # NODEEXISTS or BADVERSION: won only if both nodes say so (a retried multi).
        after = self.get_controller_epoch()
        holder = self._controller_id_or_none()
        if holder == controller_id and after is not None and after.epoch == new_epoch:
            try:
                _, stat = self._zk.get(zk_data.ControllerZNode.PATH)
            except NoNodeError:
                stat = None
            if stat is not None and stat.ephemeralOwner == self.session_id:
                return after
        raise ControllerMovedError(
            f"broker {holder} is the controller (epoch {after.epoch if after else '?'})"
        )

    def _controller_id_or_none(self) -> int | None:
        """The controller's id; None also when ``/controller`` does not decode (as Kafka
        reads it)."""
        try:
            return self.get_controller_id()
        except zk_data.ZkDataError as e:
            log.warning("/controller does not decode: %s", e)
            return None

    def controller_transaction(
        self, epoch_zk_version: int, build: Callable[[object], None]
    ) -> list:
        """Runs ``build(transaction)``'s operations in one multi behind
        ``check(/controller_epoch, epoch_zk_version)``; returns their results (the
        check's left out). ControllerMovedError if the epoch moved; the first error of
        an operation is raised as it is."""
        transaction = self._zk.transaction()
        transaction.check(zk_data.ControllerEpochZNode.PATH, epoch_zk_version)
        build(transaction)
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise _controller_moved(epoch_zk_version)
        if (error := first_error(results[1:])) is not None:
            raise error
        return results[1:]

    def controller_ops(
        self, epoch_zk_version: int, items: Sequence[Sequence[ZkOp]], batch: int = BATCH
    ) -> list[list[object]]:
        """Runs each item's operations atomically behind ``check(/controller_epoch,
        epoch_zk_version)`` (Kafka fences every controller request so) and returns each
        item's results as if it ran alone in its own multi: a failed item's results are
        exceptions (see :func:`first_error`), and it changed nothing.

        Items go ``batch`` at a time into one multi; the items of a multi that fails run
        again one per multi. Multis are pipelined. ControllerMovedError once a check fails
        (items answered before it stand)."""
        results: list[list[object]] = [[] for _ in items]
        chunks = [
            range(at, min(at + batch, len(items))) for at in range(0, len(items), max(1, batch))
        ]
        retry: list[int] = []
        multis = [[op for i in chunk for op in items[i]] for chunk in chunks]
        for chunk, answer in zip(chunks, self._fenced_multis(epoch_zk_version, multis)):
            if len(chunk) == 1:
                results[chunk[0]] = answer
            elif first_error(answer) is not None:
                retry.extend(chunk)
            else:
                at = 0
                for i in chunk:
                    results[i], at = answer[at : at + len(items[i])], at + len(items[i])
        for i, answer in zip(
            retry, self._fenced_multis(epoch_zk_version, [items[i] for i in retry])
        ):
            results[i] = answer
        return results

    def _fenced_multis(self, epoch_zk_version: int, multis: list[list[ZkOp]]) -> list[list[object]]:
        out: list[list[object]] = []
        for start in range(0, len(multis), PIPELINE):
            pending = []
            for ops in multis[start : start + PIPELINE]:
                transaction = self._zk.transaction()
                transaction.check(zk_data.ControllerEpochZNode.PATH, epoch_zk_version)
                for op in ops:
                    op.add_to(transaction)
                pending.append(transaction.commit_async())
            answered = [p.get() for p in pending]
            if any(isinstance(r[0], (BadVersionError, NoNodeError)) for r in answered):
                raise _controller_moved(epoch_zk_version)
            out.extend(r[1:] for r in answered)
        return out

    def resign_controller(self) -> None:
        """Deletes ``/controller`` if this session holds it."""
        try:
            _, stat = self._zk.get(zk_data.ControllerZNode.PATH)
            if stat.ephemeralOwner == self.session_id:
                self._zk.delete(zk_data.ControllerZNode.PATH, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    # ---- OffsetCommit v0 ----

    @_zk_failures
    def set_or_create_consumer_offset(
        self, group: str, topic: str, partition: int, offset: int
    ) -> None:
        self.set_or_create(
            zk_data.ConsumerOffsetZNode.path(group, topic, partition),
            zk_data.ConsumerOffsetZNode.encode(offset),
        )

    @_zk_failures
    def get_consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        """The offset OffsetCommit v0 stored, or None; ZkDataError if it does not read."""
        path = zk_data.ConsumerOffsetZNode.path(group, topic, partition)
        found = self.get_data(path)
        return None if found is None else zk_data.ConsumerOffsetZNode.decode(found[0], path=path)

    # ---- low-level reads and writes ----

    def get_data(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """The node's data and stat, or None if there is no node."""
        try:
            return self._zk.get(path)
        except NoNodeError:
            return None

    def get_data_many(self, paths: Iterable[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """:meth:`get_data` of each path, pipelined."""
        return self._pipelined(self._zk.get_async, paths)

    def get_stat_many(self, paths: Iterable[str]) -> list[ZnodeStat | None]:
        """Each node's stat (None: no node), pipelined."""
        return self._pipelined(self._zk.exists_async, paths)

    def get_children(self, path: str) -> list[str]:
        """The node's children ([] if there is no node)."""
        try:
            return self._zk.get_children(path)
        except NoNodeError:
            return []

    def get_subtree(self, path: str) -> list[list[str]]:
        """The paths under ``path`` (itself excluded) by depth, deepest first, pipelined
        per level: deleting level by level in this order empties the tree."""
        levels: list[list[str]] = []
        level = [path]
        while level:
            children = self._pipelined(self._zk.get_children_async, level)
            level = [f"{parent}/{c}" for parent, names in zip(level, children) for c in names or ()]
            if level:
                levels.append(level)
        return levels[::-1]

    def _pipelined(self, call: Callable, paths: Iterable[str]) -> list:
        out: list = []
        paths = list(paths)
        for start in range(0, len(paths), PIPELINE):
            pending = [call(p) for p in paths[start : start + PIPELINE]]
            for p in pending:
                try:
                    out.append(p.get())
                except NoNodeError:
                    out.append(None)
        return out

    @_zk_failures
    def create_all(self, ops: Sequence[CreateOp]) -> bool:
        """Creates every node of ``ops`` in one multi (parents first): all or none.
        False, with nothing created, when one of them exists already."""
        transaction = self._zk.transaction()
        for op in ops:
            op.add_to(transaction)
        results = transaction.commit()
        error = first_error(results)
        if isinstance(error, NodeExistsError):
            return False
        if error is not None:
            raise error
        return True

    def create(
        self, path: str, data: bytes, *, makepath: bool = False, sequence: bool = False
    ) -> str:
        """Creates a persistent node; returns its path (with the sequence number when
        ``sequence``). kazoo's NodeExistsError / NoNodeError as they come."""
        return self._zk.create(path, data, makepath=makepath, sequence=sequence)

    def set_data(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """kazoo's NoNodeError / BadVersionError as they come."""
        return self._zk.set(path, data, version)

    def set_or_create(self, path: str, data: bytes) -> None:
        """Kafka's ``setOrCreate``: setData, and create (with parents) if there is no node."""
        while True:
            try:
                self._zk.set(path, data)
                return
            except NoNodeError:
                pass
            try:
                self._zk.create(path, data, makepath=True)
                return
            except NodeExistsError:
                pass  # created meanwhile: set it

    def delete(self, path: str, version: int = -1) -> bool:
        """Deletes the node; False if there was none."""
        try:
            self._zk.delete(path, version)
            return True
        except NoNodeError:
            return False

    # ---- entity nodes of admin requests (configs, ACLs): versioned reads, conditional writes ----
    # Each raises ZooKeeperError, and only that, when ZooKeeper fails (connection lost,
    # session expired, a path it refuses); the outcomes they name are return values.

    @_zk_failures
    def ensure_paths(self, paths: Iterable[str]) -> None:
        """Creates each persistent path (and its parents) that does not exist."""
        for path in paths:
            self._zk.ensure_path(path)

    @_zk_failures
    def read_versioned(self, path: str) -> tuple[bytes, int] | None:
        """(data, zkVersion) of the node, or None if there is none."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    @_zk_failures
    def read_versioned_many(self, paths: Iterable[str]) -> list[tuple[bytes, int] | None]:
        """:meth:`read_versioned` of each path, pipelined."""
        return [
            None if got is None else (got[0], got[1].version) for got in self.get_data_many(paths)
        ]

    @_zk_failures
    def list_children(self, path: str) -> list[str]:
        """The node's children ([] if there is no node)."""
        return self.get_children(path)

    @_zk_failures
    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Creates the persistent node (with its parents); False if it exists (Kafka's
        ``createAclsForResourceIfNotExists``: the node's version is then 0)."""
        try:
            self._zk.create(path, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    @_zk_failures
    def conditional_set(self, path: str, data: bytes, version: int) -> bool:
        """setData at ``version``; False when the node moved on or is gone (Kafka's
        ``conditionalUpdatePath``)."""
        try:
            self._zk.set(path, data, version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    @_zk_failures
    def conditional_delete(self, path: str, version: int) -> bool:
        """Deletes the node at ``version``; True also when there is no node, False when
        it moved on (Kafka's ``conditionalDelete``)."""
        try:
            self._zk.delete(path, version)
            return True
        except NoNodeError:
            return True
        except BadVersionError:
            return False

    @_zk_failures
    def set_or_create_entity(self, path: str, data: bytes) -> None:
        """:meth:`set_or_create` (Kafka's ``setOrCreateEntityConfigs``)."""
        self.set_or_create(path, data)

    @_zk_failures
    def create_sequential(self, path_prefix: str, data: bytes) -> str:
        """Creates the persistent sequential node ``<path_prefix><10 digits>`` (parents
        made); returns its path."""
        return self._zk.create(path_prefix, data, makepath=True, sequence=True)

    @_zk_failures
    def ctimes(self, paths: Sequence[str]) -> list[int | None]:
        """Each node's creation time (ms), None if there is no node, pipelined."""
        return [None if stat is None else stat.ctime for stat in self.get_stat_many(paths)]

    @_zk_failures
    def delete_if_exists(self, path: str) -> None:
        self.delete(path)

    # ---- watches (kazoo's recipes: they are re-armed after a reconnect or a new session) ----

    def children_watch(self, path: str, func: Callable[[list[str]], bool | None]) -> ChildrenWatch:
        """Calls ``func(children)`` now and on each change of ``path``'s children, on a
        kazoo thread; ``func`` returning False ends the watch. ``path`` must exist."""
        return ChildrenWatch(self._zk, path, func)

    def data_watch(
        self, path: str, func: Callable[[bytes | None, ZnodeStat | None, object], bool | None]
    ) -> DataWatch:
        """Calls ``func(data, stat, event)`` now and whenever ``path`` is created, changed
        or deleted (data and stat None while there is no node), on a kazoo thread;
        ``func`` returning False ends the watch."""
        return DataWatch(self._zk, path, func)


def _controller_moved(epoch_zk_version: int) -> ControllerMovedError:
    return ControllerMovedError(
        f"/controller_epoch is no longer at version {epoch_zk_version}: another controller exists"
    )
