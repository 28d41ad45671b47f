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
of the last Metadata response, then the bootstrap list).  ListOffsets and
Fetch go to the partition leader's connection; there is one connection per
broker id.  A connection failure or a retriable error code (leader moved,
leader epoch changed, topic id unknown, ...) refreshes the metadata and
retries, :data:`MAX_ATTEMPTS` attempts in all with a short backoff.
Non-retriable codes (OFFSET_OUT_OF_RANGE, ...) raise at once.  Each request
is bounded by ``timeout_s`` (connect, send and receive together).

A client is not thread-safe: use one per thread.  Construction does no I/O;
the first call connects.

Modules
-------

``client`` (:class:`KafkaClient`: partitions, ListOffsets, Fetch, leader
routing and retries), ``metadata`` (bootstrap servers, Metadata and its
caches of brokers, leaders and topic ids), ``connection`` (one broker
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
    RETRY_BACKOFF_S,
    KafkaClient,
)
from logstore.spark.kafka_client.connection import CLIENT_VERSIONS
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    KafkaClientError,
    KafkaOffsetOutOfRange,
    KafkaProtocolError,
    KafkaResponseError,
    LeaderNotAvailable,
    NotLeaderOrFollower,
    UnknownTopicOrPartition,
    UnsupportedVersion,
)

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
