"""Broker registration: ``/brokers/ids/N`` and the broker epoch, and ``/brokers/seqid``.

Invariants:
- Registration is ``multi(create(/brokers/ids/N, EPHEMERAL), setData(.., 0))``; the broker
  epoch is the node's czxid.
- A node left by an earlier session of this client is deleted and created again; a node of
  any other session means another live broker has the id, and registration fails (after
  waiting up to ``wait_ms`` for that session to expire).
"""

from __future__ import annotations

import logging
import time

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat

from broker_py.controller import controller_store
from broker_py.zk import zk_data
from broker_py.zk.zk_errors import ZooKeeperError, zk_failures
from broker_py.zk.zk_session import ZkSession

__all__ = ["BrokerIdInUseError", "ZkBrokerRegistration"]

log = logging.getLogger(__name__)


class BrokerIdInUseError(ZooKeeperError, controller_store.BrokerIdInUseError):
    """Another live broker holds ``/brokers/ids/N``."""


class ZkBrokerRegistration(ZkSession):
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
                    f"broker.id {broker_id} is registered at {path} by another live broker "
                    f"(session 0x{owner:x}); two brokers cannot share a broker.id"
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

    @zk_failures
    def generate_broker_sequence_id(self) -> int:
        """A number no other call (of any broker) gets: the version ``/brokers/seqid``
        reaches when this call writes it (Kafka's ``generateBrokerSequenceId``)."""
        path = zk_data.BrokerSequenceIdZNode.PATH
        try:
            return self._zk.set(path, b"").version
        except NoNodeError:
            self._zk.ensure_path(path)
            return self._zk.set(path, b"").version
