"""Producers and consumers of three real client libraries (confluent-kafka,
kafka-python, aiokafka) writing unique values to a topic and recording a history for
:mod:`tests.cluster.harness.checker`.

- A producer named ``<name>`` sends the values ``"<name>-0"``, ``"<name>-1"``, ... (UTF-8,
  no key), value ``n`` to partition ``n % partitions``, with ``acks=all`` and
  idempotence on. Each send is recorded when invoked (outcome ``"info"``) and completed
  by the client's callback: ``"ok"`` with the acknowledged offset, ``"fail"`` only for
  errors that say the record was never written (rejected before any append, or never
  handed to the client), ``"info"`` for everything else (timeouts, lost connections,
  or no answer before the producer's time ran out).
- A consumer named ``<name>`` assigns every partition from the beginning (no group, no
  commits), polls while the producers run, then reads every partition up to the end
  offsets it asks for once the producers are done. Every poll is recorded, one
  :class:`Poll` per partition; the assignment is recorded as a :class:`Reset`.

Every loop is bounded by a count and by seconds; clients only ever see the bootstrap
address they are given (the harness's client proxies on 127.0.0.1)::

    wl = Workload(cluster.bootstrap_servers, topic, partitions=2, count=200, seconds=10)
    history = wl.run()
    result = history.check()
    assert result.ok, result.summary()
    print(history.longest_ack_gap())
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tests.cluster.harness.checker import (
    FAIL,
    INFO,
    OK,
    CheckResult,
    Op,
    Poll,
    Reset,
    Send,
    check,
    longest_ack_gap,
)

CLIENTS = ("confluent", "kafka-python", "aiokafka")
Records = dict[int, list[tuple[int, str]]]


class History:
    """A thread-safe, append-only record of operations (see the checker's formats).
    ``final_reads_complete`` and ``frozen`` are set by :meth:`Workload.run`; a send still
    without completion then stays unknown ("info")."""

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._lock = threading.Lock()
        self.final_reads_complete = False
        self.frozen = False  # set when the run is over: late client callbacks are ignored

    def send_invoked(self, process: str, value: str, partition: int) -> Send:
        s = Send(process, value, partition, INFO, None, time.monotonic())
        with self._lock:
            self._ops.append(s)
        return s

    def send_completed(
        self, send: Send, outcome: str, offset: int | None = None, error: str | None = None
    ) -> None:
        with self._lock:
            if send.completed is not None or self.frozen:
                return  # the first completion wins; none after the run
            send.outcome, send.offset, send.error, send.completed = (
                outcome,
                offset,
                error,
                time.monotonic(),
            )

    def poll(self, process: str, records: Records) -> None:
        now = time.monotonic()
        with self._lock:
            for p in sorted(records):
                if records[p]:
                    self._ops.append(Poll(process, p, tuple(records[p]), now))

    def reset(self, process: str, partitions: Sequence[int] | None = None) -> None:
        with self._lock:
            self._ops.append(
                Reset(
                    process, tuple(partitions) if partitions is not None else None, time.monotonic()
                )
            )

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    @property
    def sends(self) -> list[Send]:
        return [op for op in self.ops if isinstance(op, Send)]

    @property
    def polls(self) -> list[Poll]:
        return [op for op in self.ops if isinstance(op, Poll)]

    def check(self, extra: Sequence[Op] = (), **kwargs) -> CheckResult:
        """The checker over this history plus ``extra`` ops (e.g. replica reads)."""
        kwargs.setdefault("final_reads_complete", self.final_reads_complete)
        return check(self.ops + list(extra), **kwargs)

    def longest_ack_gap(self, process: str | None = None) -> float:
        """The unavailability window a producer saw: the longest time between two
        consecutive acknowledgements (seconds)."""
        return longest_ack_gap(self.sends, process)


# ---------------------------------------------------------------- producers


def _kind(name: str) -> str:
    for kind in CLIENTS:
        if name.startswith(kind):
            return kind
    raise ValueError(f"{name!r} does not name a client ({', '.join(CLIENTS)})")


_CONFLUENT_DEFINITE = (
    "_UNKNOWN_PARTITION",
    "_UNKNOWN_TOPIC",
    "_PURGE_QUEUE",
    "MSG_SIZE_TOO_LARGE",
    "_MSG_SIZE_TOO_LARGE",
    "TOPIC_AUTHORIZATION_FAILED",
    "INVALID_REQUIRED_ACKS",
    "INVALID_MSG",
    "INVALID_RECORD",
)
_PY_DEFINITE = (
    "MessageSizeTooLargeError",
    "TopicAuthorizationFailedError",
    "InvalidRequiredAcksError",
    "InvalidRecordError",
    "UnknownTopicOrPartitionError",
    "CorruptRecordError",
    "RecordListTooLargeError",
)


class Producer:
    """Sends ``count`` values at most, for ``seconds`` at most, ``interval`` seconds
    apart, then waits up to ``flush_seconds`` for outstanding acknowledgements."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        history: History,
        partitions: int = 1,
        config: dict | None = None,
    ) -> None:
        self.name, self.kind = name, _kind(name)
        self.bootstrap, self.topic, self.history, self.partitions = (
            bootstrap,
            topic,
            history,
            partitions,
        )
        self.config = config or {}
        self.error: BaseException | None = None

    def run(
        self,
        count: int,
        seconds: float,
        interval: float = 0.0,
        flush_seconds: float = 15.0,
        stop: threading.Event | None = None,
    ) -> None:
        try:
            runner = {
                "confluent": self._confluent,
                "kafka-python": self._kafka_python,
                "aiokafka": self._aiokafka,
            }[self.kind]
            runner(
                count,
                time.monotonic() + seconds,
                interval,
                flush_seconds,
                stop or threading.Event(),
            )
        except BaseException as e:  # noqa: BLE001 - reported by the workload
            self.error = e

    def _values(self, count: int, deadline: float, interval: float, stop: threading.Event):
        for n in range(count):
            if time.monotonic() >= deadline or stop.is_set():
                return
            yield n, f"{self.name}-{n}", n % self.partitions
            if interval:
                time.sleep(interval)

    def _confluent(self, count, deadline, interval, flush_seconds, stop) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka import Producer as CKProducer

        definite = {getattr(KafkaError, c) for c in _CONFLUENT_DEFINITE if hasattr(KafkaError, c)}
        conf = {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.name,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 20000,
            **self.config,
        }
        p = CKProducer(conf)

        def done(s: Send) -> Callable:
            def cb(err, msg) -> None:
                if err is None:
                    self.history.send_completed(s, OK, msg.offset())
                else:
                    self.history.send_completed(
                        s, FAIL if err.code() in definite else INFO, None, str(err)
                    )

            return cb

        for _n, value, part in self._values(count, deadline, interval, stop):
            s = self.history.send_invoked(self.name, value, part)
            for _ in range(100):
                try:
                    p.produce(self.topic, value.encode(), partition=part, on_delivery=done(s))
                    break
                except BufferError:
                    p.poll(0.05)
                except KafkaException as e:
                    self.history.send_completed(s, FAIL, None, f"produce() raised {e}")
                    break
            else:
                self.history.send_completed(s, FAIL, None, "local queue full")
            p.poll(0)
        p.flush(flush_seconds)

    def _kafka_python(self, count, deadline, interval, flush_seconds, stop) -> None:
        from kafka import KafkaProducer

        conf = {
            "bootstrap_servers": self.bootstrap,
            "client_id": self.name,
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": 2,
            "request_timeout_ms": 10000,
            "delivery_timeout_ms": 20000,
            "max_block_ms": 10000,
            **self.config,
        }
        p = KafkaProducer(**conf)
        try:
            for _n, value, part in self._values(count, deadline, interval, stop):
                s = self.history.send_invoked(self.name, value, part)
                try:
                    fut = p.send(self.topic, value=value.encode(), partition=part)
                except Exception as e:  # noqa: BLE001 - never handed to the client's queue
                    self.history.send_completed(s, FAIL, None, f"send() raised {e!r}")
                    continue
                fut.add_callback(lambda md, s=s: self.history.send_completed(s, OK, md.offset))
                fut.add_errback(
                    lambda e, s=s: self.history.send_completed(
                        s, FAIL if type(e).__name__ in _PY_DEFINITE else INFO, None, repr(e)
                    )
                )
            p.flush(flush_seconds)
        finally:
            p.close(timeout=5)

    def _aiokafka(self, count, deadline, interval, flush_seconds, stop) -> None:
        asyncio.run(self._aiokafka_main(count, deadline, interval, flush_seconds, stop))

    async def _aiokafka_main(self, count, deadline, interval, flush_seconds, stop) -> None:
        from aiokafka import AIOKafkaProducer

        conf = {
            "bootstrap_servers": self.bootstrap,
            "client_id": self.name,
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": 2,
            "request_timeout_ms": 10000,
            **self.config,
        }
        p = AIOKafkaProducer(**conf)
        await asyncio.wait_for(p.start(), 20)
        pending: set[asyncio.Future] = set()
        try:
            for _n, value, part in self._values(count, deadline, 0.0, stop):
                s = self.history.send_invoked(self.name, value, part)
                try:
                    fut = await asyncio.wait_for(
                        p.send(self.topic, value.encode(), partition=part),
                        max(0.1, deadline - time.monotonic()),
                    )
                except Exception as e:  # noqa: BLE001 - never queued
                    self.history.send_completed(s, FAIL, None, f"send() raised {e!r}")
                    continue
                fut.add_done_callback(lambda f, s=s: self._aio_done(s, f))
                pending.add(fut)
                if interval:
                    await asyncio.sleep(interval)
            if pending:
                await asyncio.wait(pending, timeout=flush_seconds)
        finally:
            await asyncio.wait_for(p.stop(), 10)

    def _aio_done(self, s: Send, f: asyncio.Future) -> None:
        if f.cancelled():
            self.history.send_completed(s, INFO, None, "cancelled")
        elif f.exception() is not None:
            e = f.exception()
            self.history.send_completed(
                s, FAIL if type(e).__name__ in _PY_DEFINITE else INFO, None, repr(e)
            )
        else:
            self.history.send_completed(s, OK, f.result().offset)


