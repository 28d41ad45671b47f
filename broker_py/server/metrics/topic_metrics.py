"""Messages and bytes in and out per topic (Kafka's ``kafka.server:type=BrokerTopicMetrics``).

Exported as the JMX exporter names them:
``kafka_server_brokertopicmetrics_messagesin_total{topic}``, ``..._bytesin_total{topic}``,
``..._bytesout_total{topic}``, ``..._totalproducerequests_total{topic}``,
``..._totalfetchrequests_total{topic}``, ``..._failedproducerequests_total{topic}`` and
``..._failedfetchrequests_total{topic}``; each also without the ``topic`` label, the
broker-wide meter (Kafka's ``BrokerTopicMetrics`` bean with no topic): the sum over
every topic counted since the broker started.

Failed: each partition of a Produce or Fetch response answered with an error code
(:meth:`on_produce_results`, :meth:`on_fetch_response`, called by those handlers).
Kafka leaves out of its failed meters the errors that only say "not here"
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) and counts the others; these
count every error, so a client chasing a moved leader shows here.

In: counted from each Produce request as it arrives (record-set bytes, and records from
the RecordBatch v2 headers: ``batchLength`` at byte 8, ``recordsCount`` at byte 57),
before the append; Kafka counts after a successful append, so a refused produce counts
here and not there. Out: the record bytes of each Fetch response (consumers and
followers), counted when the fetch completes, by wrapping ``ReplicaManager.fetch_messages``
of the one broker that owns this object.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric

_BATCH_LENGTH = struct.Struct(">i")


def count_records(buf: bytes | memoryview, start: int, end: int) -> int:
    """Records in the v2 batches of ``buf[start:end]`` (0 for older message sets)."""
    n = 0
    pos = start
    while pos + 61 <= end:
        (batch_length,) = _BATCH_LENGTH.unpack_from(buf, pos + 8)
        if buf[pos + 16] != 2 or batch_length < 49:
            break
        (records,) = _BATCH_LENGTH.unpack_from(buf, pos + 57)
        n += max(records, 0)
        pos += 12 + batch_length
    return n


class BrokerTopicMetrics:
    def __init__(self) -> None:
        self.messages_in: collections.Counter[str] = collections.Counter()
        self.bytes_in: collections.Counter[str] = collections.Counter()
        self.bytes_out: collections.Counter[str] = collections.Counter()
        self.produce_requests: collections.Counter[str] = collections.Counter()
        self.fetch_requests: collections.Counter[str] = collections.Counter()
        self.failed_produce: collections.Counter[str] = collections.Counter()
        self.failed_fetch: collections.Counter[str] = collections.Counter()

    def on_produce(self, request: Any) -> None:
        topics = getattr(request, "topics", None)
        frame = getattr(request, "frame", None)
        if topics is not None and frame is not None:  # a ProduceFrame: ranges into its frame
            for name, partitions in topics:
                self.produce_requests[name] += 1
                for _index, start, end, _pid in partitions:
                    if start >= 0:
                        self.bytes_in[name] += end - start
                        self.messages_in[name] += count_records(frame, start, end)
            return
        for topic in request.body.topic_data:
            self.produce_requests[topic.name] += 1
            for p in topic.partition_data:
                if p.records:
                    self.bytes_in[topic.name] += len(p.records)
                    self.messages_in[topic.name] += count_records(p.records, 0, len(p.records))

    def wrap_produce(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def handle(request: Any, connection: Any) -> Any:
            self.on_produce(request)
            return fn(request, connection)

        return handle

    def on_fetched(self, result: Any) -> None:
        """``result`` is what ReplicaManager.fetch_messages gives: a FetchPartitionData each."""
        for read in result:
            topic = getattr(read.fetch, "topic", None)
            if not topic:
                continue
            self.fetch_requests[topic] += 1
            if read.records:
                self.bytes_out[topic] += len(read.records)

    def on_produce_results(self, results: Any) -> None:
        """``results``: ``[(topic, [ProducePartitionResult, ...]), ...]`` of one Produce."""
        for topic, parts in results:
            for p in parts:
                if p.error_code:
                    self.failed_produce[topic] += 1

    def on_fetch_response(self, reads: Any) -> None:
        """``reads``: the FetchPartitionData of one Fetch (every partition read)."""
        for read in reads:
            if read.error_code and read.fetch.topic:  # a topic id unknown here: no name
                self.failed_fetch[read.fetch.topic] += 1

    def watch_fetches(self, replica_manager: Any) -> None:
        fetch_messages = replica_manager.fetch_messages

        def counted(*args: Any, **kwargs: Any) -> Any:
            on_done = kwargs.get("on_done")
            if on_done is not None:  # a fetch answered by a callback when it waits

                def done(reads: Any) -> None:
                    self.on_fetched(reads)
                    on_done(reads)

                kwargs["on_done"] = done
            result = fetch_messages(*args, **kwargs)
            if result is None:
                pass
            elif hasattr(result, "add_done_callback"):
                result.add_done_callback(
                    lambda f: (
                        None if f.cancelled() or f.exception() else self.on_fetched(f.result())
                    )
                )
            else:
                self.on_fetched(result)
            return result

        replica_manager.fetch_messages = counted

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {
            "messagesin": dict(self.messages_in),
            "bytesin": dict(self.bytes_in),
            "bytesout": dict(self.bytes_out),
            "totalproducerequests": dict(self.produce_requests),
            "totalfetchrequests": dict(self.fetch_requests),
            "failedproducerequests": dict(self.failed_produce),
            "failedfetchrequests": dict(self.failed_fetch),
        }


_HELP = {
    "messagesin": "Records received in Produce requests",
    "bytesin": "Record bytes received in Produce requests",
    "bytesout": "Record bytes sent in Fetch responses",
    "totalproducerequests": "Produce requests naming the topic",
    "totalfetchrequests": "Partitions of the topic read by Fetch requests",
    "failedproducerequests": "Partitions of the topic a Produce response answered with an error",
    "failedfetchrequests": "Partitions of the topic a Fetch response answered with an error",
}


def collect(snap: dict[str, dict[str, int]]) -> Iterator[Metric]:
    for name, values in snap.items():
        family = CounterMetricFamily(
            f"kafka_server_brokertopicmetrics_{name}", _HELP[name], labels=["topic"]
        )
        for topic, n in sorted(values.items()):
            family.add_metric([topic], n)
        # The broker-wide meter: the same name without the topic label.
        family.add_sample(f"kafka_server_brokertopicmetrics_{name}_total", {}, sum(values.values()))
        yield family
