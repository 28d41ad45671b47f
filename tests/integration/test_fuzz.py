"""Fuzz the broker's port while well-behaved clients use it.

For FUZZ_SECONDS (default 20) several threads hammer the listener with raw sockets:
random bytes, frames of random size, valid request headers with random bodies,
mutations (bit flips, truncations, size changes, splices) of valid requests built with
the broker's own codec, disconnects mid-frame (some with RST), frames declaring huge
sizes (over and under ``socket.request.max.bytes``) and slow partial frames held open.
Meanwhile a confluent-kafka producer + consumer pair does round trips on its own
topic and must see no error and every one of its messages.

Afterwards the broker must be alive and serving, its RSS bounded (and not growing
from the first half of the run to the second), its open descriptors back near where
they started, and its log free of Python tracebacks. On failure the last inputs of
every fuzz thread are written next to the broker log and named in the message.
"""

from __future__ import annotations

import collections
import os
import random
import socket
import struct
import threading
import time
import uuid

import logstore
from broker_py.server.handlers import served_api_keys
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import encode_request
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages import request_class
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.messages.list_offsets import ListOffsetsRequest
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.offset_commit import OffsetCommitRequest
from logstore.protocol.messages.produce import ProduceRequest

FUZZ_SECONDS = float(os.environ.get("LOGSTORE_FUZZ_SECONDS", "20"))
FUZZ_THREADS = int(os.environ.get("LOGSTORE_FUZZ_THREADS", "6"))
MAX_RSS_MB = 300
GOOD_TOPIC = "fuzz-good-roundtrip"
# Requests whose valid (or mutated) forms could create unbounded numbers of
# partitions or touch the good client's data are not in the mutation corpus.
_NOT_MUTATED = {ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS}


# ---------------------------------------------------------------------------
# valid requests, built with the broker's codec
# ---------------------------------------------------------------------------


def _frame(
    key: ApiKey, version: int, body, corr: int = 1, client_id: str | None = "fuzzer"
) -> bytes:
    return encode_request(
        RequestHeader(
            api_key=int(key), api_version=version, correlation_id=corr, client_id=client_id
        ),
        body,
    )


def valid_requests() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    served = set(served_api_keys())
    for key in served:
        if key in _NOT_MUTATED:
            continue
        cls = request_class(key)
        for v in range(key.min_version, key.max_version + 1):
            out.append((f"{key.api_name}v{v}-default", _frame(key, v, cls())))
    records = logstore.encode_batch([(b"k%d" % i, b"fuzz-value-%d" % i) for i in range(3)])
    for v in range(ApiKey.PRODUCE.min_version, ApiKey.PRODUCE.max_version + 1):
        for acks in (0, 1, -1):
            body = ProduceRequest(
                acks=acks,
                timeout_ms=1000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="fuzz-prod",
                        partition_data=[
                            ProduceRequest.PartitionProduceData(index=0, records=records)
                        ],
                    )
                ],
            )
            out.append((f"Producev{v}-acks{acks}", _frame(ApiKey.PRODUCE, v, body)))
    for v in range(ApiKey.METADATA.min_version, ApiKey.METADATA.max_version + 1):
        body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="fuzz-prod")])
        out.append((f"Metadatav{v}-topic", _frame(ApiKey.METADATA, v, body)))
    for v in range(ApiKey.FETCH.min_version, 13):
        body = FetchRequest(
            max_wait_ms=20,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                FetchRequest.FetchTopic(
                    topic="fuzz-prod",
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        out.append((f"Fetchv{v}", _frame(ApiKey.FETCH, v, body)))
    for v in range(ApiKey.LIST_OFFSETS.min_version, ApiKey.LIST_OFFSETS.max_version + 1):
        body = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name="fuzz-prod",
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)
                    ],
                )
            ],
        )
        out.append((f"ListOffsetsv{v}", _frame(ApiKey.LIST_OFFSETS, v, body)))
    for v in range(ApiKey.OFFSET_COMMIT.min_version, 8):
        body = OffsetCommitRequest(
            group_id="fuzz-group",
            member_id="",
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="fuzz-prod",
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1, committed_metadata="m"
                        )
                    ],
                )
            ],
        )
        out.append((f"OffsetCommitv{v}", _frame(ApiKey.OFFSET_COMMIT, v, body)))
    return out


# ---------------------------------------------------------------------------
# fuzz inputs
# ---------------------------------------------------------------------------


