"""The reader itself: :class:`KafkaClient` lists partitions, looks up offsets and fetches
raw record batches, on the partition leader's connection, with retries."""

from __future__ import annotations

import time
import uuid
from types import TracebackType

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol import DEFAULT_MAX_REQUEST_SIZE, ApiKey
from logstore.protocol.messages.fetch import FetchRequest, FetchResponse
from logstore.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from logstore.spark.kafka_client.batches import drop_aborted, next_offset, whole_batches
from logstore.spark.kafka_client.connection import _BrokerConnection
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    KafkaClientError,
    KafkaProtocolError,
    KafkaResponseError,
    LeaderNotAvailable,
    UnknownTopicOrPartition,
    UnsupportedVersion,
    _response_error,
)
from logstore.spark.kafka_client.metadata import _NULL_UUID, _ClusterMetadata, _parse_bootstrap

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

FIRST_FETCH_WITH_TOPIC_IDS = 13

_RESPONSE_OVERHEAD = 1 << 20
"""Room for headers and metadata in a Fetch response frame, beyond the record bytes."""

_MAX_FETCH_BYTES = 0x7FFFFFFF - _RESPONSE_OVERHEAD


class KafkaClient(_ClusterMetadata):
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
