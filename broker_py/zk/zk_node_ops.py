"""Reads, writes and watches of single znodes, and the operations of a multi.

Invariants:
- Calls on many nodes pipeline their requests (at most :data:`PIPELINE` in flight) and
  answer in the order asked.
- A multi's operations are :data:`ZkOp` values on persistent nodes; :func:`first_error` is
  the error that failed it.
- Watches are kazoo's recipes: they re-arm themselves after a reconnect and after a new
  session, and call back on a kazoo thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from kazoo.client import TransactionRequest
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker_py.zk.zk_errors import zk_failures
from broker_py.zk.zk_session import ZkSession

__all__ = ["PIPELINE", "CreateOp", "DeleteOp", "SetDataOp", "ZkNodeOps", "ZkOp", "first_error"]

PIPELINE = 1000  # requests in flight at once in the batched calls


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


def first_error(results: Sequence[object]) -> Exception | None:
    """The error that failed a multi: its first result that is an exception other than the
    RolledBackError / RuntimeInconsistency ZooKeeper gives the operations around it."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, (RolledBackError, RuntimeInconsistency)
        ):
            return result
    return None


class ZkNodeOps(ZkSession):
    """Paths are chroot-relative absolute paths; kazoo's exceptions pass through unless a
    method says otherwise."""

    # ---- reads ----

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

    # ---- writes ----

    @zk_failures
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

    # ---- watches ----

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