# ---------------------------------------------------------------- consumers


class _Adapter:
    """One client library's consumer: assign from the beginning, poll, positions, end offsets."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int) -> None:
        self.name, self.bootstrap, self.topic, self.partitions = name, bootstrap, topic, partitions

    def open(self) -> None: ...
    def poll(self, timeout: float) -> Records: ...
    def position(self, p: int) -> int: ...
    def end_offsets(self) -> dict[int, int]: ...
    def close(self) -> None: ...


class _ConfluentConsumer(_Adapter):
    def open(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.name,
                "group.id": f"{self.name}-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.tps = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        self.c.assign(self.tps)

    def poll(self, timeout: float) -> Records:
        out: Records = {}
        for m in self.c.consume(500, timeout):
            if m.error() is None:
                out.setdefault(m.partition(), []).append(
                    (m.offset(), (m.value() or b"").decode("utf-8", "replace"))
                )
        return out

    def position(self, p: int) -> int:
        from confluent_kafka import TopicPartition

        return self.c.position([TopicPartition(self.topic, p)])[0].offset

    def end_offsets(self) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        return {
            p: self.c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=5)[1]
            for p in range(self.partitions)
        }

    def close(self) -> None:
        self.c.close()


class _KafkaPythonConsumer(_Adapter):
    def open(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id=self.name,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=10000,
        )
        self.tps = {p: TopicPartition(self.topic, p) for p in range(self.partitions)}
        self.c.assign(list(self.tps.values()))
        self.c.seek_to_beginning()

    def poll(self, timeout: float) -> Records:
        out: Records = {}
        for tp, msgs in self.c.poll(timeout_ms=int(timeout * 1000), max_records=500).items():
            out.setdefault(tp.partition, []).extend(
                (m.offset, (m.value or b"").decode("utf-8", "replace")) for m in msgs
            )
        return out

    def position(self, p: int) -> int:
        return self.c.position(self.tps[p], timeout_ms=5000)

    def end_offsets(self) -> dict[int, int]:
        return {
            tp.partition: off for tp, off in self.c.end_offsets(list(self.tps.values())).items()
        }

    def close(self) -> None:
        self.c.close(autocommit=False)


class _AioKafkaConsumer(_Adapter):
    """aiokafka on a private event loop, driven synchronously from the worker thread."""

    def open(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = asyncio.new_event_loop()
        self.tps = {p: TopicPartition(self.topic, p) for p in range(self.partitions)}

        async def start() -> AIOKafkaConsumer:
            c = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                client_id=self.name,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                request_timeout_ms=10000,
            )
            await asyncio.wait_for(c.start(), 20)
            c.assign(list(self.tps.values()))
            await c.seek_to_beginning()
            return c

        self.c = self._run(start())

    def _run(self, coro, timeout: float = 30.0):
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def poll(self, timeout: float) -> Records:
        got = self._run(self.c.getmany(timeout_ms=int(timeout * 1000), max_records=500))
        out: Records = {}
        for tp, msgs in got.items():
            out.setdefault(tp.partition, []).extend(
                (m.offset, (m.value or b"").decode("utf-8", "replace")) for m in msgs
            )
        return out

    def position(self, p: int) -> int:
        return self._run(self.c.position(self.tps[p]), 10)

    def end_offsets(self) -> dict[int, int]:
        return {
            tp.partition: off
            for tp, off in self._run(self.c.end_offsets(list(self.tps.values())), 10).items()
        }

    def close(self) -> None:
        try:
            self._run(self.c.stop(), 10)
        finally:
            self.loop.close()


_ADAPTERS = {
    "confluent": _ConfluentConsumer,
    "kafka-python": _KafkaPythonConsumer,
    "aiokafka": _AioKafkaConsumer,
}


class Consumer:
    """Polls while ``producing`` is set (at most ``seconds``), then reads every
    partition to its end offsets (at most ``drain_seconds``). ``complete`` tells
    whether it got there."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, history: History, partitions: int = 1
    ) -> None:
        self.name, self.kind = name, _kind(name)
        self.history = history
        self.adapter = _ADAPTERS[self.kind](name, bootstrap, topic, partitions)
        self.partitions = partitions
        self.complete = False
        self.error: BaseException | None = None

    def run(
        self,
        producing: threading.Event,
        seconds: float,
        drain_seconds: float = 30.0,
        poll_seconds: float = 0.2,
    ) -> None:
        try:
            self._run(producing, seconds, drain_seconds, poll_seconds)
        except BaseException as e:  # noqa: BLE001 - reported by the workload
            self.error = e

    def _run(
        self, producing: threading.Event, seconds: float, drain_seconds: float, poll_seconds: float
    ) -> None:
        a = self.adapter
        a.open()
        try:
            self.history.reset(self.name)
            deadline = time.monotonic() + seconds
            while producing.is_set() and time.monotonic() < deadline:
                self.history.poll(self.name, a.poll(poll_seconds))
            self.complete = self.drain(drain_seconds, poll_seconds)
        finally:
            a.close()

    def drain(self, seconds: float, poll_seconds: float = 0.2) -> bool:
        """Reads until every partition's position reaches the end offsets asked for now."""
        a = self.adapter
        deadline = time.monotonic() + seconds
        ends: dict[int, int] | None = None
        while time.monotonic() < deadline:
            if ends is None:
                try:
                    ends = a.end_offsets()
                except Exception:  # noqa: BLE001 - e.g. no leader yet: ask again
                    time.sleep(poll_seconds)
                    continue
            self.history.poll(self.name, a.poll(poll_seconds))
            try:
                if all(ends[p] == 0 or a.position(p) >= ends[p] for p in range(self.partitions)):
                    return True
            except Exception:  # noqa: BLE001 - position unknown yet
                pass
        return False


