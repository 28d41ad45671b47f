"""Controller election: ``/controller`` and ``/controller_epoch``.

Invariant: election is ``multi(create(/controller, EPHEMERAL), setData(/controller_epoch,
e+1, version v))``; the winner keeps (epoch, zkVersion of /controller_epoch), which fences
its every later write (:mod:`broker_py.zk.zk_controller_writes`).
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker_py.controller.controller_store import ControllerEpoch, ControllerMovedError
from broker_py.zk import zk_data
from broker_py.zk.zk_session import ZkSession

__all__ = ["ZkControllerElection"]

log = logging.getLogger(__name__)


class ZkControllerElection(ZkSession):
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

    def resign_controller(self) -> None:
        """Deletes ``/controller`` if this session holds it."""
        try:
            _, stat = self._zk.get(zk_data.ControllerZNode.PATH)
            if stat.ephemeralOwner == self.session_id:
                self._zk.delete(zk_data.ControllerZNode.PATH, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass
