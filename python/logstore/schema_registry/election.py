"""Primary election through the Kafka classic group protocol, on logstore's sans-IO codec over
asyncio streams (FindCoordinator v3, JoinGroup v5, SyncGroup v3, Heartbeat v3, LeaveGroup v1).

The elector joins the group `schema-registry` (protocol type "sr", see election_protocol.py),
heartbeats, and rejoins on a rebalance. `on_change(primary_url, is_primary)` is called on the
event loop after each completed join, and with (None, False) when the membership is lost
(coordinator gone, session expired): an instance that cannot reach the coordinator stops
taking writes, since another may already be the primary.

Transport: PLAINTEXT, or TLS when an `ssl.SSLContext` is given; with SaslCredentials every
connection first authenticates (PLAIN, SCRAM-SHA-256/512, election_sasl.py), so the election
works over SASL_PLAINTEXT and SASL_SSL listeners too.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Callable

from logstore.protocol import ApiKey, RequestHeader, decode_response, encode_request
from logstore.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from logstore.protocol.messages.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from logstore.protocol.schema import Message
from logstore.schema_registry.election_protocol import (
    DEFAULT_GROUP,
    PROTOCOL_NAME,
    PROTOCOL_TYPE,
    Assignment,
    Identity,
    choose_primary,
)
from logstore.schema_registry.election_sasl import SaslCredentials, SaslFailed, authenticate

log = logging.getLogger(__name__)

_VERSIONS = {
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.LEAVE_GROUP: 1,
    ApiKey.SASL_HANDSHAKE: 1,
    ApiKey.SASL_AUTHENTICATE: 1,
}
_MAX_RESPONSE = 16 * 1024 * 1024
# error codes this client acts on
_COORDINATOR_GONE = {14, 15, 16}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
_REJOIN = {27}  # REBALANCE_IN_PROGRESS
_RESET_MEMBER = {22, 25}  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
_MEMBER_ID_REQUIRED = 79


class _GroupError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"group error {code}")
        self.code = code


class _Connection:
    """One connection, one request in flight at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @staticmethod
    async def open(
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        timeout: float,
        sasl: SaslCredentials | None = None,
    ) -> _Connection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls), timeout
        )
        conn = _Connection(reader, writer)
        if sasl is not None:
            try:
                await authenticate(conn.request, sasl, timeout)
            except BaseException:
                conn.close()
                raise
        return conn

    async def request(self, body: Message, timeout: float) -> Message:
        key = body.API_KEY
        version = _VERSIONS[key]
        self.correlation += 1
        header = RequestHeader(
            api_key=int(key),
            api_version=version,
            correlation_id=self.correlation,
            client_id="logstore-schema-registry",
        )
        self.writer.write(encode_request(header, body))

        async def roundtrip() -> Message:
            await self.writer.drain()
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            if size < 0 or size > _MAX_RESPONSE:
                raise ConnectionError(f"response of {size} bytes")
            frame = await self.reader.readexactly(size)
            got, decoded = decode_response(frame, key, version)
            if got != self.correlation:
                raise ConnectionError("correlation id mismatch")
            return decoded

        return await asyncio.wait_for(roundtrip(), timeout)

    def close(self) -> None:
        self.writer.close()