def _mutate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    buf = bytearray(data)
    kind = rng.choice(
        ["bitflip", "bytes", "truncate", "size", "insert", "delete", "splice", "int-edge"]
    )
    if kind == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(4, len(buf)) if len(buf) > 4 else 0
            buf[i] ^= 1 << rng.randrange(8)
    elif kind == "bytes":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(buf))
            buf[i] = rng.randrange(256)
    elif kind == "truncate":
        cut = rng.randrange(4, len(buf)) if len(buf) > 4 else 0
        buf = buf[:cut]
        if rng.random() < 0.7 and len(buf) >= 4:
            struct.pack_into(">i", buf, 0, len(buf) - 4)  # consistent size: a cut-off body
    elif kind == "size" and len(buf) >= 4:
        size = rng.choice(
            [
                -1,
                0,
                1,
                7,
                9,
                len(buf) - 5,
                len(buf) - 3,
                len(buf) + 100,
                0x7FFFFFFF,
                -0x80000000,
                rng.randrange(1 << 31),
            ]
        )
        struct.pack_into(">i", buf, 0, size)
    elif kind == "insert" and len(buf) >= 4:
        i = rng.randrange(4, len(buf) + 1)
        buf[i:i] = rng.randbytes(rng.randint(1, 16))
        struct.pack_into(">i", buf, 0, len(buf) - 4)
    elif kind == "delete":
        if len(buf) > 5:
            i = rng.randrange(4, len(buf))
            del buf[i : i + rng.randint(1, 16)]
            struct.pack_into(">i", buf, 0, len(buf) - 4)
    elif kind == "splice":
        j = rng.randrange(4, len(buf)) if len(buf) > 4 else 0
        buf = buf[:j] + rng.randbytes(rng.randint(0, 64))
        if len(buf) >= 4:
            struct.pack_into(">i", buf, 0, len(buf) - 4)
    elif kind == "int-edge" and len(buf) >= 12:
        # overwrite an int32 somewhere in the body with an edge value
        i = rng.randrange(4, len(buf) - 3)
        struct.pack_into(
            ">i", buf, i, rng.choice([-1, 0, 0x7FFFFFFF, -0x80000000, 0x10000000, 65536])
        )
    return kind, bytes(buf)


