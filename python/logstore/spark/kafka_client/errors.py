"""The exceptions :class:`~logstore.spark.kafka_client.KafkaClient` raises, and the
mapping of a response's Kafka error code to one of them."""

from __future__ import annotations

from logstore.protocol.error_codes import ErrorCode


class KafkaClientError(Exception):
    """Base of every error :class:`KafkaClient` raises.

    ``errno`` is the Kafka error code behind the failure, or ``None`` when
    there is none (I/O failures, protocol violations).  ``retriable`` says
    whether the same call may succeed later.  ``topic`` and ``partition``
    name the partition the failed call was about, or are ``None``;
    ``attempts`` is how many times the call was tried before this error was
    raised (1 when it was not retried).
    """

    errno: int | None = None
    retriable: bool = False
    topic: str | None = None
    partition: int | None = None
    attempts: int = 1


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

    ``current_leader`` is the KIP-951 hint of a Fetch answer that refused the
    request (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH): the partition's
    leader as (broker id, leader epoch) by the answering broker's metadata,
    or ``None``.  ``node_endpoints`` maps the broker ids of such hints to
    (host, port) on the client's listener (Fetch v16+); it may be empty.
    """

    current_leader: tuple[int, int] | None = None

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
        self.node_endpoints: dict[int, tuple[str, int]] = {}


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


class FencedLeaderEpoch(KafkaResponseError):
    """FENCED_LEADER_EPOCH (74): the request's current_leader_epoch is older than the broker's.

    This client's metadata is stale: it refreshes it and asks the new leader.
    """

    errno = int(ErrorCode.FENCED_LEADER_EPOCH)


class UnknownLeaderEpoch(KafkaResponseError):
    """UNKNOWN_LEADER_EPOCH (75): the request's current_leader_epoch is newer than the broker's.

    The broker has not yet heard of the election this client's metadata
    reflects (or it is a deposed leader that will never hear of it).
    """

    errno = int(ErrorCode.UNKNOWN_LEADER_EPOCH)


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
        FencedLeaderEpoch,
        UnknownLeaderEpoch,
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
