"""An asyncio client to one broker endpoint, for broker-to-broker requests (Kafka's
NetworkClient with one node): the controller's channels, the broker-to-controller
channel and replica fetchers each hold their own.

A connection is opened on the first :meth:`NetworkClient.send` and set up in Kafka's
order: TCP (+ TLS for SSL and SASL_SSL), ApiVersions, then for SASL_PLAINTEXT and
SASL_SSL a SaslHandshake v1 and SaslAuthenticate exchange
(``broker_py/security/sasl/sasl_client.py``). Frames are encoded and decoded by the
sans-IO codec of :mod:`logstore.protocol`.

Invariants:

- Versions are negotiated once per connection: each request goes at the highest
  version both sides serve, ``min(ApiKey.max_version, peer max)``, and must be at
  least ``max(ApiKey.min_version, peer min)`` (else UnsupportedVersionError, and the
  connection stays).
- Requests may be pipelined; they are written in the order ``send`` is called and
  each response is matched to its request by correlation id (int32, wrapping to 0
  after 2**31-1).
- Every request in flight when the connection is lost fails with
  :class:`DisconnectError`; whether the peer processed it is unknown.
- A request with no response within its timeout fails with
  :class:`RequestTimeoutError` and closes the connection (as Kafka's NetworkClient
  does: the stream's state is unknown), failing the others in flight with
  :class:`DisconnectError`. A send whose caller is cancelled leaves the connection
  open and its late response is dropped.
- After ``n`` consecutive failed connections or losses, the next connection attempt
  waits ``min(reconnect.backoff.max.ms, reconnect.backoff.ms * 2**(n-1))`` ± 20%
  (Kafka's defaults 50 ms and 1000 ms); a connection that completes its setup resets
  ``n`` to 0. The wait counts against the send's timeout.
- A SASL session with a lifetime (KIP-368 ``connections.max.reauth.ms`` on the peer)
  is retired at 85-95% of it: new requests go to a fresh, re-authenticated
  connection and the old one closes once its requests are answered.

:class:`InterBrokerChannelBuilder` makes clients from the broker's own config: the
inter-broker listener's security protocol, its ``ssl.*`` keys as a client TLS context
and its JAAS credentials for ``sasl.mechanism.inter.broker.protocol``. Every client id
a broker sends to another broker starts ``broker-<id>-`` (``broker-2-controller-to-
broker-1``, ``broker-1-fetcher-0``, ``broker-3-to-controller``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
from collections.abc import Callable
from typing import Any

from broker_py.config.kafka_config import SECURITY_PROTOCOLS, BrokerConfig
from broker_py.security.sasl.sasl_client import inter_broker_credentials, sasl_client
from broker_py.security.ssl.ssl_client_context import client_context
from logstore.distribution import version as software_version
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    KafkaError,
    NetworkError,
    ProtocolError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
    error_class,
)
from logstore.protocol.frame import (
    DEFAULT_MAX_REQUEST_SIZE,
    FrameDecoder,
    decode_response,
    encode_request,
)
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.api_versions import ApiVersionsRequest
from logstore.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from logstore.protocol.schema import Message

log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "logstore-broker"
_RECV_SIZE = 256 * 1024
_JITTER = 0.2  # Kafka's reconnect backoff jitter
_REAUTH_WINDOW = (0.85, 0.95)  # of the SASL session lifetime, as Kafka's client


class DisconnectError(NetworkError):
    """The connection to the peer was lost, or could not be set up, before the
    response arrived (NETWORK_EXCEPTION, retriable); the request may or may not have
    been processed."""


class RequestTimeoutError(RequestTimedOutError):
    """No response (or no connection) within the request's timeout (REQUEST_TIMED_OUT,
    retriable)."""


class RawRequest:
    """A request that encodes its own frame and decodes its own response (a hot path's
    hand-written codec, e.g. a replica fetcher's Fetch), sent by :meth:`NetworkClient.send`
    like a :class:`Message`."""

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        """The whole request frame, size prefix included."""
        raise NotImplementedError

    def decode(self, frame: bytes) -> Any:
        """The response of a frame without its size prefix; raises ProtocolError (or a
        subclass) if it does not parse."""
        raise NotImplementedError


class _Connection:
    """One set-up-or-being-set-up connection: its streams, the requests in flight
    (correlation id -> (api key, version, future)) and the peer's version ranges
    (api key -> (min, max))."""

    def __init__(
        self, client: NetworkClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._client = client
        self._reader = reader
        self._writer = writer
        self.inflight: dict[int, tuple[ApiKey, int, asyncio.Future[Message]]] = {}
        self._raw: dict[int, RawRequest] = {}  # the in-flight requests that decode themselves
        self.ranges: dict[int, tuple[int, int]] = {}
        self.closed = False
        self.retiring = False
        self.retire_at: float | None = None  # loop time after which no new request goes here
        self._next_correlation_id = 0
        self._decoder = FrameDecoder(client.max_response_size, min_size=4)
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"network-client-{client.address}"
        )

    def usable(self, now: float) -> bool:
        return (
            not self.closed
            and not self.retiring
            and (self.retire_at is None or now < self.retire_at)
        )

    def submit(
        self, api_key: ApiKey, version: int, body: Message | RawRequest
    ) -> asyncio.Future[Message]:
        """Writes one request frame and returns the future of its response."""
        if self.closed:
            raise DisconnectError(f"connection to {self._client.address} is closed")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        if isinstance(body, RawRequest):
            frame = body.encode(correlation_id, self._client.client_id)
            self._raw[correlation_id] = body
        else:
            header = RequestHeader(
                api_key=int(api_key),
                api_version=version,
                correlation_id=correlation_id,
                client_id=self._client.client_id,
            )
            frame = encode_request(header, body)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self.inflight[correlation_id] = (api_key, version, future)
        self._writer.write(frame)
        return future

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            raise DisconnectError(f"connection to {self._client.address} lost: {e}") from e

    async def request(self, api_key: ApiKey, version: int, body: Message) -> Message:
        return await self.response(self.submit(api_key, version, body))

    async def response(self, future: asyncio.Future[Message]) -> Message:
        """Flushes the request of ``future`` and waits for its response."""
        try:
            await self.drain()
        except BaseException:
            _discard(future)
            raise
        return await future

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_RECV_SIZE)
                if not data:
                    raise ConnectionResetError("closed by the peer")
                self._decoder.receive_data(data)
                while (frame := self._decoder.next_frame()) is not None:
                    self._received(frame)
        except asyncio.CancelledError:
            self.fail("connection closed")
            raise
        except (OSError, ProtocolError) as e:
            self.fail(f"connection lost: {e}")
        except Exception as e:  # a bug: still fail every waiter rather than hang them
            log.exception("reading from %s failed", self._client.address)
            self.fail(f"connection failed: {e}")

    def _received(self, frame: bytes) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        entry = self.inflight.pop(correlation_id, None)
        if entry is None:
            raise ProtocolError(
                f"response with correlation id {correlation_id}, which no request in flight has"
            )
        api_key, version, future = entry
        raw = self._raw.pop(correlation_id, None) if self._raw else None
        if not future.done():  # else its caller gave up: drop the response
            try:
                if raw is not None:
                    body = raw.decode(frame)
                else:
                    _, body = decode_response(frame, api_key, version)
            except ProtocolError as e:
                future.set_exception(e)
            else:
                future.set_result(body)
        if self.retiring and not self.inflight:
            self.fail("retired")

    def retire(self) -> None:
        """No new requests; closes once those in flight are answered."""
        self.retiring = True
        if not self.inflight:
            self.fail("retired")

    def fail(self, reason: str) -> None:
        """Closes the connection; every request still in flight fails with DisconnectError."""
        if self.closed:
            return
        self.closed = True
        for _, _, future in self.inflight.values():
            if not future.done():
                future.set_exception(DisconnectError(f"{self._client.address}: {reason}"))
        self.inflight.clear()
        self._raw.clear()
        transport = self._writer.transport
        if transport is not None and not transport.is_closing():
            transport.abort()
        if self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        self._client._connection_closed(self)

    async def wait_closed(self) -> None:
        if not self._read_task.done():
            await asyncio.wait({self._read_task}, timeout=5)


class NetworkClient:
    """An asyncio client to one broker endpoint (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        *,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        request_timeout_ms: int = 30000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        max_response_size: int = DEFAULT_MAX_REQUEST_SIZE,
    ) -> None:
        if security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security protocol {security_protocol!r} is not one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        tls = security_protocol in ("SSL", "SASL_SSL")
        if tls and ssl_context is None:
            raise ValueError(f"{security_protocol} needs an ssl_context")
        if security_protocol.startswith("SASL_") and (
            sasl_mechanism is None or sasl_username is None or sasl_password is None
        ):
            raise ValueError(f"{security_protocol} needs a SASL mechanism, username and password")
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security_protocol = security_protocol
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.max_response_size = max_response_size
        self._ssl_context = ssl_context if tls else None
        self._sasl = (
            (sasl_mechanism, sasl_username, sasl_password)
            if security_protocol.startswith("SASL_")
            else None
        )
        self._conn: _Connection | None = None
        self._retired: set[_Connection] = set()
        self._lock = asyncio.Lock()
        self._failures = 0  # consecutive failed connections or losses
        self._next_attempt = 0.0  # loop time before which no connection is attempted
        self._closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return (
            f"NetworkClient({self.address}, {self.security_protocol}, client_id={self.client_id!r})"
        )

    @property
    def connected(self) -> bool:
        """Whether a set-up connection is open now."""
        return self._conn is not None and not self._conn.closed

    def api_version(self, api_key: ApiKey) -> int | None:
        """The version ``api_key`` goes at on the current connection (None when not
        connected or not served by both sides)."""
        if not self.connected:
            return None
        assert self._conn is not None
        try:
            return self._pick_version(self._conn, ApiKey(api_key), None)
        except UnsupportedVersionError:
            return None

    async def send(
        self,
        api_key: ApiKey,
        request: Message | RawRequest,
        timeout_ms: int | None = None,
        *,
        version: int | None = None,
    ) -> Message:
        """The response to ``request``, sent at the negotiated version (or ``version``,
        which both sides must serve; a :class:`RawRequest` answers what its ``decode``
        returns). Connects first if needed. Raises DisconnectError,
        RequestTimeoutError (``timeout_ms``, default ``request_timeout_ms``, covers
        connecting, backoff and the response), UnsupportedVersionError,
        SaslAuthenticationFailedError and the other KafkaErrors of connection setup."""
        if self._closed:
            raise DisconnectError(f"{self!r} is closed")
        api_key = ApiKey(api_key)
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        conn: _Connection | None = None
        in_flight = False
        try:
            async with asyncio.timeout_at(deadline):
                conn = await self._ready_connection()
                future = conn.submit(api_key, self._pick_version(conn, api_key, version), request)
                in_flight = True
                return await conn.response(future)
        except TimeoutError:
            what = f"{api_key.api_name} to {self.address}"
            if in_flight and conn is not None:
                log.info(
                    "closing the connection to %s: %s timed out after %d ms",
                    self.address,
                    api_key.api_name,
                    timeout_ms,
                )
                conn.fail(f"request timed out ({api_key.api_name}, {timeout_ms} ms)")
                raise RequestTimeoutError(f"{what}: no response within {timeout_ms} ms") from None
            raise RequestTimeoutError(f"{what}: not connected within {timeout_ms} ms") from None

    async def _ready_connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is not None and conn.usable(loop.time()):
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.usable(loop.time()):
                return conn
            self._conn = None
            if conn is not None and not conn.closed:  # a SASL session near its end
                self._retired.add(conn)
                conn.retire()
            delay = self._next_attempt - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._closed:
                raise DisconnectError(f"{self!r} is closed")
            try:
                conn = await self._open()
            except BaseException:
                self._failed()
                raise
            if self._closed:  # closed while connecting
                conn.fail("client closed")
                raise DisconnectError(f"{self!r} is closed")
            self._failures = 0
            self._conn = conn
            return conn

    def _failed(self) -> None:
        self._failures += 1
        base, cap = self.reconnect_backoff_ms, self.reconnect_backoff_max_ms
        backoff = base if cap <= base else min(cap, base * 2 ** (self._failures - 1))
        backoff *= random.uniform(1 - _JITTER, 1 + _JITTER)
        self._next_attempt = asyncio.get_running_loop().time() + backoff / 1000

    def _connection_closed(self, conn: _Connection) -> None:
        self._retired.discard(conn)
        if conn is self._conn:
            self._conn = None
            if not self._closed:
                self._failed()

    async def _open(self) -> _Connection:
        """A connection set up (TLS, ApiVersions, SASL), or DisconnectError /
        the KafkaError its setup got."""
        try:
            reader, writer = await asyncio.open_connection(
                self.host,
                self.port,
                ssl=self._ssl_context,
                server_hostname=self.host if self._ssl_context else None,
            )
        except OSError as e:  # includes ssl.SSLError
            raise DisconnectError(f"cannot connect to {self.address}: {e}") from e
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(self, reader, writer)
        try:
            await self._negotiate_versions(conn)
            if self._sasl is not None:
                await self._authenticate(conn)
        except BaseException:
            conn.fail("setup failed")  # not self._conn yet: counted once, by the caller
            raise
        return conn

    async def _negotiate_versions(self, conn: _Connection) -> None:
        body = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=software_version()
        )
        version = ApiKey.API_VERSIONS.max_version
        response = await conn.request(ApiKey.API_VERSIONS, version, body)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The peer answered in v0 with its ranges; ask again at its highest.
            theirs = {e.api_key: e.max_version for e in response.api_keys}.get(
                int(ApiKey.API_VERSIONS), -1
            )
            version = min(version, theirs)
            if version < ApiKey.API_VERSIONS.min_version:
                raise UnsupportedVersionError(
                    f"{self.address} serves no ApiVersions version this client has"
                )
            response = await conn.request(ApiKey.API_VERSIONS, version, body)
        if response.error_code != 0:
            raise _error(response.error_code, f"ApiVersions to {self.address}")
        conn.ranges = {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}

    def _pick_version(self, conn: _Connection, api_key: ApiKey, version: int | None) -> int:
        theirs = conn.ranges.get(int(api_key))
        if theirs is None:
            raise UnsupportedVersionError(f"{self.address} does not serve {api_key.api_name}")
        low, high = max(api_key.min_version, theirs[0]), min(api_key.max_version, theirs[1])
        if version is not None:
            if not low <= version <= high:
                raise UnsupportedVersionError(
                    f"{api_key.api_name} v{version} is outside the versions "
                    f"both sides serve ({low}-{high})"
                )
            return version
        if high < low:
            raise UnsupportedVersionError(
                f"{self.address} serves {api_key.api_name} {theirs[0]}-{theirs[1]}; "
                f"this broker {api_key.min_version}-{api_key.max_version}"
            )
        return high

    async def _authenticate(self, conn: _Connection) -> None:
        assert self._sasl is not None
        mechanism, username, password = self._sasl
        handshake_version = self._pick_version(conn, ApiKey.SASL_HANDSHAKE, None)
        if handshake_version < 1:
            raise UnsupportedVersionError(
                f"{self.address} serves only SaslHandshake v0 (raw SASL tokens)"
            )
        response = await conn.request(
            ApiKey.SASL_HANDSHAKE, handshake_version, SaslHandshakeRequest(mechanism=mechanism)
        )
        if response.error_code != 0:
            raise _error(
                response.error_code,
                f"SASL mechanism {mechanism} at {self.address} "
                f"(enabled: {', '.join(response.mechanisms)})",
            )
        version = self._pick_version(conn, ApiKey.SASL_AUTHENTICATE, None)
        client = sasl_client(mechanism, username, password)
        token = client.evaluate(b"")
        while True:
            assert token is not None
            response = await conn.request(
                ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token)
            )
            if response.error_code != 0:
                raise _error(
                    response.error_code,
                    response.error_message
                    or f"SASL {mechanism} authentication to {self.address} failed",
                )
            token = client.evaluate(response.auth_bytes or b"")
            if client.complete:
                break
            if token is None:
                raise SaslAuthenticationFailedError(
                    f"SASL {mechanism} exchange with {self.address} ended before completing"
                )
        lifetime_ms = response.session_lifetime_ms
        if lifetime_ms > 0:
            conn.retire_at = (
                asyncio.get_running_loop().time()
                + lifetime_ms * random.uniform(*_REAUTH_WINDOW) / 1000
            )

    async def close(self) -> None:
        """Closes the connection; requests in flight fail with DisconnectError, and so
        does every later send."""
        self._closed = True
        conns = [c for c in (self._conn, *self._retired) if c is not None]
        self._conn = None
        for conn in conns:
            conn.fail("client closed")
        for conn in conns:
            await conn.wait_closed()


