"""The `_schemas` topic: created if absent, read from its start by a consumer thread, written
by an idempotent producer.

Topic: one partition, `cleanup.policy=compact`, `min.insync.replicas=2` at a replication
factor of 3 or more (else 1). The replication factor is the one given (a broker in a cluster:
`schema.registry.topic.replication.factor`, default 3; creation waits until that many brokers
are alive, as Kafka's internal topics do), else `min(3, live brokers)` (a broker alone, a
standalone registry: Confluent's rule). Records are applied to `RegistryState` on the event loop
in offset order; `wait_for(offset)` returns once the record at `offset` is applied, and
`catch_up()` once every record below the partition's current end is. A record that is not
Confluent's JSON is logged and skipped, as Confluent's reader does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from logstore.schema_registry import errors
from logstore.schema_registry.records import (
    Key,
    Record,
    RecordFormatError,
    Value,
    decode_key,
    decode_value,
    encode_record,
)

log = logging.getLogger(__name__)

TOPIC = "_schemas"


class KafkaStore:
    def __init__(
        self,
        client_config: dict[str, Any],
        apply: Callable[[Key, Value | None], None],
        *,
        topic: str = TOPIC,
        replication_factor: int | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.config = dict(client_config)
        self.apply = apply
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self.applied = -1  # offset of the last record applied
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._offsets: Consumer | None = None
        # blocking client calls run here, never on the loop's default executor (the broker's)
        self._executor = ThreadPoolExecutor(2, thread_name_prefix="sr-store")

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._run(self._ensure_topic)
        if self._producer is not None:
            return
        self._producer = Producer(
            {**self.config, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
        )
        self._consumer = Consumer(
            {
                **self.config,
                "group.id": "logstore-schema-registry-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 50,
                "isolation.level": "read_committed",
            }
        )
        # watermark queries on their own handle: the reader's consume() holds its handle
        self._offsets = self._offsets_consumer()
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._read, name="sr-reader", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await self._run(self._thread.join, 5.0)
        for consumer in (self._consumer, self._offsets):
            if consumer is not None:
                consumer.close()
        if self._producer is not None:
            await self._run(self._producer.flush, 2.0)
            self._producer = None  # destroyed now, not when the process ends
        self._executor.shutdown(wait=False)
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(errors.StoreError("the registry is stopping"))

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _ensure_topic(self) -> None:
        admin = AdminClient(self.config)
        md = admin.list_topics(timeout=self.timeout_s)
        if self.topic in md.topics and md.topics[self.topic].error is None:
            return
        brokers = max(1, len(md.brokers))
        rf = self.replication_factor or min(3, brokers)
        if rf > brokers:
            # as Kafka does for its internal topics: wait (the caller retries) for the brokers
            raise errors.StoreError(
                f"{self.topic} needs {rf} brokers for its replication factor; {brokers} alive"
            )
        topic = NewTopic(
            self.topic,
            num_partitions=1,
            replication_factor=rf,
            config={
                "cleanup.policy": "compact",
                "min.insync.replicas": "2" if rf >= 3 else "1",
            },
        )
        for fut in admin.create_topics([topic], operation_timeout=self.timeout_s).values():
            try:
                fut.result(self.timeout_s)
            except Exception as exc:  # confluent_kafka raises KafkaException
                err = exc.args[0] if exc.args else None
                if not (
                    isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS
                ):
                    raise

    # -- reading ----------------------------------------------------------------------------

    def _read(self) -> None:
        consumer = self._consumer
        assert consumer is not None and self._loop is not None
        while not self._stop.is_set():
            # consume() waits out its timeout unless the batch fills: block on the first
            # record only, then take what has arrived
            first = consumer.poll(0.2)
            msgs = [] if first is None else [first, *consumer.consume(499, 0)]
            batch: list[tuple[int, Key, Value | None]] = []
            for msg in msgs:
                if msg.error() is not None:
                    continue
                offset = int(msg.offset() or 0)
                try:
                    key = decode_key(msg.key() or b"")
                    value = decode_value(key, msg.value())
                except RecordFormatError as exc:
                    log.warning("_schemas offset %s skipped: %s", offset, exc)
                    batch.append((offset, Key("NOOP"), None))
                    continue
                batch.append((offset, key, value))
            if batch:
                try:
                    self._loop.call_soon_threadsafe(self._apply_batch, batch)
                except RuntimeError:
                    return  # the loop is closed

    def _apply_batch(self, batch: list[tuple[int, Key, Value | None]]) -> None:
        for offset, key, value in batch:
            if offset <= self.applied:
                continue
            if key.keytype != "NOOP":
                self.apply(key, value)
            self.applied = offset
        still = []
        for offset, fut in self._waiters:
            if offset <= self.applied:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((offset, fut))
        self._waiters = still

    async def wait_for(self, offset: int) -> None:
        if offset <= self.applied:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, self.timeout_s)
        except TimeoutError:
            raise errors.OperationTimeoutError(
                "Timed out waiting for the record to be read back from _schemas"
            ) from None

    def _offsets_consumer(self) -> Consumer:
        return Consumer({**self.config, "group.id": "logstore-schema-registry-offsets"})

    async def end_offset(self) -> int:
        consumer = self._offsets
        assert consumer is not None
        tp = TopicPartition(self.topic, 0)
        try:
            _, high = await self._run(consumer.get_watermark_offsets, tp, self.timeout_s, False)
        except Exception as exc:  # confluent_kafka raises KafkaException
            log.info("schema registry: the end of %s: %s; asking on a new handle", self.topic, exc)
            # A handle that only queries watermarks keeps the partition's metadata from before
            # its leader died and can answer UNKNOWN_PARTITION from then on: a new handle
            # fetches metadata anew (once per failure; the caller's error stands otherwise).
            fresh = self._offsets = self._offsets_consumer()
            await self._run(consumer.close)
            _, high = await self._run(fresh.get_watermark_offsets, tp, self.timeout_s, False)
        return int(high)

    async def catch_up(self) -> None:
        """Returns once every record written before the call is applied."""
        try:
            high = await self.end_offset()
        except Exception as exc:
            raise errors.StoreError(f"cannot read the end of {self.topic}: {exc}") from None
        await self.wait_for(high - 1)

    # -- writing ----------------------------------------------------------------------------

    async def write(self, records: list[Record]) -> int:
        """Produce `records` in order; the offset of the last, once acknowledged."""
        producer = self._producer
        assert producer is not None and self._loop is not None
        loop = self._loop
        futs: list[asyncio.Future[int]] = []
        for key, value in records:
            fut: asyncio.Future[int] = loop.create_future()
            futs.append(fut)

            def delivered(err: Any, msg: Any, fut: asyncio.Future[int] = fut) -> None:
                def settle() -> None:
                    if fut.done():
                        return
                    if err is not None:
                        fut.set_exception(errors.StoreError(f"write to _schemas failed: {err}"))
                    else:
                        fut.set_result(msg.offset())

                loop.call_soon_threadsafe(settle)

            raw_key, raw_value = encode_record(key, value)
            producer.produce(
                self.topic, value=raw_value, key=raw_key, partition=0, on_delivery=delivered
            )
        await self._run(producer.flush, self.timeout_s)
        try:
            offsets = await asyncio.wait_for(asyncio.gather(*futs), self.timeout_s)
        except TimeoutError:
            raise errors.OperationTimeoutError("Timed out writing to _schemas") from None
        return offsets[-1]
