"""Reads topics through the Kafka protocol (Metadata, ListOffsets, Fetch) from each
partition's current leader, decoding the fetched bytes with the same Rust Arrow decoder
as the file reader.

Fetch uses read_committed, so the broker's aborted-transaction list is applied by
``KafkaClient``; control batches are skipped by the decoder. A fetch returns whole
batches starting with the one that holds the asked offset; records below the range
start and at or after its end are filtered while decoding.

Leaders move: ``KafkaClient`` follows them within its retry budget (the
``kafka.default.api.timeout.ms`` option), asking for the same offset again on the new
leader. Invariant of :meth:`NetworkLog.read`: ``offset`` (the next offset to yield)
only grows, and only past offsets whose records were yielded or hold none (aborted
data, control batches, compacted gaps), so a record is yielded exactly once however
often a fetch is retried. The range end was fixed at planning from the leader's last
stable offset; a leader that has nothing at an ``offset`` below that end (a new
leader whose high watermark has not caught up yet) is asked again after the backoff,
within the same budget; when the budget is spent the records are treated as lost
(DataLossError, or with failOnDataLoss=false the read stops there).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from logstore import _native
from logstore.spark.errors import DataLossError
from logstore.spark.kafka_client import EARLIEST, LATEST, KafkaClient, KafkaOffsetOutOfRange
from logstore.spark.offset_range import OffsetRange, RecordBounds
from logstore.spark.options import NetworkSettings


class NetworkLog:
    """A Kafka-compatible cluster. Picklable: the client is made lazily in each process."""

    def __init__(self, bootstrap_servers: str, settings: NetworkSettings | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.settings = settings or NetworkSettings()
        self._client: KafkaClient | None = None

    def __getstate__(self) -> dict:
        return {"bootstrap_servers": self.bootstrap_servers, "settings": self.settings}

    def __setstate__(self, state: dict) -> None:
        self.bootstrap_servers = state["bootstrap_servers"]
        self.settings = state.get("settings") or NetworkSettings()
        self._client = None

    def new_client(self) -> KafkaClient:
        """A client with these settings: retries bounded by time only, not by count."""
        s = self.settings
        return KafkaClient(
            self.bootstrap_servers,
            timeout_s=s.request_timeout_s,
            max_attempts=None,
            retry_timeout_s=s.retry_timeout_s,
            retry_backoff_s=s.retry_backoff_s,
            retry_backoff_max_s=s.retry_backoff_max_s,
        )

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def partitions(self) -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in sorted(self.client.partitions().items())}

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        return self.client.list_offset(topic, partition, EARLIEST), self.client.list_offset(
            topic, partition, LATEST
        )

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        o = self.client.list_offset(topic, partition, timestamp)
        return None if o < 0 else o

    def read(
        self,
        r: OffsetRange,
        bounds: RecordBounds,
        *,
        include_headers: bool,
        fail_on_data_loss: bool,
        max_rows: int,
    ) -> Iterator[pa.RecordBatch]:
        offset, end = bounds.clamp(r.start, r.end)
        client = self.new_client()
        stalled = None  # the retry state while the leader has nothing at `offset` < `end`
        try:
            while offset < end:
                try:
                    fetched = client.fetch_records(
                        r.topic, r.partition, offset, self.settings.fetch_max_bytes
                    )
                except KafkaOffsetOutOfRange as e:
                    start = client.list_offset(r.topic, r.partition, EARLIEST)
                    if fail_on_data_loss or start <= offset:
                        raise DataLossError(
                            f"{r.topic}-{r.partition}: offset {offset} is gone ({e})"
                        ) from e
                    offset = start
                    continue
                if not fetched.records:
                    # Only aborted data (or nothing) from offset to next_offset.
                    offset = max(offset, fetched.next_offset)
                    if offset >= end:
                        break
                    stalled = stalled or client.retry_policy.start()
                    if not stalled.retry():
                        message = (
                            f"{r.topic}-{r.partition}: offsets [{offset}, {end}) were planned but "
                            f"leader {fetched.leader} (epoch {fetched.leader_epoch}) has nothing "
                            f"at {offset} (high watermark {fetched.high_watermark}, last stable "
                            f"offset {fetched.last_stable_offset}) after {stalled.elapsed:.1f} s"
                        )
                        if fail_on_data_loss:
                            raise DataLossError(
                                message + " (set failOnDataLoss=false to skip them)"
                            )
                        break
                    continue
                stalled = None
                batch, next_offset = _native.decode_arrow(
                    fetched.records,
                    r.topic,
                    r.partition,
                    start_offset=offset,
                    end_offset=end,
                    min_timestamp=bounds.min_timestamp,
                    max_timestamp=bounds.max_timestamp,
                    include_headers=include_headers,
                )
                if batch.num_rows:
                    yield batch
                if next_offset <= offset:
                    break
                offset = next_offset
        finally:
            client.close()
