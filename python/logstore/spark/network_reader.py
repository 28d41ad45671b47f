"""Reads topics through the Kafka protocol (Metadata, ListOffsets, Fetch) from each
partition's leader, decoding the fetched bytes with the same Rust Arrow decoder as
the file reader.

Fetch uses read_committed, so the broker's aborted-transaction list is applied by
``KafkaClient``; control batches are skipped by the decoder. A fetch returns whole
batches starting with the one that holds the asked offset; records below the range
start and at or after its end are filtered while decoding.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from logstore import _native
from logstore.spark.errors import DataLossError
from logstore.spark.kafka_client import EARLIEST, LATEST, KafkaClient, KafkaOffsetOutOfRange
from logstore.spark.offset_range import OffsetRange, RecordBounds

FETCH_MAX_BYTES = 4 << 20


class NetworkLog:
    """A Kafka-compatible cluster. Picklable: the client is made lazily in each process."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._client: KafkaClient | None = None

    def __getstate__(self) -> dict:
        return {"bootstrap_servers": self.bootstrap_servers}

    def __setstate__(self, state: dict) -> None:
        self.bootstrap_servers = state["bootstrap_servers"]
        self._client = None

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.bootstrap_servers)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def partitions(self) -> dict[str, list[int]]:
        return {t: sorted(ps) for t, ps in sorted(self.client.partitions().items())}

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        return self.client.list_offset(topic, partition, EARLIEST), self.client.list_offset(topic, partition, LATEST)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        o = self.client.list_offset(topic, partition, timestamp)
        return None if o < 0 else o

    def read(
        self, r: OffsetRange, bounds: RecordBounds, *, include_headers: bool, fail_on_data_loss: bool, max_rows: int
    ) -> Iterator[pa.RecordBatch]:
        offset, end = bounds.clamp(r.start, r.end)
        client = KafkaClient(self.bootstrap_servers)
        try:
            while offset < end:
                try:
                    data = client.fetch(r.topic, r.partition, offset, FETCH_MAX_BYTES)
                except KafkaOffsetOutOfRange as e:
                    start = client.list_offset(r.topic, r.partition, EARLIEST)
                    if fail_on_data_loss or start <= offset:
                        raise DataLossError(f"{r.topic}-{r.partition}: offset {offset} is gone ({e})") from e
                    offset = start
                    continue
                if not data:
                    break
                batch, next_offset = _native.decode_arrow(
                    data,
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