@dataclass
class Workload:
    """Producers and consumers (names ``<client>`` or ``<client><i>``) run in threads
    against ``bootstrap``; :meth:`run` returns the history once all are done."""

    bootstrap: str
    topic: str
    partitions: int = 1
    producers: Sequence[str] = CLIENTS
    consumers: Sequence[str] = CLIENTS
    count: int = 200
    seconds: float = 10.0
    interval: float = 0.0
    flush_seconds: float = 15.0
    drain_seconds: float = 30.0
    producer_config: dict[str, dict] = field(default_factory=dict)
    history: History = field(default_factory=History)
    errors: list[str] = field(default_factory=list)

    def run(self, during: Callable[[threading.Event], None] | None = None) -> History:
        """Runs everything; ``during(stop)`` (e.g. a nemesis) runs in this thread while
        producers run and should return once ``stop`` is set or its own time is up."""
        producing = threading.Event()
        producing.set()
        prods = [
            Producer(
                n,
                self.bootstrap,
                self.topic,
                self.history,
                self.partitions,
                self.producer_config.get(n),
            )
            for n in self.producers
        ]
        cons = [
            Consumer(n, self.bootstrap, self.topic, self.history, self.partitions)
            for n in self.consumers
        ]
        stop = threading.Event()
        pt = [
            threading.Thread(
                target=p.run,
                args=(self.count, self.seconds, self.interval, self.flush_seconds, stop),
                name=f"produce-{p.name}",
                daemon=True,
            )
            for p in prods
        ]
        ct = [
            threading.Thread(
                target=c.run,
                args=(producing, self.seconds + self.flush_seconds, self.drain_seconds),
                name=f"consume-{c.name}",
                daemon=True,
            )
            for c in cons
        ]
        for t in pt + ct:
            t.start()
        if during is not None:
            watcher = threading.Thread(
                target=lambda: ([t.join() for t in pt], stop.set()), daemon=True
            )
            watcher.start()
            during(stop)
        bound = time.monotonic() + self.seconds + self.flush_seconds + 30
        for t in pt:
            t.join(max(0.0, bound - time.monotonic()))
        stop.set()
        producing.clear()
        bound = time.monotonic() + self.drain_seconds + 30
        for t in ct:
            t.join(max(0.0, bound - time.monotonic()))
        for worker, thread in [*zip(prods, pt, strict=True), *zip(cons, ct, strict=True)]:
            if thread.is_alive():
                self.errors.append(f"{worker.name}: still running past its time bound")
            if worker.error is not None:
                self.errors.append(f"{worker.name}: {worker.error!r}")
        self.history.frozen = True
        self.history.final_reads_complete = (
            bool(cons) and all(c.complete for c in cons) and not any(t.is_alive() for t in pt)
        )
        return self.history
