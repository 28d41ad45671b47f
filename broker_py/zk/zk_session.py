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

Reconnection (Kafka's ``ClientCnxn``: a random wait under 1 s before each reconnect, all
within the session), with ``R = min(1 s, session timeout / 3)``, ``C = min(2 s,
session timeout / 3)`` and ``S = session timeout / 3``:

- A lost connection is detected when the socket closes (ZooKeeper killed or stopped
  cleanly) or when a ping goes unanswered (kazoo pings every third of the negotiated
  session timeout and gives up at two thirds, as ``ClientCnxn`` does).
- Attempts follow each other with waits of about 0.1, 0.2, 0.4, 0.8 s, then between
  ``R`` * 2/3 and ``R``, forever (:func:`connection_retry`; kazoo's default doubles up to
  an hour, which let a broker sleep through the rest of its session). The waits start
  over after every connection established.
- Each attempt is bounded: its TCP connect gives up after ``C``
  (:class:`BoundedConnectHandler`), its wait for ZooKeeper's answer to the session
  request after ``S`` (:class:`BoundedSessionRequest`); kazoo would wait the whole
  session timeout for each. A ZooKeeper that is starting accepts connections before it
  serves them and may leave a session request unanswered; a paused one holds it; an
  address that drops packets answers no SYN. An attempt given up is followed by
  another, so a session request lost to any of them costs at most ``S`` + ``R``, not the
  session; a ZooKeeper merely slow to answer (a loaded host) still has a third of the
  session to do it.
- So while ZooKeeper refuses connections (killed), a broker tries about once a second,
  and a restarted ZooKeeper, which gives every session it restored a full timeout,
  sees the broker back within about ``R`` of serving (``S`` + ``R`` at worst): the
  session, its ephemeral ``/brokers/ids/N`` and the broker epoch survive an outage of
  any length.
- While disconnected (SUSPENDED) nothing here gives up the session; calls made meanwhile
  wait in kazoo's queue until a connection is back (calls in flight when it was lost
  fail with ConnectionLoss). Only an expired session (LOST) starts a new one.
- Each change is logged: ``ZooKeeper connection lost (session 0x..)``, ``ZooKeeper session
  0x.. reconnected after S s without a connection``, ``ZooKeeper session 0x.. expired``,
  ``ZooKeeper session 0x.. established``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.serialization import Connect
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry, RetryFailedError

from broker_py.zk import zk_data
from broker_py.zk.zk_errors import ZooKeeperClientTimeoutError, ZooKeeperError

