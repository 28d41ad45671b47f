"""A small synchronous Kafka wire-protocol client for reading a cluster.

Spark executors use :class:`KafkaClient` to list partitions, look up offsets
and fetch raw record batches from any Kafka-compatible cluster (logstore's
own broker or Apache Kafka).  It speaks the protocol through the sans-IO
codec in :mod:`logstore.protocol` (``encode_request``, ``FrameDecoder``,
``decode_response``); this module adds only the sockets, version
negotiation, leader routing and retries.

Wire
----

Every request and response is a frame: an int32 size (bytes that follow),
then the header, then the body.  The client keeps at most one request in
flight per connection, so each response must carry the correlation id of
the request just sent; anything else is a :class:`KafkaProtocolError` and
the connection is closed, as it is after any I/O error or timeout (the byte
stream can no longer be trusted).

Versions
--------

Each new connection first sends ApiVersions (at the codec's highest
version; on UNSUPPORTED_VERSION it retries at the broker's highest), then
uses, per API, the highest version inside both the broker's advertised
range and the client's range (:data:`CLIENT_VERSIONS`).  Metadata 1+ (null
topic list, ``is_internal``), ListOffsets 1+ (one offset per partition) and
Fetch 4+ (``isolation_level``, RecordBatch v2) are required.  Fetch 13+
names topics by id, which the client learns from Metadata 10+; without a
topic id it stays at Fetch 12.

Routing and retries
-------------------

Metadata goes to any reachable broker (the last one used, then the brokers
of the last Metadata response, then the bootstrap list).  ListOffsets and
Fetch go to the partition leader's connection; there is one connection per
broker id.  A connection failure or a retriable error code (leader moved,
leader epoch changed, topic id unknown, ...) refreshes the metadata and
retries, :data:`MAX_ATTEMPTS` attempts in all with a short backoff.
Non-retriable codes (OFFSET_OUT_OF_RANGE, ...) raise at once.  Each request
is bounded by ``timeout_s`` (connect, send and receive together).

A client is not thread-safe: use one per thread.  Construction does no I/O;
the first call connects.
"""

from __future__ import annotations

import functools
import socket
import struct
import time
import uuid
from importlib import metadata as _package_metadata
from types import TracebackType

import logstore
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol import (
    DEFAULT_MAX_REQUEST_SIZE,
    ApiKey,
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
)
from logstore.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from logstore.protocol.messages.fetch import FetchRequest, FetchResponse
from logstore.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from logstore.protocol.messages.metadata import MetadataRequest, MetadataResponse
from logstore.protocol.schema import Message

__all__ = [
    "CLIENT_VERSIONS",
    "EARLIEST",
    "LATEST",
    "MAX_ATTEMPTS",
    "BrokerUnavailable",
    "KafkaClient",
    "KafkaClientError",
    "KafkaOffsetOutOfRange",
    "KafkaProtocolError",
    "KafkaResponseError",
    "LeaderNotAvailable",
    "NotLeaderOrFollower",
    "UnknownTopicOrPartition",
    "UnsupportedVersion",
    "drop_aborted",
    "next_offset",
    "whole_batches",
]

EARLIEST = -2
"""ListOffsets timestamp for the log start offset."""

LATEST = -1
"""ListOffsets timestamp for the end of the log (the last stable offset under read_committed)."""

READ_COMMITTED = 1
"""``isolation_level`` of every ListOffsets and Fetch: reads stop at the last stable offset."""

FETCH_MAX_WAIT_MS = 0
"""Fetch does not long-poll: it answers with what is there (possibly nothing)."""

MAX_ATTEMPTS = 3
"""Attempts per call when the leader moved or a broker connection failed."""

RETRY_BACKOFF_S = 0.1
"""Sleep before the n-th retry: ``n * RETRY_BACKOFF_S`` seconds."""

CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.METADATA: (1, ApiKey.METADATA.max_version),
    ApiKey.LIST_OFFSETS: (1, ApiKey.LIST_OFFSETS.max_version),
    ApiKey.FETCH: (4, ApiKey.FETCH.max_version),
}
"""The versions this client can speak, per API: its own minimum, the codec's maximum."""

FIRST_FETCH_WITH_TOPIC_IDS = 13

BATCH_HEADER = struct.Struct(">qi")
"""The first 12 bytes of every record batch: baseOffset int64, batchLength int32.

``batchLength`` counts the bytes after these 12.
"""

