"""Pieces of the end-to-end bench: a broker subprocess, client loops, a raw socket pump.

Everything talks to 127.0.0.1 only. Set ``LOGSTORE_E2E_PROFILE=/path/prefix`` to run the
broker under cProfile (``python -m cProfile -o <prefix>.prof -m broker_py``); the profile
is written when the broker stops cleanly at the end of the module.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
PRODUCE_BATCH = 10_000
# Messages per consume() call: the Java consumer's max.poll.records default. CPython's
# youngest generation is collected after 700 more GC-tracked allocations than
# deallocations; a batch this size is freed before the next one reaches that, so
# reading it costs no collections, where 10,000-message batches cost one collection
# every 700 messages and a full one every few hundred thousand.
CONSUME_BATCH = 500


def read_frame(s: socket.socket) -> bytes:
    """The next size-prefixed frame on ``s``, without its size."""

    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProc:
    """``python -m broker_py`` on a free loopback port with its data under ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        overrides: dict[str, str] | None = None,
        profile: str | None = None,
        tree: Path | None = None,
    ) -> None:
        """``tree``: run the broker (``broker_py`` and ``logstore``) from that checkout,
        ``tree/python`` and ``tree`` first on ``PYTHONPATH``; by default this one's."""
        self.workdir = workdir
        self.tree = tree
        self.data_dir = workdir / "data"
        self.log_path = workdir / "broker.log"
        self.port = free_port()
        self.profile = profile
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            # the bench sends 1 MB batches
            "message.max.bytes": str(8 * MB),
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        args = [sys.executable]
        if self.profile:
            args += ["-m", "cProfile", "-o", self.profile]
        args += ["-m", "broker_py"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(
                    None,
                    [
                        *([str(self.tree / "python"), str(self.tree)] if self.tree else []),
                        str(REPO_ROOT),
                        os.environ.get("PYTHONPATH"),
                    ],
                )
            ),
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=log, cwd=self.workdir, env=env
            )
        deadline = time.monotonic() + timeout
        out = b""
        assert self.proc.stdout is not None
        while b"listening on" not in out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                raise RuntimeError(f"broker did not start: {out!r}\n{self.log_text()[-4000:]}")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if chunk:
                    out += chunk

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def rss_mb(self) -> float:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-watermarks"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        c.close()


# ---------------------------------------------------------------------------
# producer / consumer loops
# ---------------------------------------------------------------------------