def _discard(future: asyncio.Future[Message]) -> None:
    """Gives up on ``future``: cancels it, or retrieves its exception so none is left
    unretrieved."""
    if not future.done():
        future.cancel()
    elif not future.cancelled():
        future.exception()


def _error(code: int, message: str) -> KafkaError:
    cls = error_class(code) or KafkaError
    return cls(message)


class InterBrokerChannelBuilder:
    """Makes the :class:`NetworkClient`\\ s this broker reaches other brokers with, from
    its config, read once (ConfigError naming the key for an unusable value):
    ``listener_name`` and ``security_protocol`` are the inter-broker listener's
    (:meth:`BrokerConfig.inter_broker_listener`); its TLS context and SASL credentials
    are the client side of that listener's ``ssl.*`` and JAAS config."""

    def __init__(self, config: BrokerConfig) -> None:
        self.broker_id = config.broker_id
        self.listener_name, self.security_protocol = config.inter_broker_listener()
        self.ssl_context = (
            client_context(config, self.listener_name)
            if self.security_protocol in ("SSL", "SASL_SSL")
            else None
        )
        self.sasl_mechanism: str | None = None
        self._credentials: tuple[str, str] | None = None
        if self.security_protocol.startswith("SASL_"):
            self.sasl_mechanism = config["sasl.mechanism.inter.broker.protocol"].strip().upper()
            self._credentials = inter_broker_credentials(
                config, self.listener_name, self.sasl_mechanism
            )
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.reconnect_backoff_ms: int = config["reconnect.backoff.ms"]
        self.reconnect_backoff_max_ms: int = config["reconnect.backoff.max.ms"]

    def client(
        self, host: str, port: int, client_id: str, request_timeout_ms: int | None = None
    ) -> NetworkClient:
        """A client to ``host:port`` (an endpoint of the inter-broker listener) sending
        ``client_id``, which should start ``broker-<this broker's id>-``."""
        username, password = self._credentials or (None, None)
        return NetworkClient(
            host,
            port,
            client_id,
            security_protocol=self.security_protocol,
            ssl_context=self.ssl_context,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=username,
            sasl_password=password,
            request_timeout_ms=self.request_timeout_ms
            if request_timeout_ms is None
            else request_timeout_ms,
            reconnect_backoff_ms=self.reconnect_backoff_ms,
            reconnect_backoff_max_ms=self.reconnect_backoff_max_ms,
        )


NetworkClientFactory = Callable[[str, int, str], NetworkClient]
"""(host, port, client_id) -> a NetworkClient: ``InterBrokerChannelBuilder(config).client``."""


def endpoint_address(endpoint: Any) -> tuple[str, int]:
    """(host, port) of an endpoint: a ``Listener`` (``.host``/``.port``) or a
    ``(host, port)`` pair."""
    if isinstance(endpoint, tuple):
        host, port = endpoint
        return host, int(port)
    return endpoint.host, int(endpoint.port)
