"""A small synchronous Kafka wire-protocol client for reading a cluster.

Spark executors use :class:`KafkaClient` to list partitions, look up offsets
and fetch raw record batches from any Kafka-compatible cluster (logstore's
own broker or Apache Kafka).  It speaks the protocol through the sans-IO
codec in :mod:`logstore.protocol` (``encode_request``, ``FrameDecoder``,
``decode_response``); this package adds only the sockets, version
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
of the last Metadata response, then the bootstrap list: any live bootstrap
server will do).  ListOffsets and Fetch go to the partition leader's
connection, naming the leader epoch from Metadata (KIP-320) so that a broker
that is not the leader under that epoch refuses them; there is one
connection per broker id.  A connection failure, no leader, or a retriable
error code (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
LEADER_NOT_AVAILABLE, ...) is retried within the client's retry budget: at
once on the leader a KIP-951 hint names, else after a backoff with the
partition's metadata asked again.  A retried call asks for the same offset.
Non-retriable codes (OFFSET_OUT_OF_RANGE, ...) raise at once, and a spent
budget raises the last error's class with a message naming the partition.
Each request is bounded by ``timeout_s`` (connect, send and receive
together).

A client is not thread-safe: use one per thread.  Construction does no I/O;
the first call connects.

Modules
-------

``client`` (:class:`KafkaClient`: partitions, ListOffsets, Fetch, leader
routing and retries), ``metadata`` (bootstrap servers, Metadata and its
caches of brokers, leaders, leader epochs and topic ids, leader hints),
``retry`` (the retry budget and backoff), ``connection`` (one broker
connection: ApiVersions, framing, correlation ids, timeouts), ``batches``
(whole batches, aborted transactions) and ``errors`` (the exceptions and
the mapping of Kafka error codes to them).  Every public name is importable
from ``logstore.spark.kafka_client``.
"""

from __future__ import annotations

from logstore.spark.kafka_client.batches import (
    BATCH_HEADER,
    MIN_BATCH_LENGTH,
    drop_aborted,
    next_offset,
    whole_batches,
)
from logstore.spark.kafka_client.client import (
    EARLIEST,
    FETCH_MAX_WAIT_MS,
    FIRST_FETCH_WITH_TOPIC_IDS,
    LATEST,
    MAX_ATTEMPTS,
    READ_COMMITTED,
    RETRY_BACKOFF_MAX_S,
    RETRY_BACKOFF_S,
    Fetched,
    KafkaClient,
)
from logstore.spark.kafka_client.connection import CLIENT_VERSIONS
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    FencedLeaderEpoch,
    KafkaClientError,
    KafkaOffsetOutOfRange,
    KafkaProtocolError,
    KafkaResponseError,
    LeaderNotAvailable,
    NotLeaderOrFollower,
    UnknownLeaderEpoch,
    UnknownTopicOrPartition,
    UnsupportedVersion,
)
from logstore.spark.kafka_client.retry import RetryPolicy, RetryState

__all__ = [
    "BATCH_HEADER",
    "CLIENT_VERSIONS",
    "EARLIEST",
    "FETCH_MAX_WAIT_MS",
    "FIRST_FETCH_WITH_TOPIC_IDS",
    "LATEST",
    "MAX_ATTEMPTS",
    "MIN_BATCH_LENGTH",
    "READ_COMMITTED",
    "RETRY_BACKOFF_MAX_S",
    "RETRY_BACKOFF_S",
    "BrokerUnavailable",
    "FencedLeaderEpoch",
    "Fetched",
    "KafkaClient",
    "KafkaClientError",
    "KafkaOffsetOutOfRange",
    "KafkaProtocolError",
    "KafkaResponseError",
    "LeaderNotAvailable",
    "NotLeaderOrFollower",
    "RetryPolicy",
    "RetryState",
    "UnknownLeaderEpoch",
    "UnknownTopicOrPartition",
    "UnsupportedVersion",
    "drop_aborted",
    "next_offset",
    "whole_batches",
]
