"""Scripted brokers on loopback, answering with the broker's own codec, for driving the
Spark source's Kafka client through leader changes that a real cluster makes only
by chance: KIP-951 hints, stale metadata, epochs, a new leader whose high watermark
lags.

One :class:`FakeCluster` holds the truth: for each partition of the one topic
:data:`TOPIC`, its leader's node id and leader epoch, and its log (whole batches,
offsets from 0). Each :class:`FakeBroker` answers from it:

- Metadata: nothing (no broker, every topic unknown) while ``just_started``, as a
  broker answers before the controller's first UpdateMetadata; otherwise
  the live, ``listed`` brokers and each partition's leader and epoch, or
  the broker's own ``stale_view`` of them when set (a broker that has not heard of an
  election, and answers requests by it too: a deposed leader goes on serving);
- ListOffsets and Fetch: refused as Kafka refuses them (NOT_LEADER_OR_FOLLOWER when
  not the leader, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the request's
  current_leader_epoch is older / newer than the leader's), a refusal carrying the
  KIP-951 hint (current leader, its endpoint) when ``hints`` is on; otherwise the
  log up to the broker's high watermark (``high_watermark`` overrides it while it
  is not None), batches holding the fetch offset and after it, at least one, then
  as many as fit in ``partition_max_bytes``.  ``forced_errors`` are answered first,
  one per ListOffsets or Fetch.

``requests`` logs (api key, version, body) of every request a broker received.
``stop()`` closes the listener and every connection (a broker that died).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid

import logstore
from logstore.protocol import ApiKey, Request, RequestDecoder, encode_response
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.api_versions import api_versions_response
from logstore.protocol.messages.fetch import FetchResponse
from logstore.protocol.messages.list_offsets import ListOffsetsResponse
from logstore.protocol.messages.metadata import MetadataResponse

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=42)
BASE_TS = 1_700_000_000_000


def make_log(n: int, per_batch: int) -> list[tuple[int, int, bytes]]:
    """``n`` records ``b"v<offset>"`` in batches of ``per_batch``: (base, last, bytes)."""
    out = []
    for base in range(0, n, per_batch):
        count = min(per_batch, n - base)
        recs = [(None, b"v%d" % (base + i)) for i in range(count)]
        out.append(
            (
                base,
                base + count - 1,
                logstore.encode_batch(recs, base_offset=base, timestamp_ms=BASE_TS),
            )
        )
    return out


class FakeCluster:
    def __init__(
        self, n_brokers: int, n_records: int, per_batch: int = 5, partitions: int = 1
    ) -> None:
        self.lock = threading.Lock()
        self.log = {p: make_log(n_records, per_batch) for p in range(partitions)}
        self.leader = {p: 1 for p in range(partitions)}  # partition -> node id
        self.epoch = {p: 0 for p in range(partitions)}  # partition -> leader epoch
        self.brokers = {i: FakeBroker(self, i) for i in range(1, n_brokers + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def elect(self, partition: int, leader: int) -> None:
        """A new leader in a new epoch."""
        with self.lock:
            self.leader[partition] = leader
            self.epoch[partition] += 1

    def log_end(self, partition: int) -> int:
        return self.log[partition][-1][1] + 1

    def __enter__(self) -> FakeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        for b in self.brokers.values():
            b.stop()


class FakeBroker:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.hints = False
        self.stale_view: dict[int, tuple[int, int]] | None = None  # partition -> (leader, epoch)
        self.high_watermark: int | None = None
        self.listed = True  # named among the brokers of its Metadata answers (and other brokers')
        self.just_started = (
            False  # Metadata answers as before the first UpdateMetadata: no broker, no topic
        )
        self.forced_errors: list[
            int
        ] = []  # answer the next ListOffsets / Fetch with these codes, in order
        self.requests: list[tuple[ApiKey, int, object]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return not self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        for c in list(self._conns):
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def received(self, key: ApiKey) -> list:
        return [body for k, _, body in self.requests if k is key]

    # ---- answers ----

    def answer(self, request: Request):
        key = request.api_key
        if key is ApiKey.API_VERSIONS:
            return api_versions_response()
        if key is ApiKey.METADATA:
            return self._metadata(request.body)
        if key is ApiKey.LIST_OFFSETS:
            return self._list_offsets(request.body)
        if key is ApiKey.FETCH:
            return self._fetch(request.body, request.api_version)
        raise AssertionError(f"unexpected {key.api_name}")

    def _view(self, partition: int) -> tuple[int, int]:
        if self.stale_view is not None and partition in self.stale_view:
            return self.stale_view[partition]
        return self.cluster.leader[partition], self.cluster.epoch[partition]

    def _metadata(self, body):
        if self.just_started:
            topics = [
                MetadataResponse.MetadataResponseTopic(
                    name=t.name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                for t in body.topics or ()
            ]
            return MetadataResponse(brokers=[], controller_id=-1, topics=topics)
        brokers = [
            MetadataResponse.MetadataResponseBroker(
                node_id=b.node_id, host="127.0.0.1", port=b.port
            )
            for b in self.cluster.brokers.values()
            if b.alive and b.listed
        ]
        partitions = []
        for p in sorted(self.cluster.log):
            leader, epoch = self._view(p)
            partitions.append(
                MetadataResponse.MetadataResponsePartition(
                    partition_index=p,
                    leader_id=leader,
                    leader_epoch=epoch,
                    replica_nodes=sorted(self.cluster.brokers),
                    isr_nodes=sorted(self.cluster.brokers),
                )
            )
        topics = [
            MetadataResponse.MetadataResponseTopic(
                name=TOPIC, topic_id=TOPIC_ID, partitions=partitions
            )
            for t in body.topics or [None]
            if t is None or t.name == TOPIC
        ]
        return MetadataResponse(brokers=brokers, controller_id=1, topics=topics)

    def _refusal(self, partition: int, current_leader_epoch: int) -> int:
        if self.forced_errors:
            return self.forced_errors.pop(0)
        leader, epoch = self._view(partition)
        if leader != self.node_id:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0 and current_leader_epoch < epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > epoch:
            return int(ErrorCode.UNKNOWN_LEADER_EPOCH)
        return 0

    def _hw(self, partition: int) -> int:
        return (
            self.cluster.log_end(partition) if self.high_watermark is None else self.high_watermark
        )

    def _list_offsets(self, body):
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                error = self._refusal(p.partition_index, p.current_leader_epoch)
                offset = -1 if error else 0 if p.timestamp == -2 else self._hw(p.partition_index)
                parts.append(
                    ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=error,
                        timestamp=-1,
                        offset=offset,
                    )
                )
            topics.append(
                ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts)
            )
        return ListOffsetsResponse(topics=topics)

    def _fetch(self, body, version: int):
        nodes: dict[int, FakeBroker] = {}
        topics = []
        for t in body.topics:
            parts = []
            for fp in t.partitions:
                p = fp.partition
                error = self._refusal(p, fp.current_leader_epoch)
                hw = self._hw(p)
                data = FetchResponse.PartitionData(
                    partition_index=p,
                    error_code=error,
                    high_watermark=hw,
                    last_stable_offset=hw,
                    log_start_offset=0,
                    aborted_transactions=[],
                    records=b"",
                )
                if self.hints and error in (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.FENCED_LEADER_EPOCH,
                ):
                    leader = self.cluster.leader[p]
                    data.current_leader = FetchResponse.LeaderIdAndEpoch(
                        leader_id=leader, leader_epoch=self.cluster.epoch[p]
                    )
                    nodes[leader] = self.cluster.brokers[leader]
                if not error:
                    chunks, size = [], 0
                    for _base, last, raw in self.cluster.log[p]:
                        if last < fp.fetch_offset or last >= hw:
                            continue
                        if chunks and size + len(raw) > fp.partition_max_bytes:
                            break
                        chunks.append(raw)
                        size += len(raw)
                    data.records = b"".join(chunks)
                parts.append(data)
            topics.append(
                FetchResponse.FetchableTopicResponse(
                    topic=TOPIC, topic_id=TOPIC_ID, partitions=parts
                )
            )
        endpoints = [
            FetchResponse.NodeEndpoint(node_id=b.node_id, host="127.0.0.1", port=b.port)
            for b in nodes.values()
        ]
        return FetchResponse(responses=topics, node_endpoints=endpoints)

    # ---- serving ----

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = RequestDecoder()
        conn.settimeout(0.1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                decoder.receive_data(data)
                while (request := decoder.next_request()) is not None:
                    self.requests.append((request.api_key, request.api_version, request.body))
                    with self.cluster.lock:
                        body = self.answer(request)
                    with contextlib.suppress(OSError):
                        conn.sendall(
                            encode_response(
                                request.correlation_id, request.api_key, request.api_version, body
                            )
                        )