class ThroughputProducer:
    """A confluent-kafka producer tuned for throughput; ``run`` produces and flushes."""

    def __init__(self, bootstrap: str, acks: str, linger_ms: int = 20) -> None:
        from confluent_kafka import Producer

        self.errors: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "linger.ms": linger_ms,
                "batch.size": MB,
                "batch.num.messages": 1_000_000,
                "message.max.bytes": 8 * MB,
                "compression.type": "none",
                "queue.buffering.max.messages": 2_000_000,
                "queue.buffering.max.kbytes": 2_097_151,
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
                "error_cb": lambda err: self.errors.append(f"client: {err}"),
            }
        )

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def warm_up(self, topic: str) -> None:
        self.producer.produce(topic, b"warm-up")
        assert self.producer.flush(30) == 0

    def run(
        self,
        topic: str,
        payload: bytes,
        count: int,
        partitions: int = 1,
        api: str = "produce",
        first: int = 0,
    ) -> None:
        """Produces ``count`` messages, in runs of up to 1 MB per partition, rotating over
        partitions ``first`` .. ``first + partitions - 1`` (what the sticky partitioner
        does, made deterministic so every partition gets data even in short runs).

        ``api`` is ``produce`` (one call per message) or ``produce_batch`` (one call per
        run, up to PRODUCE_BATCH messages: the client's own batch API, which hands a list
        to librdkafka's ``rd_kafka_produce_batch``)."""
        produce = self.producer.produce
        poll = self.producer.poll
        run = max(1, min(MB // len(payload), -(-count // (2 * partitions))))
        left = count
        part = first
        if api == "produce_batch":
            # Every message is the same dict; the client copies the payload per message.
            messages = [{"value": payload}] * min(run, PRODUCE_BATCH)
            produce_batch = self.producer.produce_batch
        while left > 0:
            n = min(run, left)
            if api == "produce_batch":
                sent = 0
                while sent < n:
                    chunk = messages[: min(PRODUCE_BATCH, n - sent)]
                    try:
                        queued = produce_batch(topic, chunk, partition=part)
                    except BufferError:
                        poll(0.001)
                        continue
                    if queued < len(chunk):
                        raise AssertionError(
                            f"produce_batch queued {queued} of {len(chunk)}: "
                            f"{chunk[queued].get('_error')}"
                        )
                    sent += queued
            else:
                for _ in range(n):
                    try:
                        produce(topic, payload, partition=part)
                    except BufferError:
                        poll(0.001)
                        produce(topic, payload, partition=part)
            left -= n
            part = first + (part - first + 1) % partitions
        left = self.producer.flush(120)
        assert left == 0, f"{left} messages not delivered"
        assert not self.errors, self.errors[:5]


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    timeout: float = 120.0,
    client_gc: str = "on",
    first: int = 0,
    go: Any = None,
    batch: int = CONSUME_BATCH,
) -> float:
    """Reads ``count`` messages from offset 0 with the batch API, ``batch`` messages per
    call; returns the seconds taken from assign to the last message (client set-up and
    metadata are outside).

    Every consumed message is a garbage-collected Python object, so this process's cyclic
    collector runs every few hundred messages, and its older generations walk every
    object the process holds (pytest and its plugins included). ``client_gc`` is ``on``
    (as it comes), ``frozen`` (``gc.freeze()`` before the timed read: what exists by
    then leaves the collector's generations, as the broker does with its startup heap)
    or ``paused`` (``gc.disable()`` for the timed read). The broker does the same work
    in all three.

    Reads partitions ``first`` .. ``first + partitions - 1``. With ``go`` (an event), the
    timed read starts when it is set, and the result is the ``time.monotonic()`` of the
    last message instead of a duration (see ``run_in_processes``)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "check.crcs": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            # Kafka's default of 1 MB per partition, at most two partitions' worth per
            # response. Responses of 8 MB or more are fresh mmaps in librdkafka's thread,
            # each page faulted in and zeroed by the kernel: 2-3 times the page faults and
            # 20-30% more system time in this process.
            "fetch.max.bytes": 2 * MB,
            "max.partition.fetch.bytes": MB,
            # Past queued.min.messages prefetched, librdkafka stops fetching a partition for
            # fetch.queue.backoff.ms (1 s); at the default 100,000 a reader this fast waits
            # out that second several times per million messages.
            "queued.min.messages": 1_000_000,
            "queued.max.messages.kbytes": 2_097_151,
        }
    )
    if client_gc not in ("on", "frozen", "paused"):
        raise ValueError(f"client_gc={client_gc!r}")
    gc_was_enabled = gc.isenabled()
    try:
        for p in range(
            first, first + partitions
        ):  # connect and learn metadata outside the timed part
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if go is not None:
            go.wait()
        if client_gc == "paused":
            gc.disable()
        elif client_gc == "frozen":
            gc.freeze()
        start = time.perf_counter()
        c.assign([TopicPartition(topic, p, 0) for p in range(first, first + partitions)])
        got = 0
        deadline = time.monotonic() + timeout
        poll = c.consume
        while got < count:
            # consume() waits for num_messages or the timeout: never ask for more than is left
            msgs = poll(num_messages=min(batch, count - got), timeout=1.0)
            if msgs:
                last = msgs[-1]
                assert last.error() is None, last.error()
                got += len(msgs)
            elif time.monotonic() > deadline:
                raise AssertionError(f"consumed {got} of {count} messages in {timeout}s")
        elapsed = time.perf_counter() - start
        assert got == count, (got, count)
        return time.monotonic() if go is not None else elapsed
    finally:
        if gc_was_enabled:
            gc.enable()
        if client_gc == "frozen":
            gc.unfreeze()
        c.close()


def _produce_share(
    bootstrap: str, topic: str, count: int, partitions: int, first: int, api: str, go: Any
) -> float:
    producer = ThroughputProducer(bootstrap, "1")
    producer.warm_up(topic)
    payload = os.urandom(100)
    go.wait()
    producer.run(topic, payload, count, partitions, api, first)
    return time.monotonic()


def _run_share(ready: Any, results: Any, fn: Any, args: tuple) -> None:
    try:
        ready.put(None)
        results.put(("ok", fn(*args)))
    except BaseException as e:  # reported to the parent, which fails the case
        results.put(("error", repr(e)))


def run_in_processes(shares: list[tuple[Any, tuple]], timeout: float = 180.0) -> float:
    """Runs each ``(fn, args)`` share in its own spawned process: each is handed a shared
    ``go`` event as its last argument, sets itself up (connects, learns metadata), then
    waits for ``go``, works and returns the ``time.monotonic()`` at which it finished
    (system-wide on Linux, so comparable across processes). Returns the seconds from
    ``go`` to the last share's end: the throughput of the processes together, as a
    consumer group or a fleet of producers would have it."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # never fork a process running librdkafka threads
    go, ready, results = ctx.Event(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_run_share, args=(ready, results, fn, (*args, go)), daemon=True)
        for fn, args in shares
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=60)
        time.sleep(1.0)  # every share past its set-up and waiting on go
        start = time.monotonic()
        go.set()
        ends = []
        for _ in procs:
            status, value = results.get(timeout=timeout)
            assert status == "ok", value
            ends.append(value)
        return max(ends) - start
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()


