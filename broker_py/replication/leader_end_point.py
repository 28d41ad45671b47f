"""A follower's view of one leader broker (Kafka's ``RemoteLeaderEndPoint``): the
Fetch and ListOffsets requests a replica fetcher sends it, over one
:class:`~broker_py.network.network_client.NetworkClient`.

Fetch is sent at v12, encoded and decoded by :mod:`.follower_fetch_codec`: topics by
name, ``replica_id`` = this broker, each partition's ``current_leader_epoch`` (the leader
fences a stale follower with FENCED_LEADER_EPOCH), ``last_fetched_epoch`` (the leader
answers a diverging follower with DivergingEpoch), ``log_start_offset``, and no fetch
session (``session_epoch`` -1, full requests). ListOffsets carries ``replica_id`` = this
broker, so the leader answers its log end for "latest", not its high watermark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import cast

from broker_py.network.network_client import NetworkClient, RawRequest
from broker_py.replication.follower_fetch_codec import (
    FetchedPartition,
    MalformedFetchResponse,
    PartitionFetch,
)
from broker_py.replication.follower_fetch_codec import decode_response as decode_fetch_response
from broker_py.replication.follower_fetch_codec import encode_request as encode_fetch
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.errors import KafkaError, ProtocolError, UnknownServerError, error_class
from logstore.protocol.messages.list_offsets import ListOffsetsRequest

FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 4
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]


@dataclasses.dataclass
class PartitionFetchState:
    """Where a follower fetches a partition from: its next offset, the leader epoch it
    follows in, the epoch of its last batch (-1: unknown or not to be checked), until
    when (monotonic seconds) it backs off after an error, and its lag: the leader's high
    watermark minus the next offset at the leader's last answer (Kafka's FetcherLagStats;
    0 until the first); ``in_sync``: that lag was 0 (Kafka's ``isReplicaInSync``: the
    follower's replication throttle never holds it back; False until the first answer)."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    delayed_until: float = 0.0
    lag: int = 0
    in_sync: bool = False


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # replica.fetch.response.max.bytes
    partition_max_bytes: int  # replica.fetch.max.bytes
    request_timeout_ms: int


FetchAnswers = tuple[int, dict[TopicPartition, FetchedPartition]]


class FollowerFetch(RawRequest):
    """A follower's Fetch v12 (:mod:`.follower_fetch_codec`): topics and their
    partitions' fields, encoded with the correlation id and client id when sent."""

    def __init__(
        self, replica_id: int, config: FetchConfig, topics: list[tuple[str, list[PartitionFetch]]]
    ) -> None:
        self.replica_id = replica_id
        self.config = config
        self.topics = topics

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        c = self.config
        return encode_fetch(
            correlation_id,
            client_id,
            self.replica_id,
            c.max_wait_ms,
            c.min_bytes,
            c.max_bytes,
            self.topics,
        )

    def decode(self, frame: bytes) -> FetchAnswers:
        try:
            return decode_fetch_response(frame)
        except MalformedFetchResponse as e:
            raise ProtocolError(f"malformed Fetch v{FETCH_VERSION} response: {e}") from None


class RemoteLeaderEndPoint:
    def __init__(self, broker_id: int, client: NetworkClient, config: FetchConfig) -> None:
        self.broker_id = broker_id
        self.client = client
        self.config = config

    def build_fetch(
        self,
        partitions: dict[TopicPartition, PartitionFetchState],
        log_start_offset: Callable[[TopicPartition], int],
    ) -> FollowerFetch:
        """The Fetch for ``partitions``; ``log_start_offset(tp)`` is the follower's own."""
        by_topic: dict[str, list[PartitionFetch]] = {}
        max_bytes = self.config.partition_max_bytes
        for (topic, index), state in partitions.items():
            by_topic.setdefault(topic, []).append(
                (
                    index,
                    state.current_leader_epoch,
                    state.fetch_offset,
                    state.last_fetched_epoch,
                    log_start_offset((topic, index)),
                    max_bytes,
                )
            )
        return FollowerFetch(self.broker_id, self.config, list(by_topic.items()))

    async def fetch(self, request: FollowerFetch) -> dict[TopicPartition, FetchedPartition]:
        """Each partition's data in the leader's answer; a request-level error raises."""
        timeout = self.config.request_timeout_ms + self.config.max_wait_ms
        response = await self.client.send(ApiKey.FETCH, request, timeout, version=FETCH_VERSION)
        error_code, answers = cast(FetchAnswers, response)
        if error_code:
            raise _error(error_code, f"fetch from broker {self.client.address}")
        return answers

    async def list_offset(
        self, tp: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> int:
        """The leader's log start (EARLIEST) or log end (LATEST) offset."""
        topic, index = tp
        request = ListOffsetsRequest(
            replica_id=self.broker_id,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=index,
                            current_leader_epoch=current_leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                ),
            ],
        )
        response = await self.client.send(
            ApiKey.LIST_OFFSETS,
            request,
            self.config.request_timeout_ms,
            version=LIST_OFFSETS_VERSION,
        )
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise _error(
                        p.error_code,
                        f"ListOffsets of {topic}-{index} from broker {self.client.address}",
                    )
                offset: int = p.offset
                return offset
        raise KafkaError(f"ListOffsets of {topic}-{index}: no answer for the partition")

    async def close(self) -> None:
        await self.client.close()


def _error(code: int, message: str) -> KafkaError:
    """The exception of a non-zero error code (:func:`error_class` has a class for each)."""
    cls = error_class(code)
    return (UnknownServerError if cls is None else cls)(message)