class GroupElector:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        identity: Identity,
        on_change: Callable[[str | None, bool], None],
        *,
        group: str = DEFAULT_GROUP,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 1_000,
    ) -> None:
        self.bootstrap = bootstrap
        self.identity = identity
        self.on_change = on_change
        self.group = group
        self.tls = tls
        self.sasl = sasl
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self._conn: _Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.primary_url: str | None = None
        self.is_primary = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sr-election")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        conn = self._conn
        if conn is not None and self.member_id:
            try:
                await conn.request(
                    LeaveGroupRequest(group_id=self.group, member_id=self.member_id), 2.0
                )
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError):
                pass
            conn.close()
        self._conn = None

    def _set(self, url: str | None, primary: bool) -> None:
        if (url, primary) != (self.primary_url, self.is_primary):
            log.info("schema registry primary: %s (this instance: %s)", url, primary)
        self.primary_url, self.is_primary = url, primary
        self.on_change(url, primary)

    async def _run(self) -> None:
        backoff = 0.2
        while not self._stopping:
            try:
                conn = self._conn = await self._coordinator()
                await self._member_loop(conn)
                backoff = 0.2
            except (
                TimeoutError,
                OSError,
                ConnectionError,
                asyncio.IncompleteReadError,
                _GroupError,
                ValueError,
            ) as exc:
                # a refused mechanism or credentials is the operator's to fix: said loudly
                level = logging.WARNING if isinstance(exc, SaslFailed) else logging.DEBUG
                log.log(level, "schema registry election: %s", exc)
                if self.is_primary or self.primary_url is not None:
                    self._set(None, False)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _coordinator(self) -> _Connection:
        last: Exception = ConnectionError("no bootstrap server")
        for host, port in self.bootstrap:
            try:
                conn = await _Connection.open(host, port, self.tls, 5.0, self.sasl)
            except SaslFailed:
                raise
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
                last = exc
                continue
            try:
                resp = await conn.request(FindCoordinatorRequest(key=self.group, key_type=0), 5.0)
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError):
                conn.close()
                continue
            conn.close()
            assert isinstance(resp, FindCoordinatorResponse)
            if resp.error_code != 0:
                last = _GroupError(resp.error_code)
                continue
            return await _Connection.open(resp.host, resp.port, self.tls, 5.0, self.sasl)
        raise last

    async def _member_loop(self, conn: _Connection) -> None:
        while not self._stopping:
            assignment = await self._join(conn)
            self._set(assignment.primary.url, self._is_mine(assignment))
            if not await self._heartbeat_until_rebalance(conn):
                return

    def _is_mine(self, a: Assignment) -> bool:
        return a.error == 0 and a.primary_member == self.member_id and a.primary.eligible

    async def _join(self, conn: _Connection) -> Assignment:
        while True:
            join = await conn.request(
                JoinGroupRequest(
                    group_id=self.group,
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms,
                    member_id=self.member_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=[
                        JoinGroupRequest.JoinGroupRequestProtocol(
                            name=PROTOCOL_NAME, metadata=self.identity.encode()
                        )
                    ],
                ),
                self.rebalance_timeout_ms / 1000 + 5,
            )
            assert isinstance(join, JoinGroupResponse)
            if join.error_code == _MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if join.error_code in _RESET_MEMBER:
                self.member_id = ""
                continue
            if join.error_code in _REJOIN:
                continue
            if join.error_code != 0:
                raise _GroupError(join.error_code)
            self.member_id, self.generation = join.member_id, join.generation_id
            plan: dict[str, bytes] = {}
            if join.leader == join.member_id:
                plan = choose_primary([(m.member_id, m.metadata) for m in join.members])
            sync = await conn.request(
                SyncGroupRequest(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    assignments=[
                        SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                        for m, a in plan.items()
                    ],
                ),
                self.rebalance_timeout_ms / 1000 + 5,
            )
            assert isinstance(sync, SyncGroupResponse)
            if sync.error_code in _REJOIN:
                continue
            if sync.error_code in _RESET_MEMBER:
                self.member_id = ""
                continue
            if sync.error_code != 0:
                raise _GroupError(sync.error_code)
            return Assignment.decode(sync.assignment)

    async def _heartbeat_until_rebalance(self, conn: _Connection) -> bool:
        """True when the group rebalances (rejoin on this connection)."""
        while not self._stopping:
            await asyncio.sleep(self.heartbeat_s)
            resp = await conn.request(
                HeartbeatRequest(
                    group_id=self.group, generation_id=self.generation, member_id=self.member_id
                ),
                self.session_timeout_ms / 1000,
            )
            assert isinstance(resp, HeartbeatResponse)
            if resp.error_code == 0:
                continue
            if resp.error_code in _REJOIN:
                return True
            if resp.error_code in _RESET_MEMBER:
                self.member_id = ""
                self._set(None, False)
                return True
            raise _GroupError(resp.error_code)
        return False