_LAST_OFFSET_DELTA = struct.Struct(">i")

MIN_BATCH_LENGTH = 49
"""The smallest ``batchLength`` of a RecordBatch v2: its 61-byte header less the first 12."""

_RESPONSE_OVERHEAD = 1 << 20
"""Room for headers and metadata in a Fetch response frame, beyond the record bytes."""

_MAX_FETCH_BYTES = 0x7FFFFFFF - _RESPONSE_OVERHEAD

_RECV_SIZE = 256 * 1024
_NULL_UUID = uuid.UUID(int=0)
_CLIENT_SOFTWARE_NAME = "logstore-kafka-client"


@functools.cache
def _software_version() -> str:
    try:
        return _package_metadata.version("logstore")
    except _package_metadata.PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- errors


class KafkaClientError(Exception):
    """Base of every error :class:`KafkaClient` raises.

    ``errno`` is the Kafka error code behind the failure, or ``None`` when
    there is none (I/O failures, protocol violations).  ``retriable`` says
    whether the same call may succeed later.
    """

    errno: int | None = None
    retriable: bool = False


class BrokerUnavailable(KafkaClientError):
    """No broker could be reached: connect refused, connection lost, or a timeout."""

    retriable = True


class KafkaProtocolError(KafkaClientError):
    """A broker's bytes broke the protocol: bad frame, wrong correlation id, malformed body."""