def produce_in_processes(
    bootstrap: str, topic: str, count: int, partitions: int, processes: int, api: str
) -> float:
    """``count`` 100 B messages from ``processes`` producer processes, each producing its
    share to its own contiguous share of the partitions; seconds from start to the last
    delivery."""
    per, extra = divmod(partitions, processes)
    shares, first = [], 0
    for i in range(processes):
        n = per + (i < extra)
        shares.append((_produce_share, (bootstrap, topic, count // processes, n, first, api)))
        first += n
    return run_in_processes(shares)


def consume_in_processes(
    bootstrap: str, topic: str, counts: list[int], processes: int, client_gc: str = "on"
) -> float:
    """Reads every message of the partitions (``counts[p]`` each) with ``processes`` consumer
    processes, each assigned a contiguous share of the partitions (as the range assignor
    shares them in a group); seconds from start to the last message."""
    per, extra = divmod(len(counts), processes)
    shares, first = [], 0
    for i in range(processes):
        n = per + (i < extra)
        shares.append(
            (
                consume,
                (bootstrap, topic, n, sum(counts[first : first + n]), 120.0, client_gc, first),
            )
        )
        first += n
    return run_in_processes(shares)


def produce_latency(
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    size: int,
    warmup: float = 0.5,
    broker_pid: int | None = None,
) -> tuple[list[float], float, dict[str, float]]:
    """Produces ``size``-byte messages at a fixed ``rate`` (acks=all, linger.ms=0); returns
    the produce()->delivery-callback latencies in seconds (warm-up dropped), the rate
    actually achieved, and the seconds that the client's threads (librdkafka's included)
    and, given its pid, the broker's threads waited for a CPU while producing, with the
    VM's steal time over the same span (``"steal"``)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(size)
    p.produce(topic, payload)
    assert p.flush(30) == 0
    total = int(rate * (seconds + warmup))
    skip = int(rate * warmup)
    pids = {"client": os.getpid(), **({"broker": broker_pid} if broker_pid is not None else {})}
    waited = {k: run_queue_wait_seconds(pid) for k, pid in pids.items()}
    steal_before = steal_seconds()
    lat, sending = paced_produce(p, topic, payload, rate, total)
    waited = {k: run_queue_wait_seconds(pid) - waited[k] for k, pid in pids.items()}
    waited["steal"] = steal_seconds() - steal_before
    return lat[skip:], total / sending, waited


def paced_produce(
    p: Any, topic: str, payload: bytes, rate: int, total: int, partition: int | None = None
) -> tuple[list[float], float]:
    """Produces ``total`` messages with producer ``p``, one every 1/``rate`` s, polling it
    meanwhile, then flushes: (each message's produce()->delivery-callback latency in
    seconds, the seconds the sending took). Every delivery must succeed."""
    sent_at = [0.0] * total
    lat = [0.0] * total
    done = [0]
    errors: list[str] = []
    now = time.perf_counter
    where = {} if partition is None else {"partition": partition}

    def cb(i):
        def on_delivery(err, msg):
            lat[i] = now() - sent_at[i]
            done[0] += 1
            if err is not None:
                errors.append(str(err))

        return on_delivery

    callbacks = [cb(i) for i in range(total)]
    gc.collect()
    start = now()
    interval = 1.0 / rate
    for i in range(total):
        due = start + i * interval
        while True:
            left = due - now()
            if left <= 0:
                break
            # poll() takes whole milliseconds (a shorter timeout spins): sleep the rest
            if left >= 0.0011:
                p.poll(0.001)
            else:
                time.sleep(left)
                p.poll(0)
        sent_at[i] = now()
        p.produce(topic, payload, on_delivery=callbacks[i], **where)
        p.poll(0)
    sending = now() - start
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    assert done[0] == total
    return lat, sending


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


# ---------------------------------------------------------------------------
# the ceiling: a raw loopback socket pump
# ---------------------------------------------------------------------------


class PageCacheWriter:
    """``write(n)`` appends n bytes with ``os.write`` in 1 MB chunks to a new file in
    ``directory`` (no fsync), as the broker's appends put produced bytes in the page cache.
    The files are kept until ``close``. On this VM, page-cache pages the guest has never
    touched cost a hypervisor fault each, and writing into them runs far below writing
    into pages a deleted file has just released, so this baseline's speed depends on
    what earlier cases left behind."""

    CHUNK = MB

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.buf = os.urandom(self.CHUNK)
        self.paths: list[Path] = []

    def write(self, nbytes: int) -> float:
        path = self.directory / f"write-{len(self.paths):04d}.bin"
        self.paths.append(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            start = time.perf_counter()
            left = nbytes
            view = memoryview(self.buf)
            while left > 0:
                left -= os.write(fd, view[: min(left, self.CHUNK)])
            return time.perf_counter() - start
        finally:
            os.close(fd)

    def close(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


class SocketPump:
    """A connected 127.0.0.1 TCP pair; ``pump(n)`` moves n bytes through it as fast as
    possible (sender: this thread, 1 MB sendall; receiver: a thread, recv_into)."""

    CHUNK = MB

    def __init__(self) -> None:
        server = socket.create_server(("127.0.0.1", 0))
        self.tx = socket.create_connection(server.getsockname())
        self.rx, _ = server.accept()
        server.close()
        self.buf = os.urandom(self.CHUNK)
        self._want = threading.Semaphore(0)
        self._done = threading.Semaphore(0)
        self._target = 0
        self._got = 0
        self._thread = threading.Thread(target=self._recv, name="pump-rx", daemon=True)
        self._thread.start()

    def _recv(self) -> None:
        view = memoryview(bytearray(4 * MB))
        while True:
            self._want.acquire()
            target = self._target
            if target < 0:
                return
            got = 0
            while got < target:
                n = self.rx.recv_into(view, min(len(view), target - got))
                if n == 0:
                    break
                got += n
            self._got = got
            self._done.release()

    def pump(self, nbytes: int) -> float:
        self._target = nbytes
        self._want.release()
        start = time.perf_counter()
        left = nbytes
        view = memoryview(self.buf)
        while left > 0:
            n = min(left, self.CHUNK)
            self.tx.sendall(view[:n])
            left -= n
        self._done.acquire()
        elapsed = time.perf_counter() - start
        assert self._got == nbytes
        return elapsed

    def close(self) -> None:
        self._target = -1
        self._want.release()
        self._thread.join(5)
        self.tx.close()
        self.rx.close()


def summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def broker_cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def steal_seconds() -> float:
    """Seconds of steal time summed over the VM's CPUs (``steal`` in ``/proc/stat``,
    in USER_HZ ticks): time the hypervisor ran something else while a vCPU had work."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def guest_halt_poll_ns() -> int | None:
    """How long an idle vCPU polls before it halts (cpuidle-haltpoll guests), or None."""
    try:
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def run_queue_wait_seconds(pid: int) -> float:
    """Seconds the threads of a process have spent runnable but waiting for a CPU, summed
    over the threads alive now (the second field of ``/proc/<pid>/task/<tid>/schedstat``)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # the thread ended, or no schedstats
            continue
    return total / 1e9


def raw_produce_requests(port: int, topic: str, count: int, size: int, window: int) -> float:
    """Sends ``count`` Produce requests (v9, acks=-1, one ``size``-byte record each) over one
    raw connection, keeping ``window`` in flight; returns the seconds until every answer
    is back. Measures the broker's per-request cost without a client library."""
    import logstore

    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from logstore.protocol.frame import encode_request
    from logstore.protocol.headers import RequestHeader
    from logstore.protocol.messages.produce import ProduceRequest

    records = logstore.encode_batch([(None, os.urandom(size))])
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    frame = encode_request(
        RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="e2e-raw"), body
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        buf = bytearray()
        start = time.perf_counter()
        while answered < count:
            if sent < count and sent - answered < window:
                n = min(window - (sent - answered), count - sent)
                s.sendall(frame * n)
                sent += n
            data = s.recv(1 << 16)
            if not data:
                raise AssertionError(f"broker closed the connection after {answered} answers")
            buf += data
            while len(buf) >= 4:
                (size_,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size_:
                    break
                del buf[: 4 + size_]
                answered += 1
        return time.perf_counter() - start
