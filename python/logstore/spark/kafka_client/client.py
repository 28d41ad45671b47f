"""The reader itself: :class:`KafkaClient` lists partitions, looks up offsets and fetches
raw record batches, each on the connection of the partition's current leader, with
retries when the leader moved or a broker is down (``retry``'s budget).

Leaders
-------

ListOffsets and Fetch of a partition go to its leader by the cached metadata and name
the cached leader epoch as ``current_leader_epoch`` (KIP-320: ListOffsets v4+, Fetch
v9+), so a broker that is no longer the leader under that epoch, or not yet, refuses
the request instead of answering from a log that may be behind or diverged.  These
answers, LEADER_NOT_AVAILABLE and a broken connection are retried within the budget:

- with a KIP-951 hint (Fetch v12+: the refusing broker names the current leader and
  its epoch, v16+ also its endpoint) newer than the cache, at once on that leader;
- otherwise after the backoff, with the partition's metadata asked again of any
  reachable broker.

A call's arguments never change between its tries: a retried fetch asks for the same
offset, so no record is skipped or returned twice.  When the budget is spent the call
raises an error of the last failure's class whose message names the partition.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import TracebackType

from logstore.protocol import DEFAULT_MAX_REQUEST_SIZE, ApiKey
from logstore.protocol.error_codes import ErrorCode
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
from logstore.spark.kafka_client.retry import RetryPolicy

EARLIEST = -2
"""ListOffsets timestamp for the log start offset."""

LATEST = -1
"""ListOffsets timestamp for the end of the log (the last stable offset under read_committed)."""

READ_COMMITTED = 1
"""``isolation_level`` of every ListOffsets and Fetch: reads stop at the last stable offset."""

FETCH_MAX_WAIT_MS = 0
"""Fetch does not long-poll: it answers with what is there (possibly nothing)."""

MAX_ATTEMPTS = 5
"""Default attempts per call when the leader moved or a broker connection failed."""

RETRY_BACKOFF_S = 0.1
"""Default backoff before the first retry; it doubles before each further one..."""

RETRY_BACKOFF_MAX_S = 1.0
"""... up to this (Kafka's ``retry.backoff.ms`` and ``retry.backoff.max.ms`` defaults)."""

FIRST_FETCH_WITH_TOPIC_IDS = 13

_RESPONSE_OVERHEAD = 1 << 20
"""Room for headers and metadata in a Fetch response frame, beyond the record bytes."""

_MAX_FETCH_BYTES = 0x7FFFFFFF - _RESPONSE_OVERHEAD


@dataclass(frozen=True)
class Fetched:
    """What :meth:`KafkaClient.fetch_records` read of one partition from its leader.

    - ``records``: whole RecordBatch v2 batches as stored, in log order, batches
      of aborted transactions left out; the first one holds the asked offset or
      comes after it.  ``b""`` when the leader has no committed data at
      ``next_offset`` yet.
    - ``next_offset``: the offset to fetch next: after the last batch of
      ``records``; when ``records`` is empty, the offset the leader had nothing
      committed at (the asked offset, or past it when only aborted data lay
      between).  Invariant: ``next_offset`` >= the asked offset.
    - ``high_watermark``, ``last_stable_offset``: as the leader gave them in its
      last answer (-1 when not given).
    - ``leader``, ``leader_epoch``: the broker that answered and the leader
      epoch the request named (-1: none known).
    """

    records: bytes
    next_offset: int
    high_watermark: int
    last_stable_offset: int
    leader: int
    leader_epoch: int


class KafkaClient(_ClusterMetadata):
    """A synchronous reader of a Kafka cluster: partitions, offsets, raw record batches.

    ``bootstrap_servers`` is a comma-separated ``host:port`` list; any one
    that answers will do, the others are tried in turn.  Every request
    (connect, send, receive) is bounded by ``timeout_s`` seconds.

    A call that fails for a reason that may pass is tried again at most
    ``max_attempts`` times in all (``None``: no count limit) within
    ``retry_timeout_s`` seconds from its first try (default: ``timeout_s``),
    backing off ``retry_backoff_s`` doubling to ``retry_backoff_max_s``
    (see :mod:`~logstore.spark.kafka_client.retry`).  To ride out a leader
    election, give a budget longer than the cluster takes to notice a dead
    broker (Kafka's ``zookeeper.session.timeout.ms``, 18 s by default).

    Usable as a context manager; :meth:`close` closes every connection.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "logstore-spark",
        timeout_s: float = 30.0,
        max_attempts: int | None = MAX_ATTEMPTS,
        retry_timeout_s: float | None = None,
        retry_backoff_s: float = RETRY_BACKOFF_S,
        retry_backoff_max_s: float = RETRY_BACKOFF_MAX_S,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s!r}")
        self._bootstrap = _parse_bootstrap(bootstrap_servers)
        self._client_id = client_id
        self._timeout_s = float(timeout_s)
        self.retry_policy = RetryPolicy(
            timeout_s=float(timeout_s if retry_timeout_s is None else retry_timeout_s),
            max_attempts=max_attempts,
            backoff_s=float(retry_backoff_s),
            backoff_max_s=float(max(retry_backoff_s, retry_backoff_max_s)),
        )
        self._closed = False
        self._metadata_connection: _BrokerConnection | None = None
        self._connections: dict[int, _BrokerConnection] = {}  # broker id -> connection
        self._brokers: dict[int, tuple[str, int]] = {}  # broker id -> (host, port)
        self._leaders: dict[tuple[str, int], int] = {}  # (topic, partition) -> leader broker id
        self._leader_epochs: dict[tuple[str, int], int] = {}  # (topic, partition) -> leader epoch
        self._topic_ids: dict[str, uuid.UUID] = {}

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
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
        under way) and no broker answering are retried within the budget.
        """
        self._check_open()
        if topics is not None and not topics:
            return {}
        state = self.retry_policy.start()
        while True:
            try:
                return self._partitions_once(topics)
            except (BrokerUnavailable, KafkaResponseError) as exc:
                if not exc.retriable or exc.errno == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
                if not state.retry():
                    raise state.gave_up(exc, "Metadata", exc.topic, None) from exc

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

        def send(connection: _BrokerConnection, leader: int, leader_epoch: int) -> int:
            body = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=READ_COMMITTED,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=partition,
                                current_leader_epoch=leader_epoch,
                                timestamp=timestamp,
                            )
                        ],
                    )
                ],
            )
            response = connection.request(ApiKey.LIST_OFFSETS, body)
            assert isinstance(response, ListOffsetsResponse)
            for t in response.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        if p.error_code != 0:
                            raise _response_error(p.error_code, "ListOffsets", topic, partition)
                        return int(p.offset)
            raise KafkaProtocolError(
                f"ListOffsets to {connection.address}: the response does not list "
                f"{topic}-{partition}"
            )

        return self._on_leader("ListOffsets", topic, partition, send)

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
        :class:`KafkaOffsetOutOfRange`.  :meth:`fetch_records` tells more.
        """
        return self.fetch_records(topic, partition, offset, max_bytes).records

    def fetch_records(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
    ) -> Fetched:
        """:meth:`fetch`, with where to go on from and the leader's offsets: a :class:`Fetched`."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        if not 0 < max_bytes <= _MAX_FETCH_BYTES:
            raise ValueError(f"max_bytes must be in 1..{_MAX_FETCH_BYTES}, not {max_bytes}")

        def send(connection: _BrokerConnection, leader: int, leader_epoch: int) -> Fetched:
            fetch_offset, size = offset, max_bytes
            while True:
                answer = self._fetch_once(
                    connection, topic, partition, fetch_offset, size, leader_epoch
                )
                records, aborted, high_watermark, last_stable_offset = answer
                whole, cut_size = whole_batches(records)
                if not whole and cut_size is not None and cut_size > size:
                    if size != max_bytes:
                        raise KafkaProtocolError(
                            f"Fetch to {connection.address}: {topic}-{partition} returned a "
                            f"partial batch at offset {fetch_offset} "
                            f"even with partition_max_bytes {size}"
                        )
                    size = cut_size  # the first batch is larger than max_bytes: make room
                    continue
                size = max_bytes
                kept = drop_aborted(whole, aborted) if whole and aborted else whole
                if kept or not whole:
                    after = next_offset(kept) if kept else fetch_offset
                    return Fetched(
                        kept, after, high_watermark, last_stable_offset, leader, leader_epoch
                    )
                # Only aborted data here: read on past it.  Each round moves forward.
                after = next_offset(whole)
                if after <= fetch_offset:
                    raise KafkaProtocolError(
                        f"Fetch to {connection.address}: {topic}-{partition} at offset "
                        f"{fetch_offset} returned batches that end before it"
                    )
                fetch_offset = after

        return self._on_leader("Fetch", topic, partition, send)

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaClientError("the client is closed")

    def _partitions_once(self, topics: list[str] | None) -> dict[str, list[int]]:
        """One Metadata round of :meth:`partitions`; raises the first topic error."""
        response = self._refresh_metadata(topics)
        result: dict[str, list[int]] = {}
        for t in response.topics:
            if topics is None and t.is_internal:
                continue
            if t.error_code != 0:
                raise _response_error(t.error_code, "Metadata", t.name)
            result[t.name] = sorted(p.partition_index for p in t.partitions)
        if topics is None:
            return dict(sorted(result.items()))
        missing = [name for name in topics if name not in result]
        if missing:
            raise UnknownTopicOrPartition(
                f"Metadata: the response does not list {missing[0]}", topic=missing[0]
            )
        return {name: result[name] for name in topics}

    def _fetch_once(
        self,
        connection: _BrokerConnection,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        leader_epoch: int,
    ) -> tuple[bytes, list[tuple[int, int]], int, int]:
        """One Fetch of one partition under ``leader_epoch`` (-1: unchecked): its
        records as received (possibly with a cut tail), its aborted transactions as
        (producer id, first offset) pairs, its high watermark and last stable offset.

        A partition error raises; a refusal's KIP-951 hint (current leader and the
        response's node endpoints) rides on the exception."""
        version = connection.versions[ApiKey.FETCH]
        topic_id = self._topic_ids.get(topic, _NULL_UUID)
        if version >= FIRST_FETCH_WITH_TOPIC_IDS and topic_id == _NULL_UUID:
            version = FIRST_FETCH_WITH_TOPIC_IDS - 1
            if version < connection.ranges[ApiKey.FETCH][0]:
                raise UnsupportedVersion(
                    f"Fetch to {connection.address}: no topic id known for {topic}"
                )
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
                            current_leader_epoch=leader_epoch,
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
                            error = _response_error(p.error_code, what, topic, partition)
                            hint = p.current_leader
                            if hint is not None and hint.leader_id >= 0:
                                error.current_leader = (hint.leader_id, hint.leader_epoch)
                                error.node_endpoints = {
                                    n.node_id: (n.host, n.port)
                                    for n in response.node_endpoints or ()
                                }
                            raise error
                        records = bytes(p.records) if p.records is not None else b""
                        aborted = [
                            (a.producer_id, a.first_offset) for a in p.aborted_transactions or ()
                        ]
                        return records, aborted, int(p.high_watermark), int(p.last_stable_offset)
        raise KafkaProtocolError(f"{what}: the response does not list {topic}-{partition}")

    def _on_leader(self, what: str, topic: str, partition: int, send):  # type: ignore[no-untyped-def]
        """``send(connection, leader id, leader epoch)`` on the partition leader's
        connection, retried within the budget (see the module docstring).

        Retried: connection failures (metadata included), no leader, and retriable
        error codes; a KIP-951 hint newer than the cache is followed at once, any
        other failure refreshes the partition's metadata after the backoff.  A topic
        or partition the metadata does not list raises
        :class:`UnknownTopicOrPartition` at once, as do non-retriable errors.
        """
        state = self.retry_policy.start()
        refresh = False
        while True:
            last: KafkaClientError
            try:
                leader = self._leader(
                    topic, partition, refresh=refresh
                )  # UnknownTopicOrPartition: raised
            except BrokerUnavailable as exc:  # no broker answered Metadata
                leader, last = None, exc
            else:
                if leader is None:
                    last = LeaderNotAvailable(
                        f"Metadata: {topic}-{partition} has no leader",
                        topic=topic,
                        partition=partition,
                    )
            if leader is not None:
                try:
                    return send(
                        self._broker_connection(leader),
                        leader,
                        self._leader_epoch(topic, partition),
                    )
                except BrokerUnavailable as exc:
                    last = exc
                except KafkaResponseError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            hinted = isinstance(last, KafkaResponseError) and self._take_leader_hint(
                topic, partition, last.current_leader, last.node_endpoints
            )
            refresh = not hinted
            if not state.retry(backoff=not hinted):
                raise state.gave_up(last, what, topic, partition) from last