class KafkaResponseError(KafkaClientError):
    """A response carried a non-zero Kafka error code.

    ``errno`` is that code; ``topic`` and ``partition`` name the partition it
    concerns, or are ``None``.  Codes with their own subclass (below) always
    raise that subclass.
    """

    def __init__(
        self,
        message: str,
        *,
        errno: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        super().__init__(message)
        if errno is not None:
            self.errno = errno
        if self.errno is not None:
            try:
                self.retriable = ErrorCode(self.errno).retriable
            except ValueError:
                self.retriable = False
        self.topic = topic
        self.partition = partition


class KafkaOffsetOutOfRange(KafkaResponseError):
    """OFFSET_OUT_OF_RANGE (1): the fetch offset is below the log start or past the log end."""

    errno = int(ErrorCode.OFFSET_OUT_OF_RANGE)


class UnknownTopicOrPartition(KafkaResponseError):
    """UNKNOWN_TOPIC_OR_PARTITION (3): the cluster has no such topic or partition."""

    errno = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class LeaderNotAvailable(KafkaResponseError):
    """LEADER_NOT_AVAILABLE (5): the partition has no leader right now (election under way)."""

    errno = int(ErrorCode.LEADER_NOT_AVAILABLE)


class NotLeaderOrFollower(KafkaResponseError):
    """NOT_LEADER_OR_FOLLOWER (6): the broker asked is not the partition's leader."""

    errno = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


class UnsupportedVersion(KafkaResponseError):
    """UNSUPPORTED_VERSION (35): the broker and this client share no version of an API."""

    errno = int(ErrorCode.UNSUPPORTED_VERSION)


_ERROR_CLASSES: dict[int, type[KafkaResponseError]] = {
    cls.errno: cls  # type: ignore[misc]
    for cls in (
        KafkaOffsetOutOfRange,
        UnknownTopicOrPartition,
        LeaderNotAvailable,
        NotLeaderOrFollower,
        UnsupportedVersion,
    )
}


def _response_error(
    code: int, what: str, topic: str | None = None, partition: int | None = None
) -> KafkaResponseError:
    """The exception for a non-zero error code found in the response to ``what``."""
    try:
        name = ErrorCode(code).name
        description = ErrorCode(code).description
    except ValueError:
        name, description = "UNKNOWN_ERROR_CODE", ""
    where = f" for {topic}-{partition}" if topic is not None and partition is not None else ""
    where = f" for {topic}" if topic is not None and partition is None else where
    message = f"{what}{where}: {name} ({code})" + (f": {description}" if description else "")
    cls = _ERROR_CLASSES.get(code)
    if cls is not None:
        return cls(message, topic=topic, partition=partition)
    return KafkaResponseError(message, errno=code, topic=topic, partition=partition)


# --------------------------------------------------------------------------- batches


def whole_batches(records: bytes) -> tuple[bytes, int | None]:
    """Split fetched record bytes into whole batches and a trailing partial one.

    ``records`` is a sequence of batches, each starting with baseOffset
    int64 and batchLength int32 (the size of the rest).  Returns the
    longest prefix made of whole batches, and the total size (12 +
    batchLength) of the first batch that is cut short, or ``None`` when
    nothing is cut (or when even its 12-byte header is cut).  A batchLength
    below a RecordBatch v2 header's raises :class:`KafkaProtocolError`.
    """
    pos = 0
    end = len(records)
    while end - pos >= BATCH_HEADER.size:
        _, length = BATCH_HEADER.unpack_from(records, pos)
        if length < MIN_BATCH_LENGTH:
            raise KafkaProtocolError(
                f"record batch at byte {pos} declares batchLength {length}, "
                f"below the RecordBatch v2 minimum of {MIN_BATCH_LENGTH}"
            )
        if end - pos < BATCH_HEADER.size + length:
            return records[:pos], BATCH_HEADER.size + length
        pos += BATCH_HEADER.size + length
    return (records if pos == end else records[:pos]), None


def next_offset(batches: bytes) -> int:
    """The offset after the last batch of non-empty whole batches.

    That is the last batch's baseOffset + lastOffsetDelta (the int32 at
    byte 23 of a RecordBatch v2) + 1.
    """
    pos = 0
    last = -1
    while pos < len(batches):
        base, length = BATCH_HEADER.unpack_from(batches, pos)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(batches, pos + 23)
        last = base + delta
        pos += BATCH_HEADER.size + length
    return last + 1


def drop_aborted(records: bytes, aborted_transactions: list[tuple[int, int]]) -> bytes:
    """Remove the batches of aborted transactions from whole RecordBatch v2 bytes.

    ``aborted_transactions`` is a read_committed Fetch response's list of
    (producer id, first offset) pairs.  As Kafka's consumer does: walking the
    batches in order, a producer id becomes aborted once a batch reaching
    its first offset is seen, its transactional data batches are then
    dropped, and its ABORT marker (a control batch, kept) ends that.
    Everything else is kept byte for byte, so the result is whole batches
    with gaps in the offsets where aborted data was.  Bytes that are not
    RecordBatch v2 raise :class:`KafkaProtocolError`.
    """
    if not aborted_transactions:
        return records
    pending = sorted(aborted_transactions, key=lambda a: a[1])
    aborted: set[int] = set()
    kept = bytearray()
    try:
        batches = logstore.decode_batches(records, records=False, verify_crc=False, allow_partial=False)
    except logstore.LogStoreError as exc:
        raise KafkaProtocolError(f"fetched records do not decode as RecordBatch v2: {exc}") from exc
    for batch in batches:
        if batch.producer_id >= 0:
            while pending and pending[0][1] <= batch.last_offset:
                aborted.add(pending.pop(0)[0])
            if batch.is_control:
                if batch.control_type == 0:
                    aborted.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted:
                continue
        kept += records[batch.position : batch.position + batch.size]
    return bytes(kept)


# --------------------------------------------------------------------------- connection


def _parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``"host:port,host2:port2"`` (IPv6 as ``[::1]:9092``) as (host, port) pairs."""
    addresses = []
    for item in bootstrap_servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        addresses.append((host, int(port)))
    if not addresses:
        raise ValueError("bootstrap_servers names no server")
    return addresses


class _BrokerConnection:
    """One TCP connection to one broker, with the API versions negotiated on it.

    Opening connects and sends ApiVersions.  :meth:`request` sends one
    request and waits for its response.  Any failure closes the socket and
    raises; a closed connection stays closed (``closed`` is true).
    """

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.versions: dict[ApiKey, int] = {}
        self.ranges: dict[ApiKey, tuple[int, int]] = {}  # the broker's, for CLIENT_VERSIONS' APIs
        self._next_correlation_id = 0
        self._decoder = FrameDecoder(DEFAULT_MAX_REQUEST_SIZE, min_size=4)
        try:
            self._sock: socket.socket | None = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot connect to {host}:{port}: {exc}") from exc
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
            client_software_name=_CLIENT_SOFTWARE_NAME, client_software_version=_software_version()
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
            api_key=int(api_key), api_version=version, correlation_id=correlation_id, client_id=self.client_id
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
            raise KafkaProtocolError(f"{what}: response has correlation id {got}, expected {correlation_id}")
        return decoded


# --------------------------------------------------------------------------- client


class KafkaClient:
    """A synchronous reader of a Kafka cluster: partitions, offsets, raw record batches.

    ``bootstrap_servers`` is a comma-separated ``host:port`` list.  Every
    request (connect, send, receive) is bounded by ``timeout_s`` seconds.
    Usable as a context manager; :meth:`close` closes every connection.
    """

    def __init__(self, bootstrap_servers: str, *, client_id: str = "logstore-spark", timeout_s: float = 30.0) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s!r}")
        self._bootstrap = _parse_bootstrap(bootstrap_servers)
        self._client_id = client_id
        self._timeout_s = float(timeout_s)
        self._closed = False
        self._metadata_connection: _BrokerConnection | None = None
        self._connections: dict[int, _BrokerConnection] = {}  # broker id -> connection
        self._brokers: dict[int, tuple[str, int]] = {}  # broker id -> (host, port)
        self._leaders: dict[tuple[str, int], int] = {}  # (topic, partition) -> leader broker id
        self._topic_ids: dict[str, uuid.UUID] = {}

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection.  Idempotent; the client cannot be used afterwards."""
        self._closed = True
        connections = {id(c): c for c in self._connections.values()}
        if self._metadata_connection is not None:
            connections[id(self._metadata_connection)] = self._metadata_connection
        for connection in connections.values():
            connection.close()
        self._connections.clear()
        self._metadata_connection = None

    # ------------------------------------------------------------------ public API

    def partitions(self, topics: list[str] | None = None) -> dict[str, list[int]]:
        """Topic name -> sorted partition ids.

        ``topics`` ``None`` lists every topic except internal ones
        (``__consumer_offsets``, ...), in name order; otherwise the given
        topics in the given order.  A topic the cluster does not have raises
        :class:`UnknownTopicOrPartition` (the request does not ask for topics
        to be auto-created).  Retriable topic errors (e.g. a leader election
        under way) are retried.
        """
        self._check_open()
        if topics is not None and not topics:
            return {}
        last: KafkaResponseError | None = None
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                time.sleep(RETRY_BACKOFF_S * attempt)
            response = self._refresh_metadata(topics)
            result: dict[str, list[int]] = {}
            last = None
            for t in response.topics:
                if topics is None and t.is_internal:
                    continue
                if t.error_code != 0:
                    last = _response_error(t.error_code, "Metadata", t.name)
                    if not last.retriable or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        raise last
                    break
                result[t.name] = sorted(p.partition_index for p in t.partitions)
            if last is None:
                if topics is None:
                    return dict(sorted(result.items()))
                missing = [name for name in topics if name not in result]
                if missing:
                    raise UnknownTopicOrPartition(
                        f"Metadata: the response does not list {missing[0]}", topic=missing[0]
                    )
                return {name: result[name] for name in topics}
        assert last is not None
        raise last

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """The offset ListOffsets gives for ``timestamp``, asked of the partition leader.

        ``timestamp`` :data:`EARLIEST` (-2) gives the log start offset,
        :data:`LATEST` (-1) the end of the log (the last stable offset: the
        client reads committed data only), any other value >= 0 the first
        offset whose record timestamp is at least ``timestamp`` (ms since the
        epoch), or -1 when there is none.
        """
        self._check_open()
        if timestamp < EARLIEST:
            raise ValueError(f"timestamp must be -2, -1 or a time in ms, not {timestamp}")
        body = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=READ_COMMITTED,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                        )
                    ],
                )
            ],
        )

        def send(connection: _BrokerConnection) -> int:
            response = connection.request(ApiKey.LIST_OFFSETS, body)
            assert isinstance(response, ListOffsetsResponse)
            for t in response.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        if p.error_code != 0:
                            raise _response_error(p.error_code, "ListOffsets", topic, partition)
                        return int(p.offset)
            raise KafkaProtocolError(
                f"ListOffsets to {connection.address}: the response does not list {topic}-{partition}"
            )

        return self._on_leader(topic, partition, send)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> bytes:
        """Raw record batches of ``topic``-``partition`` from ``offset``, fetched from its leader.

        Returns whole batches only, in log order: ``baseOffset`` int64,
        ``batchLength`` int32, then the rest of each RecordBatch v2, exactly
        as stored (compressed batches stay compressed; control batches are
        included, the caller skips them).  The first batch is the one that
        holds ``offset``, so it may start before ``offset``: the caller skips
        records below it.  A trailing batch cut short by ``max_bytes`` is
        dropped.  When the first batch alone is larger than ``max_bytes``,
        it is fetched again with room for it.  Batches of aborted
        transactions that the broker reports are left out (offsets then
        have gaps); when a response holds nothing else, the fetch goes on
        past them.  So the result is ``b""`` only when there is no committed
        data at or after ``offset`` yet (``offset`` is the end of the log, or
        an open transaction holds back the last stable offset).

        Reads use isolation level read_committed and do not wait for data.
        An offset below the log start or past the log end raises
        :class:`KafkaOffsetOutOfRange`.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        if not 0 < max_bytes <= _MAX_FETCH_BYTES:
            raise ValueError(f"max_bytes must be in 1..{_MAX_FETCH_BYTES}, not {max_bytes}")

        def send(connection: _BrokerConnection) -> bytes:
            fetch_offset, size = offset, max_bytes
            while True:
                records, aborted = self._fetch_once(connection, topic, partition, fetch_offset, size)
                whole, cut_size = whole_batches(records)
                if not whole and cut_size is not None and cut_size > size:
                    if size != max_bytes:
                        raise KafkaProtocolError(
                            f"Fetch to {connection.address}: {topic}-{partition} returned a partial "
                            f"batch at offset {fetch_offset} even with partition_max_bytes {size}"
                        )
                    size = cut_size  # the first batch is larger than max_bytes: make room
                    continue
                size = max_bytes
                if not whole or not aborted:
                    return whole
                kept = drop_aborted(whole, aborted)
                if kept:
                    return kept
                # Only aborted data here: read on past it.  Each round moves forward.
                after = next_offset(whole)
                if after <= fetch_offset:
                    raise KafkaProtocolError(
                        f"Fetch to {connection.address}: {topic}-{partition} at offset {fetch_offset} "
                        f"returned batches that end before it"
                    )
                fetch_offset = after

        return self._on_leader(topic, partition, send)

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaClientError("the client is closed")

    def _fetch_once(
        self, connection: _BrokerConnection, topic: str, partition: int, offset: int, max_bytes: int
    ) -> tuple[bytes, list[tuple[int, int]]]:
        """One Fetch of one partition: its records as received (possibly with a cut
        tail) and its aborted transactions as (producer id, first offset) pairs."""
        version = connection.versions[ApiKey.FETCH]
        topic_id = self._topic_ids.get(topic, _NULL_UUID)
        if version >= FIRST_FETCH_WITH_TOPIC_IDS and topic_id == _NULL_UUID:
            version = FIRST_FETCH_WITH_TOPIC_IDS - 1
            if version < connection.ranges[ApiKey.FETCH][0]:
                raise UnsupportedVersion(f"Fetch to {connection.address}: no topic id known for {topic}")
        body = FetchRequest(
            replica_id=-1,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=READ_COMMITTED,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    topic_id=topic_id,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        what = f"Fetch v{version} to {connection.address}"
        response = connection.request(
            ApiKey.FETCH,
            body,
            version=version,
            max_response_size=max(DEFAULT_MAX_REQUEST_SIZE, max_bytes + _RESPONSE_OVERHEAD),
        )
        assert isinstance(response, FetchResponse)
        if response.error_code != 0:
            raise _response_error(response.error_code, what, topic, partition)
        by_id = version >= FIRST_FETCH_WITH_TOPIC_IDS
        for t in response.responses:
            if (t.topic_id == topic_id) if by_id else (t.topic == topic):
                for p in t.partitions:
                    if p.partition_index == partition:
                        if p.error_code != 0:
                            raise _response_error(p.error_code, what, topic, partition)
                        records = bytes(p.records) if p.records is not None else b""
                        aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
                        return records, aborted
        raise KafkaProtocolError(f"{what}: the response does not list {topic}-{partition}")

    def _on_leader(self, topic: str, partition: int, send):  # type: ignore[no-untyped-def]
        """Run ``send(connection)`` on the partition leader's connection, with retries.

        Before each retry the metadata of ``topic`` is refreshed.  Retried:
        connection failures and retriable error codes.  A topic or partition
        the refreshed metadata does not list raises
        :class:`UnknownTopicOrPartition` at once.
        """
        last: KafkaClientError | None = None
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                time.sleep(RETRY_BACKOFF_S * attempt)
            leader = self._leader(topic, partition, refresh=attempt > 0)
            if leader is None:
                last = LeaderNotAvailable(
                    f"Metadata: {topic}-{partition} has no leader", topic=topic, partition=partition
                )
                continue
            try:
                return send(self._broker_connection(leader))
            except BrokerUnavailable as exc:
                last = exc
            except KafkaResponseError as exc:
                if not exc.retriable:
                    raise
                last = exc
        assert last is not None
        raise last

    def _leader(self, topic: str, partition: int, *, refresh: bool) -> int | None:
        """The leader's broker id, from the cache unless ``refresh`` or not cached.

        ``None`` when the partition has no leader right now (or its topic a
        retriable error).  Raises :class:`UnknownTopicOrPartition` when the
        metadata does not list the topic or the partition.
        """
        key = (topic, partition)
        if refresh or key not in self._leaders:
            response = self._refresh_metadata([topic])
            listed = [t for t in response.topics if t.name == topic]
            if not listed or listed[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicOrPartition(
                    f"Metadata: the cluster has no topic {topic}", topic=topic, partition=partition
                )
            t = listed[0]
            if t.error_code != 0:
                error = _response_error(t.error_code, "Metadata", topic)
                if not error.retriable:
                    raise error
                return None
            if not any(p.partition_index == partition for p in t.partitions):
                raise UnknownTopicOrPartition(
                    f"Metadata: topic {topic} has no partition {partition}", topic=topic, partition=partition
                )
        return self._leaders.get(key)

    def _broker_connection(self, broker_id: int) -> _BrokerConnection:
        connection = self._connections.get(broker_id)
        if connection is not None and not connection.closed:
            return connection
        address = self._brokers.get(broker_id)
        if address is None:
            raise BrokerUnavailable(f"broker {broker_id} is not in the cluster metadata")
        meta = self._metadata_connection
        if meta is not None and not meta.closed and (meta.host, meta.port) == address:
            connection = meta
        else:
            connection = _BrokerConnection(*address, self._client_id, self._timeout_s)
        self._connections[broker_id] = connection
        return connection

    def _refresh_metadata(self, topics: list[str] | None) -> MetadataResponse:
        """Send Metadata for ``topics`` (``None``: all) to any reachable broker; update the caches."""
        body = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(topic_id=_NULL_UUID, name=name) for name in topics],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        failures: list[str] = []
        for connection in self._metadata_candidates(failures):
            try:
                response = connection.request(ApiKey.METADATA, body)
            except BrokerUnavailable as exc:
                failures.append(str(exc))
                continue
            assert isinstance(response, MetadataResponse)
            self._metadata_connection = connection
            self._update_caches(response)
            return response
        raise BrokerUnavailable("no broker answered Metadata: " + "; ".join(failures))

    def _metadata_candidates(self, failures: list[str]):  # type: ignore[no-untyped-def]
        """Open connections to try for Metadata, in order; connect failures go to ``failures``."""
        tried: set[tuple[str, int]] = set()
        meta = self._metadata_connection
        if meta is not None and not meta.closed:
            tried.add((meta.host, meta.port))
            yield meta
        for address in [*self._brokers.values(), *self._bootstrap]:
            if address in tried:
                continue
            tried.add(address)
            reusable = [c for c in self._connections.values() if not c.closed and (c.host, c.port) == address]
            if reusable:
                yield reusable[0]
                continue
            try:
                connection = _BrokerConnection(*address, self._client_id, self._timeout_s)
            except BrokerUnavailable as exc:
                failures.append(str(exc))
                continue
            if self._metadata_connection is not None and self._metadata_connection not in self._connections.values():
                self._metadata_connection.close()
            self._metadata_connection = connection
            yield connection

    def _update_caches(self, response: MetadataResponse) -> None:
        """Take brokers, leaders and topic ids from ``response``.

        Connections to brokers that left the cluster or moved to another
        address are closed.  Leaders of the topics the response lists are
        replaced; other topics keep theirs.
        """
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for broker_id, connection in list(self._connections.items()):
            if self._brokers.get(broker_id) != (connection.host, connection.port):
                del self._connections[broker_id]
                if connection is not self._metadata_connection:
                    connection.close()
        listed = {t.name for t in response.topics if t.name is not None}
        self._leaders = {k: v for k, v in self._leaders.items() if k[0] not in listed}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code != 0:
                self._topic_ids.pop(t.name, None)
                continue
            self._topic_ids[t.name] = t.topic_id
            for p in t.partitions:
                if p.error_code in (0, ErrorCode.REPLICA_NOT_AVAILABLE) and p.leader_id >= 0:
                    self._leaders[(t.name, p.partition_index)] = p.leader_id
