"""End to end: confluent-kafka producer and consumer against a broker subprocess.

Throughput, produce and consume measured separately, for 100 B and 1 KB messages,
1 and 6 partitions, acks=1 and acks=all (consume does not depend on acks). The
producer is tuned for throughput (linger.ms 20, batch.size 1 MB, no compression,
deep queues; keyless messages go to the partitions in runs of up to 1 MB, rotating,
as the sticky partitioner does but deterministic) and is driven two ways: one
``produce()`` call per message, and the client's ``produce_batch()`` with lists of
10,000 messages. The consumer fetches 2 MB per fetch, 1 MB per partition (Kafka's
default), with a deep pre-fetch queue, and reads with the batch ``consume()`` API:
500 messages per call (the Java consumer's ``max.poll.records`` default) with this
process's cyclic garbage collector as it comes, and 10,000 per call with the collector
as it comes, with the heap frozen (``gc.freeze()``) before the timed read, and with
the collector paused for it (every message is a GC-tracked object; see
``CONSUME_BATCH``). Each consume case writes its messages, then ``sync``s, so the
read does not share the CPUs with the kernel writing back GBs of earlier cases. One
broker serves the whole module; each case has its own topic.

Ceilings: a raw socket pump moving the same payload bytes over a 127.0.0.1 TCP
connection (1 MB ``sendall`` in this thread, ``recv_into`` in another) as fast as it
can; and, for produce, ``os.write`` of the same bytes in 1 MB chunks to a new file
beside the broker's logs (kept until the case ends). Both run right
before each timed round (outside the timed part), and each ratio is the median
per-round ``baseline time / broker time``, i.e. broker payload MB/s over the
baseline's MB/s.

Latency: 1 KB messages at a fixed 10,000 msg/s, acks=all, linger.ms=0; the time from
``produce()`` to its delivery callback, p50 / p99 / p99.9. These cases run first, on
the fresh broker, and after ``sync``: the throughput cases leave GBs of dirty pages
and a page cache grown into memory the VM has never touched, which a 10 MB/s load
does not build up on its own.

Goals (reported, not asserted): >= 1,000,000 msg/s produced and >= 1,500,000 msg/s
consumed for 100 B messages; p99 <= 2 ms at 10k msg/s of 1 KB.

Sizes: ``LOGSTORE_E2E_MESSAGES`` messages per round for 100 B (default 1,000,000;
1 KB cases use a quarter), ``LOGSTORE_E2E_ROUNDS`` rounds (default 3),
``LOGSTORE_E2E_LATENCY_SECONDS`` (default 5). ``LOGSTORE_E2E_PROFILE=/tmp/broker.prof``
runs the broker under cProfile.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import (
    CONSUME_BATCH,
    MB,
    BrokerProc,
    PageCacheWriter,
    SocketPump,
    ThroughputProducer,
    broker_cpu_seconds,
    consume,
    consume_in_processes,
    create_topic,
    end_offsets,
    guest_halt_poll_ns,
    percentile,
    produce_in_processes,
    produce_latency,
    raw_produce_requests,
)
from logstore_bench import BenchReport, PairedBaseline, median_seconds

MESSAGES_100B = int(os.environ.get("LOGSTORE_E2E_MESSAGES", "1000000"))
ROUNDS = int(os.environ.get("LOGSTORE_E2E_ROUNDS", "3"))
LATENCY_SECONDS = float(os.environ.get("LOGSTORE_E2E_LATENCY_SECONDS", "5"))
LATENCY_RATE = 10_000
CONTEXT_RATE = 2_000  # a second, lighter rate for context
RAW_REQUESTS = int(os.environ.get("LOGSTORE_E2E_RAW_REQUESTS", "20000"))
LATENCY_SIZE = 1024
SIZES = [100, 1024]
PARTITIONS = [1, 6]
ACKS = ["1", "all"]
PRODUCE_APIS = ["produce", "produce_batch"]
# (client garbage collector, messages per consume() call)
CONSUME_VARIANTS = [("on", CONSUME_BATCH), ("on", 10_000), ("frozen", 10_000), ("paused", 10_000)]
PROCESSES = 2  # client processes in the scaled-out cases: one per core
GOAL_PRODUCE = 1_000_000
GOAL_CONSUME = 1_500_000
GOAL_P99_MS = 2.0


def messages_for(size: int) -> int:
    return MESSAGES_100B if size == 100 else max(1, MESSAGES_100B // 4)


def _label(size: int) -> str:
    return "100 B" if size == 100 else "1 KB"


@pytest.fixture(scope="module")
def e2e_broker(bench_dir: Path) -> Iterator[BrokerProc]:
    b = BrokerProc(bench_dir / "e2e-broker", profile=os.environ.get("LOGSTORE_E2E_PROFILE") or None)
    b.start()
    try:
        yield b
    finally:
        b.stop()
        if b.profile:
            print(f"\nbroker profile written to {b.profile}")


@pytest.fixture
def page_cache(bench_dir: Path) -> Iterator[PageCacheWriter]:
    """One case's ``os.write`` baseline; its files go when the case ends, so the page
    cache does not hold every case's baseline as well as the broker's logs."""
    w = PageCacheWriter(bench_dir / "e2e-os-write")
    try:
        yield w
    finally:
        w.close()


@pytest.fixture(scope="module")
def pump() -> Iterator[SocketPump]:
    p = SocketPump()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module", autouse=True)
def _sections(report: BenchReport) -> None:
    report.section(
        "e2e",
        "end to end (confluent-kafka <-> broker on 127.0.0.1), payload bytes; ratio = broker "
        "MB/s / raw socket pump MB/s, per round, paired; goal: 100 B produce >= 1,000,000 msg/s, "
        "consume >= 1,500,000 msg/s",
        [
            ("msgs", "msg/s"),
            ("mbps", "MB/s"),
            ("pump", "pump MB/s"),
            ("ratio", "ratio"),
            ("write", "os.write MB/s"),
            ("write_ratio", "vs os.write"),
            ("goal", "of goal"),
        ],
    )
    report.section(
        "e2e_latency",
        f"produce latency, produce() -> delivery callback, {LATENCY_SIZE} B at {LATENCY_RATE:,} "
        f"msg/s, acks=all, linger.ms=0 (goal p99 <= {GOAL_P99_MS} ms)",
        [
            ("rate", "msg/s sent"),
            ("p50", "p50 ms"),
            ("p99", "p99 ms"),
            ("p999", "p99.9 ms"),
            ("max", "max ms"),
            ("goal", "p99 of goal"),
            ("broker_cpu", "broker CPU ms"),
            ("broker_wait", "broker CPU wait ms"),
            ("client_wait", "client CPU wait ms"),
            ("steal", "VM steal ms"),
            ("halt_poll_us", "guest halt poll µs"),
        ],
    )
    report.section(
        "e2e_requests",
        "broker capacity for one-record Produce requests "
        "(raw pipelined client, v9, acks=-1, 1 KB): what linger.ms=0 asks of it at 10k msg/s",
        [
            ("window", "in flight"),
            ("rps", "requests/s"),
            ("user", "broker user us/req"),
            ("sys", "broker sys us/req"),
        ],
    )


def _record(
    benchmark,
    report: BenchReport,
    case: str,
    impl: str,
    count: int,
    size: int,
    baseline: PairedBaseline,
    goal: int | None,
    measured: list[float] | None = None,
    written: PairedBaseline | None = None,
):
    """One row: ``measured`` seconds per round (default: pytest-benchmark's own rounds);
    ``written`` is the paired ``os.write`` of the same bytes, for produce rows."""
    if measured is None:
        if median_seconds(benchmark) is None:
            return
        measured = list(benchmark.stats.stats.data)
    seconds = statistics.median(measured)
    msgs = count / seconds
    mbps = count * size / seconds / MB
    pump_mbps = count * size / baseline.median() / MB
    ratio = statistics.median(b / m for b, m in zip(baseline.seconds, measured, strict=True))
    values = {"msgs": msgs, "mbps": mbps, "pump": pump_mbps, "ratio": ratio}
    if written is not None:
        values["write"] = count * size / written.median() / MB
        values["write_ratio"] = statistics.median(
            b / m for b, m in zip(written.seconds, measured, strict=True)
        )
    if goal:
        values["goal"] = msgs / goal
    benchmark.extra_info.update({k: v for k, v in values.items()})
    report.add("e2e", case, impl, **values)


@pytest.mark.parametrize("rate", [LATENCY_RATE, CONTEXT_RATE])
def test_produce_latency(benchmark, e2e_broker: BrokerProc, report: BenchReport, rate: int):
    topic = f"e2e-latency-{rate}"
    create_topic(e2e_broker.bootstrap, topic, 1)
    # Whatever an earlier run left dirty is written back first: at 10 MB/s this case
    # builds no such backlog of its own.
    os.sync()
    assert e2e_broker.proc is not None
    broker_pid = e2e_broker.proc.pid
    result: dict[str, object] = {}

    def run():
        before = broker_cpu_seconds(broker_pid)
        result["lat"], result["rate"], result["waited"] = produce_latency(
            e2e_broker.bootstrap, topic, rate, LATENCY_SECONDS, LATENCY_SIZE, broker_pid=broker_pid
        )
        after = broker_cpu_seconds(broker_pid)
        result["cpu"] = sum(after) - sum(before)

    benchmark.pedantic(run, rounds=1, iterations=1)
    lat = [x * 1000 for x in result["lat"]]  # type: ignore[union-attr]
    values = {
        "rate": float(result["rate"]),  # type: ignore[arg-type]
        "p50": percentile(lat, 50),
        "p99": percentile(lat, 99),
        "p999": percentile(lat, 99.9),
        "max": max(lat),
    }
    values["goal"] = values["p99"] / GOAL_P99_MS
    # The broker's user + system CPU over the run, warm-up and flush included.
    values["broker_cpu"] = float(result["cpu"]) * 1000  # type: ignore[arg-type]
    # Time runnable but waiting for a CPU while producing: the tail follows the broker's.
    values["broker_wait"] = result["waited"]["broker"] * 1000  # type: ignore[index]
    values["client_wait"] = result["waited"]["client"] * 1000  # type: ignore[index]
    # The hypervisor's share: the tail follows steal time, whatever the broker does.
    values["steal"] = result["waited"]["steal"] * 1000  # type: ignore[index]
    halt_poll = guest_halt_poll_ns()
    values["halt_poll_us"] = -1.0 if halt_poll is None else halt_poll / 1000
    benchmark.extra_info.update(values)
    benchmark.extra_info["mean_ms"] = statistics.fmean(lat)
    impl = "produce acks=all" if rate == LATENCY_RATE else "(context, lighter load)"
    report.add("e2e_latency", f"{LATENCY_SIZE} B @ {rate:,}/s", impl, **values)


@pytest.mark.parametrize("window", [1, 64])
def test_produce_request_rate(benchmark, e2e_broker: BrokerProc, report: BenchReport, window: int):
    """Why latency climbs at 10k msg/s with linger.ms=0: each message is its own request."""
    topic = f"e2e-raw-{window}"
    create_topic(e2e_broker.bootstrap, topic, 1)
    assert e2e_broker.proc is not None
    pid = e2e_broker.proc.pid
    cpu: list[tuple[float, float]] = []
    seconds: list[float] = []

    def run():
        before = broker_cpu_seconds(pid)
        seconds.append(
            raw_produce_requests(e2e_broker.port, topic, RAW_REQUESTS, LATENCY_SIZE, window)
        )
        after = broker_cpu_seconds(pid)
        cpu.append((after[0] - before[0], after[1] - before[1]))

    benchmark.pedantic(run, rounds=1, iterations=1)
    assert end_offsets(e2e_broker.bootstrap, topic, 1) == [RAW_REQUESTS], (
        "not every request was appended"
    )
    values = {
        "window": float(window),
        "rps": RAW_REQUESTS / seconds[0],
        "user": cpu[0][0] / RAW_REQUESTS * 1e6,
        "sys": cpu[0][1] / RAW_REQUESTS * 1e6,
    }
    benchmark.extra_info.update(values)
    report.add("e2e_requests", f"{LATENCY_SIZE} B, 1 record/request", "raw produce", **values)


@pytest.mark.parametrize("api", PRODUCE_APIS)
@pytest.mark.parametrize("acks", ACKS)
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("size", SIZES)
def test_produce(
    benchmark,
    e2e_broker: BrokerProc,
    pump: SocketPump,
    page_cache: PageCacheWriter,
    report: BenchReport,
    size: int,
    partitions: int,
    acks: str,
    api: str,
):
    topic = f"e2e-produce-{size}-{partitions}-acks{acks}-{api}"
    create_topic(e2e_broker.bootstrap, topic, partitions)
    count = messages_for(size)
    payload = os.urandom(size)
    producer = ThroughputProducer(e2e_broker.bootstrap, acks)
    producer.warm_up(topic)
    before = sum(end_offsets(e2e_broker.bootstrap, topic, partitions))
    baseline = PairedBaseline(warmup_rounds=0)
    written = PairedBaseline(warmup_rounds=0)

    def setup() -> None:
        baseline.run(pump.pump, count * size)
        written.add(page_cache.write(count * size))

    benchmark.pedantic(
        producer.run,
        args=(topic, payload, count, partitions, api),
        setup=setup,
        rounds=ROUNDS,
        iterations=1,
    )
    after = end_offsets(e2e_broker.bootstrap, topic, partitions)
    assert sum(after) - before == count * ROUNDS, "the log does not hold every produced message"
    assert all(n > 0 for n in after), f"a partition got nothing: {after}"
    _record(
        benchmark,
        report,
        f"{_label(size)}, {partitions} part, acks={acks}",
        api,
        count,
        size,
        baseline,
        GOAL_PRODUCE if size == 100 else None,
        written=written,
    )


@pytest.mark.parametrize(("client_gc", "batch"), CONSUME_VARIANTS)
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("size", SIZES)
def test_consume(
    benchmark,
    e2e_broker: BrokerProc,
    pump: SocketPump,
    report: BenchReport,
    size: int,
    partitions: int,
    client_gc: str,
    batch: int,
):
    topic = f"e2e-consume-{size}-{partitions}-gc-{client_gc}-{batch}"
    create_topic(e2e_broker.bootstrap, topic, partitions)
    count = messages_for(size)
    producer = ThroughputProducer(e2e_broker.bootstrap, "1")
    producer.run(topic, os.urandom(size), count, partitions)
    assert sum(end_offsets(e2e_broker.bootstrap, topic, partitions)) == count
    os.sync()  # the write-back of this and earlier cases' GBs must not share the CPUs with the read
    baseline = PairedBaseline(warmup_rounds=0)
    measured: list[float] = []

    def run() -> None:
        measured.append(
            consume(
                e2e_broker.bootstrap, topic, partitions, count, client_gc=client_gc, batch=batch
            )
        )

    benchmark.pedantic(
        run, setup=baseline.setup(pump.pump, count * size), rounds=ROUNDS, iterations=1
    )
    # ``consume`` measures from assign to the last message (client set-up and metadata
    # excluded); pytest-benchmark's own time includes them, so the row uses consume's.
    _record(
        benchmark,
        report,
        f"{_label(size)}, {partitions} part",
        f"consume {batch}/call, client gc {client_gc}",
        count,
        size,
        baseline,
        GOAL_CONSUME if size == 100 else None,
        measured,
    )


@pytest.mark.parametrize("api", PRODUCE_APIS)
def test_produce_from_processes(
    benchmark, e2e_broker: BrokerProc, pump: SocketPump, report: BenchReport, api: str
):
    """100 B messages to 6 partitions from PROCESSES producer processes at once (acks=1),
    each producing half the messages to its half of the partitions: what a client
    bound by one Python thread's calls gets by running one process per core."""
    partitions, size = 6, 100
    topic = f"e2e-produce-processes-{api}"
    create_topic(e2e_broker.bootstrap, topic, partitions)
    count = MESSAGES_100B // PROCESSES * PROCESSES
    before = sum(end_offsets(e2e_broker.bootstrap, topic, partitions))
    baseline = PairedBaseline(warmup_rounds=0)
    measured: list[float] = []

    def run() -> None:
        measured.append(
            produce_in_processes(e2e_broker.bootstrap, topic, count, partitions, PROCESSES, api)
        )

    benchmark.pedantic(
        run, setup=baseline.setup(pump.pump, count * size), rounds=ROUNDS, iterations=1
    )
    after = end_offsets(e2e_broker.bootstrap, topic, partitions)
    # Each process also sends one warm-up message per round, before the timed part.
    assert sum(after) - before == (count + PROCESSES) * ROUNDS, (
        "the log does not hold every produced message"
    )
    assert all(n > 0 for n in after), f"a partition got nothing: {after}"
    _record(
        benchmark,
        report,
        "100 B, 6 part, acks=1",
        f"{api}, {PROCESSES} processes",
        count,
        size,
        baseline,
        GOAL_PRODUCE,
        measured,
    )


def test_consume_from_processes(
    benchmark, e2e_broker: BrokerProc, pump: SocketPump, report: BenchReport
):
    """100 B messages from 6 partitions read by PROCESSES consumer processes at once, each
    assigned half the partitions (a consumer group's range assignment), garbage
    collector as it comes."""
    partitions, size = 6, 100
    topic = "e2e-consume-processes"
    create_topic(e2e_broker.bootstrap, topic, partitions)
    ThroughputProducer(e2e_broker.bootstrap, "1").run(
        topic, os.urandom(size), MESSAGES_100B, partitions
    )
    counts = end_offsets(e2e_broker.bootstrap, topic, partitions)
    assert sum(counts) == MESSAGES_100B
    os.sync()
    baseline = PairedBaseline(warmup_rounds=0)
    measured: list[float] = []

    def run() -> None:
        measured.append(consume_in_processes(e2e_broker.bootstrap, topic, counts, PROCESSES))

    benchmark.pedantic(
        run, setup=baseline.setup(pump.pump, MESSAGES_100B * size), rounds=ROUNDS, iterations=1
    )
    _record(
        benchmark,
        report,
        "100 B, 6 part",
        f"consume {CONSUME_BATCH}/call, {PROCESSES} processes, client gc on",
        MESSAGES_100B,
        size,
        baseline,
        GOAL_CONSUME,
        measured,
    )
