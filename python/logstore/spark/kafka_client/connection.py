"""One TCP connection to one broker: ApiVersions negotiation, then one request in flight
at a time, framed and decoded by the sans-IO codec of :mod:`logstore.protocol`."""

from __future__ import annotations

import socket
import time

from logstore.distribution import version as software_version
from logstore.protocol import (
    DEFAULT_MAX_REQUEST_SIZE,
    ApiKey,
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
)
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from logstore.protocol.schema import Message
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    KafkaProtocolError,
    UnsupportedVersion,
    _response_error,
)

CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.METADATA: (1, ApiKey.METADATA.max_version),
    ApiKey.LIST_OFFSETS: (1, ApiKey.LIST_OFFSETS.max_version),
    ApiKey.FETCH: (4, ApiKey.FETCH.max_version),
}
"""The versions this client can speak, per API: its own minimum, the codec's maximum."""

_RECV_SIZE = 256 * 1024
_CLIENT_SOFTWARE_NAME = "logstore-kafka-client"


class _BrokerConnection:
    """One TCP connection to one broker, with the API versions negotiated on it.

    Opening connects and sends ApiVersions.  :meth:`request` sends one
    request and waits for its response.  Any failure closes the socket and
    raises; a closed connection stays closed (``closed`` is true).

    ``sock``, when given, is an already connected socket to ``host:port`` (e.g.
    one wrapped in TLS) that the connection takes over instead of connecting.
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        sock: socket.socket | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.versions: dict[ApiKey, int] = {}
        self.ranges: dict[ApiKey, tuple[int, int]] = {}  # the broker's, for CLIENT_VERSIONS' APIs
        self.api_ranges: dict[int, tuple[int, int]] = {}  # the broker's, for every API it serves
        self._next_correlation_id = 0
        self._decoder = FrameDecoder(DEFAULT_MAX_REQUEST_SIZE, min_size=4)
        if sock is None:
            try:
                sock = socket.create_connection((host, port), timeout=timeout_s)
            except OSError as exc:
                raise BrokerUnavailable(f"cannot connect to {host}:{port}: {exc}") from exc
        self._sock: socket.socket | None = sock
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._negotiate_versions()
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def _negotiate_versions(self) -> None:
        version = ApiKey.API_VERSIONS.max_version
        body = ApiVersionsRequest(
            client_software_name=_CLIENT_SOFTWARE_NAME, client_software_version=software_version()
        )
        response = self._roundtrip(ApiKey.API_VERSIONS, version, body)
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The broker answered in v0 with its ranges; ask again at its highest.
            theirs = {e.api_key: e.max_version for e in response.api_keys}
            lower = min(version, theirs.get(int(ApiKey.API_VERSIONS), -1))
            if lower < ApiKey.API_VERSIONS.min_version:
                raise _response_error(response.error_code, f"ApiVersions to {self.address}")
            response = self._roundtrip(ApiKey.API_VERSIONS, lower, body)
            assert isinstance(response, ApiVersionsResponse)
        if response.error_code != 0:
            raise _response_error(response.error_code, f"ApiVersions to {self.address}")
        ranges = {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}
        self.api_ranges = ranges
        for key, (ours_min, ours_max) in CLIENT_VERSIONS.items():
            theirs_min, theirs_max = ranges.get(int(key), (0, -1))
            version = min(ours_max, theirs_max)
            if version < max(ours_min, theirs_min):
                raise UnsupportedVersion(
                    f"{self.address} serves {key.api_name} versions {theirs_min}-{theirs_max}; "
                    f"this client needs one in {ours_min}-{ours_max}"
                )
            self.versions[key] = version
            self.ranges[key] = (theirs_min, theirs_max)

    def request(
        self,
        api_key: ApiKey,
        body: Message,
        *,
        version: int | None = None,
        max_response_size: int = DEFAULT_MAX_REQUEST_SIZE,
    ) -> Message:
        """Send ``body`` and return the response body.

        ``version`` defaults to the negotiated version of ``api_key``; a
        response frame larger than ``max_response_size`` bytes is refused.
        """
        if version is None:
            version = self.versions[api_key]
        return self._roundtrip(api_key, version, body, max_response_size)

    def _roundtrip(
        self,
        api_key: ApiKey,
        version: int,
        body: Message,
        max_response_size: int = DEFAULT_MAX_REQUEST_SIZE,
    ) -> Message:
        sock = self._sock
        if sock is None:
            raise BrokerUnavailable(f"connection to {self.address} is closed")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(
            api_key=int(api_key),
            api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        )
        frame = encode_request(header, body)
        deadline = time.monotonic() + self.timeout_s
        what = f"{api_key.api_name} v{version} to {self.address}"
        try:
            sock.settimeout(self.timeout_s)
            sock.sendall(frame)
            self._decoder.max_size = max_response_size
            while (response := self._decoder.next_frame()) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no response within {self.timeout_s} s")
                sock.settimeout(remaining)
                chunk = sock.recv(_RECV_SIZE)
                if not chunk:
                    raise ConnectionResetError("the broker closed the connection")
                self._decoder.receive_data(chunk)
            got, decoded = decode_response(response, api_key, version)
        except OSError as exc:  # includes TimeoutError / socket.timeout
            self.close()
            raise BrokerUnavailable(f"{what}: {exc}") from exc
        except ProtocolError as exc:
            self.close()
            raise KafkaProtocolError(f"{what}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        if got != correlation_id:
            self.close()
            raise KafkaProtocolError(
                f"{what}: response has correlation id {got}, expected {correlation_id}"
            )
        return decoded
