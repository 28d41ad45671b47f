"""The entity nodes of admin requests (configs, ACLs, SCRAM credentials) and their change
notifications: versioned reads, conditional writes, sequential notification nodes.

Each method raises :class:`~broker_py.zk.zk_errors.ZooKeeperError`, and only that, when
ZooKeeper fails (connection lost, session expired, a path it refuses); the outcomes they
name are return values (False for a write another writer got in first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker_py.zk.zk_errors import zk_failures
from broker_py.zk.zk_node_ops import ZkNodeOps

__all__ = ["ZkEntityNodes"]


class ZkEntityNodes(ZkNodeOps):
    @zk_failures
    def ensure_paths(self, paths: Iterable[str]) -> None:
        """Creates each persistent path (and its parents) that does not exist."""
        for path in paths:
            self._zk.ensure_path(path)

    @zk_failures
    def read_versioned(self, path: str) -> tuple[bytes, int] | None:
        """(data, zkVersion) of the node, or None if there is none."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    @zk_failures
    def read_versioned_many(self, paths: Iterable[str]) -> list[tuple[bytes, int] | None]:
        """:meth:`read_versioned` of each path, pipelined."""
        return [
            None if got is None else (got[0], got[1].version) for got in self.get_data_many(paths)
        ]

    @zk_failures
    def list_children(self, path: str) -> list[str]:
        """The node's children ([] if there is no node)."""
        return self.get_children(path)

    @zk_failures
    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Creates the persistent node (with its parents); False if it exists (Kafka's
        ``createAclsForResourceIfNotExists``: the node's version is then 0)."""
        try:
            self._zk.create(path, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    @zk_failures
    def conditional_set(self, path: str, data: bytes, version: int) -> bool:
        """setData at ``version``; False when the node moved on or is gone (Kafka's
        ``conditionalUpdatePath``)."""
        try:
            self._zk.set(path, data, version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    @zk_failures
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

    @zk_failures
    def set_or_create_entity(self, path: str, data: bytes) -> None:
        """:meth:`set_or_create` (Kafka's ``setOrCreateEntityConfigs``)."""
        self.set_or_create(path, data)

    @zk_failures
    def create_sequential(self, path_prefix: str, data: bytes) -> str:
        """Creates the persistent sequential node ``<path_prefix><10 digits>`` (parents
        made); returns its path."""
        return self._zk.create(path_prefix, data, makepath=True, sequence=True)

    @zk_failures
    def ctimes(self, paths: Sequence[str]) -> list[int | None]:
        """Each node's creation time (ms), None if there is no node, pipelined."""
        return [None if stat is None else stat.ctime for stat in self.get_stat_many(paths)]

    @zk_failures
    def delete_if_exists(self, path: str) -> None:
        self.delete(path)