__all__ = [
    "CONNECTED",
    "LOST",
    "PERSISTENT_PATHS",
    "SUSPENDED",
    "BoundedConnectHandler",
    "BoundedSessionRequest",
    "ZkSession",
    "attempt_timeout_s",
    "connection_retry",
    "reconnect_wait_max_s",
    "session_request_timeout_s",
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

RECONNECT_WAIT_MAX_S = 1.0  # ClientCnxn: a random wait under 1 s before each reconnect
FIRST_RECONNECT_WAIT_S = 0.1
RECONNECT_JITTER = 0.2  # each wait is its nominal value times a random 0.8..1.2
ATTEMPT_TIMEOUT_MAX_S = 2.0  # a TCP connect: two SYNs (the kernel resends after 1 s)


def reconnect_wait_max_s(session_timeout_ms: int) -> float:
    """The longest wait between two connection attempts: 1 s, or a third of the session
    timeout when that is shorter."""
    return min(RECONNECT_WAIT_MAX_S, session_timeout_ms / 3000)


def attempt_timeout_s(session_timeout_ms: int) -> float:
    """How long one attempt waits for its TCP connect: 2 s, or a third of the session
    timeout when that is shorter."""
    return min(ATTEMPT_TIMEOUT_MAX_S, session_timeout_ms / 3000)


def session_request_timeout_s(session_timeout_ms: int) -> float:
    """How long one attempt waits for the answer to its session request: a third of the
    session timeout."""
    return session_timeout_ms / 3000


def connection_retry(session_timeout_ms: int) -> KazooRetry:
    """Retries without end, waiting 0.1 s then doubling, each wait at most
    :func:`reconnect_wait_max_s` (jitter included). For kazoo's ``connection_retry``
    (between connection attempts) and ``command_retry`` (its recipes' calls)."""
    longest = reconnect_wait_max_s(session_timeout_ms)
    return KazooRetry(
        max_tries=-1,
        delay=min(FIRST_RECONNECT_WAIT_S, longest),
        backoff=2,
        max_jitter=RECONNECT_JITTER,
        max_delay=longest / (1 + RECONNECT_JITTER),
        sleep_func=SequentialThreadingHandler.sleep_func,
    )


class BoundedConnectHandler(SequentialThreadingHandler):
    """kazoo's threading handler whose TCP connects give up after ``connect_timeout_s``
    (kazoo asks for the whole session timeout)."""

    def __init__(self, connect_timeout_s: float) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        timeout = kwargs.get("timeout")
        kwargs["timeout"] = (
            self.connect_timeout_s if timeout is None else min(timeout, self.connect_timeout_s)
        )
        return super().create_connection(*args, **kwargs)


class BoundedSessionRequest(ConnectionHandler):
    """kazoo's connection loop waiting at most ``answer_timeout_s`` for the answer to a
    session request (kazoo waits the session timeout per host); a timeout ends the
    attempt as any lost connection does, and the next one follows."""

    def __init__(self, client: KazooClient, answer_timeout_s: float) -> None:
        # As KazooClient builds its own (which has no option for the class): its retry's
        # copy, its logger, no SASL.
        super().__init__(client, client._conn_retry.copy(), logger=client.logger)
        self.answer_timeout_s = answer_timeout_s

    def _invoke(self, timeout: float, request: Any, xid: int | None = None) -> Any:
        if isinstance(request, Connect):
            timeout = min(timeout, self.answer_timeout_s)
        return super()._invoke(timeout, request, xid)


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
        self._zk = self._client(connect)
        self._zk.add_listener(self._state_changed)
        self._sessions: set[int] = set()  # every session id this client has had
        self._session: int | None = None  # the current (or last) one
        self._suspended_at: float | None = None  # monotonic time the connection was lost
        self._state_listeners: list[Callable[[str], None]] = []

    def _client(self, hosts: str) -> KazooClient:
        """A kazoo client reconnecting as the module docstring says."""
        bound = attempt_timeout_s(self.session_timeout_ms)
        client = KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000,
            handler=BoundedConnectHandler(bound),
            connection_retry=connection_retry(self.session_timeout_ms),
            command_retry=connection_retry(self.session_timeout_ms),
        )
        client._connection = BoundedSessionRequest(
            client, session_request_timeout_s(self.session_timeout_ms)
        )
        return client

    def start(self) -> None:
        """Connects (creating the chroot first) and makes Kafka's top-level paths."""
        if self._chroot:
            bootstrap = self._client(self._hosts)
            self._start(bootstrap)
            try:
                self._until_connected(bootstrap.ensure_path, self._chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._start(self._zk)
        for path in PERSISTENT_PATHS:
            self._until_connected(self._zk.ensure_path, path)

    def _until_connected(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, made again while the connection drops under it
        (ConnectionLoss: the session lives on and kazoo reconnects), as Kafka's
        ZooKeeperClient retries a request until connected; ZooKeeperClientTimeoutError once
        ``zookeeper.connection.timeout.ms`` has passed. For the startup's calls, which
        have nobody else to retry them."""
        retry = KazooRetry(
            max_tries=-1,
            delay=FIRST_RECONNECT_WAIT_S,
            backoff=2,
            max_delay=reconnect_wait_max_s(self.session_timeout_ms),
            deadline=self.connection_timeout_ms / 1000,
            sleep_func=SequentialThreadingHandler.sleep_func,
        )
        try:
            return retry(call, *args, **kwargs)
        except RetryFailedError:
            raise ZooKeeperClientTimeoutError(
                f"ZooKeeper at {self.connect} kept dropping the connection for "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
            ) from None

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
        """Runs on a kazoo thread: records and logs the session, hands the state on."""
        if state == KazooState.CONNECTED and self._zk.client_id is not None:
            session = self._zk.client_id[0]
            if session == self._session and self._suspended_at is not None:
                log.info(
                    "ZooKeeper session 0x%x reconnected after %.1f s without a connection",
                    session,
                    time.monotonic() - self._suspended_at,
                )
            else:
                log.info("ZooKeeper session 0x%x established", session)
            self._sessions.add(session)
            self._session, self._suspended_at = session, None
        elif state == KazooState.SUSPENDED:
            self._suspended_at = time.monotonic()
            log.warning(
                "ZooKeeper connection lost (session 0x%x); reconnecting, at most %.1f s "
                "between attempts",
                self._session or 0,
                reconnect_wait_max_s(self.session_timeout_ms),
            )
        elif state == KazooState.LOST:
            self._suspended_at = None
            if self._zk.client_state == KeeperState.EXPIRED_SESSION:
                log.warning("ZooKeeper session 0x%x expired", self._session or 0)
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
        """The cluster's id: ``/cluster/id`` if some broker wrote it, else ``proposed``
        (a create whose answer a dropped connection lost finds its own node, and reads it)."""
        try:
            self._until_connected(
                self._zk.create,
                zk_data.ClusterIdZNode.PATH,
                zk_data.ClusterIdZNode.encode(proposed),
                makepath=True,
            )
            return proposed
        except NodeExistsError:
            data, _ = self._until_connected(self._zk.get, zk_data.ClusterIdZNode.PATH)
            return zk_data.ClusterIdZNode.decode(data)