class Fuzzer(threading.Thread):
    def __init__(
        self, n: int, port: int, seed: int, deadline: float, corpus: list[tuple[str, bytes]]
    ) -> None:
        super().__init__(name=f"fuzzer-{n}", daemon=True)
        self.port = port
        self.seed = seed
        self.rng = random.Random(seed)
        self.deadline = deadline
        self.corpus = corpus
        self.recent: collections.deque[tuple[float, str, bytes]] = collections.deque(maxlen=40)
        self.sent = collections.Counter()
        self.refused = 0
        self.served = {int(k) for k in served_api_keys()}

    def _connect(self) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            self.refused += 1
            time.sleep(0.05)
            return None
        s.settimeout(1.0)
        return s

    def _input(self) -> tuple[str, bytes]:
        rng = self.rng
        r = rng.random()
        if r < 0.12:
            return "random-bytes", rng.randbytes(rng.randint(1, 4096))
        if r < 0.24:
            size = rng.choice([rng.randint(0, 64), rng.randint(0, 4096), rng.randint(0, 65536)])
            return "random-frame", struct.pack(">i", size) + rng.randbytes(size)
        if r < 0.44:
            key = rng.choice(sorted(self.served)) if rng.random() < 0.9 else rng.randint(-5, 100)
            version = rng.randint(0, 17) if rng.random() < 0.9 else rng.randint(-32768, 32767)
            cid = rng.choice([None, "", "fz", "x" * rng.randint(0, 300)])
            cid_bytes = (
                struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid.encode()
            )
            body = struct.pack(">hhi", key, version, rng.randint(-(2**31), 2**31 - 1)) + cid_bytes
            body += rng.choice([b"", b"\x00"]) + rng.randbytes(rng.randint(0, 512))
            return f"header-{key}v{version}+random", struct.pack(">i", len(body)) + body
        if r < 0.80:
            name, data = rng.choice(self.corpus)
            kind, mutated = _mutate(rng, data)
            if rng.random() < 0.3:
                kind2, mutated = _mutate(rng, mutated)
                kind += "+" + kind2
            return f"mutate-{name}-{kind}", mutated
        if r < 0.90:
            # valid requests pipelined, then garbage
            frames = [rng.choice(self.corpus)[1] for _ in range(rng.randint(1, 4))]
            tail = rng.choice([b"", rng.randbytes(rng.randint(1, 64))])
            return "pipeline-valid+garbage", b"".join(frames) + tail
        if r < 0.95:
            name, data = rng.choice(self.corpus)
            return f"midframe-{name}", data[: rng.randrange(1, len(data))]
        size = rng.choice([0x7FFFFFFF, 104857600 + 1, 104857600 - 1, 50 << 20, 1 << 24])
        return f"huge-{size}", struct.pack(">i", size) + rng.randbytes(rng.randint(0, 256 << 10))

    def run(self) -> None:
        held: list[socket.socket] = []  # slow partial frames kept open for a while
        while time.monotonic() < self.deadline:
            label, data = self._input()
            self.recent.append((time.time(), label, data[:512]))
            self.sent[label.split("-")[0]] += 1
            s = self._connect()
            if s is None:
                continue
            keep = False
            try:
                if label.startswith("midframe") and self.rng.random() < 0.5:
                    # dribble a few pieces, then vanish
                    for i in range(0, len(data), max(1, len(data) // 4)):
                        s.sendall(data[i : i + max(1, len(data) // 4)])
                        time.sleep(0.005)
                else:
                    s.sendall(data)
                if (
                    label.startswith(("huge", "midframe"))
                    and self.rng.random() < 0.3
                    and len(held) < 4
                ):
                    keep = True
                elif self.rng.random() < 0.5:
                    # read whatever comes back for a moment
                    end = time.monotonic() + 0.1
                    while time.monotonic() < end:
                        s.settimeout(max(0.01, end - time.monotonic()))
                        if not s.recv(65536):
                            break
            except (OSError, TimeoutError):
                pass
            if keep:
                held.append(s)
            else:
                if self.rng.random() < 0.5:
                    # RST instead of FIN
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            if len(held) >= 4 or (held and self.rng.random() < 0.05):
                held.pop(0).close()
        for s in held:
            s.close()


# ---------------------------------------------------------------------------
# the well-behaved pair
# ---------------------------------------------------------------------------


class GoodClients(threading.Thread):
    def __init__(self, bootstrap: str, deadline: float) -> None:
        super().__init__(name="good-clients", daemon=True)
        self.bootstrap = bootstrap
        self.deadline = deadline
        self.errors: list[str] = []
        self.round_trips = 0
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.max_rtt = 0.0

    def run(self) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        def on_error(err):
            self.errors.append(f"client error: {err}")

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "error_cb": on_error,
            }
        )
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "fuzz-good",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 20,
                "error_cb": on_error,
            }
        )
        try:
            c.assign([TopicPartition(GOOD_TOPIC, 0, 0)])
            n = 0
            while time.monotonic() < self.deadline:
                values = [b"good-%d-%s" % (n + i, uuid.uuid4().hex.encode()) for i in range(5)]
                n += len(values)
                start = time.monotonic()
                delivered: list[str | None] = []
                for v in values:
                    p.produce(
                        GOOD_TOPIC,
                        value=v,
                        partition=0,
                        on_delivery=lambda err, msg, d=delivered: d.append(err and str(err)),
                    )
                    self.sent.append(v)
                if p.flush(15) != 0 or len(delivered) != len(values):
                    self.errors.append(f"produce of round {n} not delivered in 15 s")
                    return
                if any(delivered):
                    self.errors.append(f"delivery errors: {[d for d in delivered if d]}")
                want = set(values)
                end = time.monotonic() + 15
                while want and time.monotonic() < end:
                    for m in c.consume(num_messages=100, timeout=0.2):
                        if m.error() is not None:
                            self.errors.append(f"consume error: {m.error()}")
                            continue
                        self.received.append(m.value())
                        want.discard(m.value())
                if want:
                    self.errors.append(f"round {n}: {len(want)} messages not consumed in 15 s")
                    return
                self.max_rtt = max(self.max_rtt, time.monotonic() - start)
                self.round_trips += 1
                time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - reported, the test fails on it
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            c.close()
            p.flush(5)


# ---------------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _partition_dirs(data_dir: str) -> int:
    return sum(
        1
        for n in os.listdir(data_dir)
        if os.path.isdir(os.path.join(data_dir, n)) and n.rpartition("-")[2].isdigit()
    )


def _api_versions_ok(port: int) -> bool:
    body = struct.pack(">hhih", 18, 0, 99, -1)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        head = s.recv(8)
    return len(head) == 8 and struct.unpack(">ii", head)[1] == 99


def test_fuzzed_port_keeps_serving_good_clients(broker, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(GOOD_TOPIC, 1, 1)])[GOOD_TOPIC].result(30)
    pid = broker.proc.pid
    corpus = valid_requests()
    seed = int(os.environ.get("LOGSTORE_FUZZ_SEED", str(time.time_ns() % 2**32)))

    fds_before = _fds(pid)
    partitions_before = _partition_dirs(broker.data_dir)
    start = time.monotonic()
    deadline = start + FUZZ_SECONDS
    good = GoodClients(broker.bootstrap, deadline)
    fuzzers = [Fuzzer(i, broker.port, seed + i, deadline, corpus) for i in range(FUZZ_THREADS)]
    good.start()
    for f in fuzzers:
        f.start()
    samples: list[tuple[float, float]] = []
    died_at = None
    while time.monotonic() < deadline + 1:
        if not broker.alive():
            died_at = time.monotonic() - start
            break
        samples.append((time.monotonic() - start, _rss_mb(pid)))
        time.sleep(0.25)
    for f in fuzzers:
        f.join(30)
    good.join(60)

    def evidence() -> str:
        path = tmp_path / "fuzz-inputs.txt"
        with open(path, "w") as out:
            out.write(f"seed {seed}\n")
            for f in fuzzers:
                out.writelines(
                    f"{f.name} {t:.3f} {label} {data.hex()}\n" for t, label, data in f.recent
                )
        last = [
            f"{f.name}: {label} {data[:48].hex()}"
            for f in fuzzers
            for _, label, data in list(f.recent)[-3:]
        ]
        return (
            f"seed {seed}; last inputs in {path}:\n"
            + "\n".join(last)
            + "\n--- broker log tail ---\n"
            + broker.log_text()[-3000:]
        )

    assert died_at is None and broker.alive(), (
        f"broker died {died_at or FUZZ_SECONDS:.1f}s into the fuzz (rc {broker.proc.returncode}); "
        + evidence()
    )
    sent = collections.Counter()
    for f in fuzzers:
        sent.update(f.sent)
    print(
        f"fuzz: seed {seed}, inputs {dict(sent)}, good round trips {good.round_trips}, "
        f"max rtt {good.max_rtt:.3f}s"
    )

    assert not good.errors, f"good clients saw errors: {good.errors[:10]}; " + evidence()
    assert good.round_trips >= 10, (
        f"only {good.round_trips} good round trips in {FUZZ_SECONDS}s; " + evidence()
    )
    assert set(good.received) >= set(good.sent[: 5 * good.round_trips])
    assert len(good.received) == len(set(good.received)), "good consumer saw duplicates"

    # memory: bounded, and the second half of the run does not keep growing over the first
    rss = [r for _, r in samples]
    half = len(rss) // 2
    first, second = max(rss[:half]), max(rss[half:])
    print(
        f"fuzz: RSS first half max {first:.1f} MB, second half max {second:.1f} MB, "
        f"end {rss[-1]:.1f} MB"
    )
    assert max(rss) < MAX_RSS_MB, f"RSS reached {max(rss):.0f} MB; " + evidence()
    assert second <= first * 1.25 + 20, (
        f"RSS grew from {first:.0f} MB to {second:.0f} MB; " + evidence()
    )

    # still serving, and the fuzz connections are gone (partitions the fuzz auto-created
    # legitimately hold a few files open each)
    assert _api_versions_ok(broker.port)
    new_partitions = _partition_dirs(broker.data_dir) - partitions_before
    allowed = fds_before + 10 + 4 * new_partitions
    deadline = time.monotonic() + 10
    while _fds(pid) > allowed and time.monotonic() < deadline:
        time.sleep(0.2)
    print(
        f"fuzz: broker fds {fds_before} before, {_fds(pid)} after; "
        f"{new_partitions} partitions auto-created"
    )
    assert _fds(pid) <= allowed, (
        f"broker holds {_fds(pid)} fds, {fds_before} before the fuzz, "
        f"{new_partitions} new partitions"
    )

    log_text = broker.log_text()
    tracebacks = [block for block in log_text.split("Traceback (most recent call last):")[1:]]
    assert not tracebacks, (
        f"{len(tracebacks)} tracebacks in the broker log; first:\n"
        "Traceback (most recent call last):" + tracebacks[0][:3000] + "\n" + evidence()
    )
