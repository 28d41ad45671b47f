"""kcat (Debian's 1.7.1, librdkafka 2.0.2) against a real broker: produce/consume with
every codec, metadata and auto-creation, offsets for times (-o s@, -Q), fetch edge
cases, DeleteRecords (through confluent-kafka, kcat has no admin) and restarts."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.clients import (
    assert_stored_codec,
    kcat,
    now_ms,
    stored_batches,
    topic_name,
)
from tests.integration.conftest import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADER_FLAGS = ["-H", "h1=a", "-H", "h2", "-H", "h1=b", "-H", "empty="]  # "h2": a null value
HEADERS_JSON = ["h1", "a", "h2", None, "h1", "b", "empty", ""]


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    """A broker whose auto-created topics have 3 partitions."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("kcat")), {"num.partitions": "3"})
    b.start()
    yield b
    b.kill()


def consume_json(bootstrap: str, topic: str, *args: str, timeout: float = 30) -> list[dict]:
    r = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *args, timeout=timeout)
    return [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]


def by_partition(msgs: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for m in msgs:
        out.setdefault(m["partition"], []).append(m)
    return out


def query(bootstrap: str, topic: str, partition: int, ts: int) -> int:
    r = kcat(bootstrap, "-Q", "-J", "-t", f"{topic}:{partition}:{ts}")
    return json.loads(r.stdout)[topic][str(partition)]["offset"]


def confluent_produce(bootstrap: str, topic: str, items, config: dict | None = None) -> None:
    """items: (partition, key, value, headers, timestamp)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(config or {})})
    for part, key, value, headers, ts in items:
        p.produce(topic, value=value, key=key, partition=part, headers=headers, timestamp=ts)
    assert p.flush(30) == 0


def _lines(p: int, n: int) -> tuple[list[bytes], list[tuple]]:
    """Input lines for ``kcat -P -K:`` and the (key, payload) each gives (JSON view)."""
    lines, want = [], []
    for i in range(n):
        big = f"value {p}/{i} " * 30
        kind = i % 4
        if kind == 0:
            lines.append(f"k{p}-{i}:{big}"), want.append((f"k{p}-{i}", big))
        elif kind == 1:
            lines.append(f"k{p}-{i}:"), want.append((f"k{p}-{i}", ""))  # empty value
        elif kind == 2:
            lines.append(f":{big}"), want.append(("", big))  # empty (not null) key
        else:
            lines.append(big), want.append((None, big))  # no delimiter: null key
    return [line.encode() for line in lines], want


# --- produce / consume -----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(kbroker, codec):
    topic = topic_name(f"kc-rt-{codec}")
    t0 = now_ms()
    expected: dict[int, list[tuple]] = {}
    for p in range(3):
        lines, want = _lines(p, 16)
        kcat(
            kbroker.bootstrap,
            "-P",
            "-t",
            topic,
            "-p",
            str(p),
            "-K",
            ":",
            "-z",
            codec,
            *HEADER_FLAGS,
            input=b"\n".join(lines) + b"\n",
        )
        expected[p] = want
    # -Z: empty keys and values become null: a tombstone and a null-keyed record.
    kcat(
        kbroker.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        ":",
        "-Z",
        "-z",
        codec,
        *HEADER_FLAGS,
        input=b"tomb:\n:nullkey\n",
    )
    expected[0] += [("tomb", None), (None, "nullkey")]
    t1 = now_ms()

    got = by_partition(consume_json(kbroker.bootstrap, topic, "-o", "beginning"))
    assert sorted(got) == [0, 1, 2]
    for p, want in expected.items():
        msgs = got[p]
        assert [m["offset"] for m in msgs] == list(range(len(want))), p
        assert [(m["key"], m["payload"]) for m in msgs] == want, p
        assert all(m["headers"] == HEADERS_JSON for m in msgs), msgs[0]["headers"]
        assert all(m["tstype"] == "create" and t0 - 1000 <= m["ts"] <= t1 + 1000 for m in msgs), [
            m["ts"] for m in msgs
        ]
    if codec == "none":
        assert {b.codec for p in range(3) for b in stored_batches(kbroker.data_dir, topic, p)} == {
            0
        }
    else:
        try:
            assert_stored_codec(kbroker.data_dir, topic, 3, codec)
        except AssertionError as e:
            raise AssertionError(
                f"{e}. older librdkafka (kcat's 2.0.2) compresses with gzip/snappy/lz4 only "
                "when the broker's Produce range includes v0 (zstd: when it overlaps 0..7); "
                "otherwise it logs 'Broker does not support compression type' and sends "
                "uncompressed (librdkafka#4956, KAFKA-18659)"
            ) from None


@pytest.mark.parametrize("codec", CODECS)
def test_consume_explicit_timestamps_and_null_headers(kbroker, codec):
    """Records from confluent-kafka (explicit timestamps, null header values), compressed
    with each codec, read back by kcat."""
    topic = topic_name(f"kc-ts-{codec}")
    base = now_ms() - 3_600_000
    items = []
    for i in range(30):
        p = i % 3
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (b"" if i % 7 == 4 else f"v-{i} ".encode() * 20)
        headers = [("a", f"{i}".encode()), ("n", None), ("a", b"again")] if i % 2 else []
        items.append((p, key, value, headers, base + i * 10))
    confluent_produce(kbroker.bootstrap, topic, items, {"compression.type": codec})
    if codec != "none":
        assert_stored_codec(kbroker.data_dir, topic, 3, codec)
    got = by_partition(consume_json(kbroker.bootstrap, topic, "-o", "beginning"))
    for p in range(3):
        want = [it for it in items if it[0] == p]
        msgs = got[p]
        assert [m["offset"] for m in msgs] == list(range(len(want)))
        for it, m in zip(want, msgs):
            _, key, value, headers, ts = it
            assert m["ts"] == ts and m["tstype"] == "create"
            assert m["key"] == (None if key is None else key.decode())
            assert m["payload"] == (None if value is None else value.decode())
            flat = [x for h in headers for x in (h[0], None if h[1] is None else h[1].decode())]
            assert m.get("headers", []) == flat


# --- metadata and auto-creation --------------------------------------------------------


def test_metadata_and_auto_creation(kbroker):
    topic = topic_name("kc-auto")
    kcat(kbroker.bootstrap, "-P", "-t", topic, input=b"one\n")
    md = json.loads(kcat(kbroker.bootstrap, "-L", "-J", "-t", topic).stdout)
    assert md["controllerid"] == 0
    assert md["brokers"] == [{"id": 0, "name": kbroker.bootstrap}]
    [t] = md["topics"]
    assert t["topic"] == topic and "error" not in t
    assert [
        (p["partition"], p["leader"], p["replicas"], p["isrs"])
        for p in sorted(t["partitions"], key=lambda p: p["partition"])
    ] == [
        (i, 0, [{"id": 0}], [{"id": 0}])
        for i in range(3)  # num.partitions=3
    ]
    # A metadata request for a missing topic creates it too.
    other = topic_name("kc-auto-md")
    md = json.loads(kcat(kbroker.bootstrap, "-L", "-J", "-t", other).stdout)
    [t] = md["topics"]
    assert t["topic"] == other
    if "error" in t:  # librdkafka may report the creation in progress; it exists right after
        md = json.loads(kcat(kbroker.bootstrap, "-L", "-J", "-t", other).stdout)
        [t] = md["topics"]
    assert "error" not in t and len(t["partitions"]) == 3
    # Full listing holds both, and no internal topic leaks with an error.
    md = json.loads(kcat(kbroker.bootstrap, "-L", "-J").stdout)
    names = {t["topic"] for t in md["topics"]}
    assert {topic, other} <= names
    assert all("error" not in t for t in md["topics"])


def test_auto_creation_disabled(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    md = json.loads(kcat(b.bootstrap, "-L", "-J", "-t", "missing").stdout)
    [t] = md["topics"]
    assert t["error"] == "Broker: Unknown topic or partition" and t["partitions"] == []
    r = kcat(
        b.bootstrap,
        "-P",
        "-t",
        "missing",
        "-X",
        "topic.metadata.propagation.max.ms=1000",
        "-X",
        "message.timeout.ms=5000",
        input=b"x\n",
        check=False,
    )
    assert r.returncode != 0
    assert b"Unknown topic or partition" in r.stderr
    md = json.loads(kcat(b.bootstrap, "-L", "-J").stdout)
    assert "missing" not in {t["topic"] for t in md["topics"]}


# --- offsets for times -----------------------------------------------------------------


def test_offsets_for_times(kbroker):
    topic = topic_name("kc-oft")
    base = now_ms() - 600_000
    confluent_produce(
        kbroker.bootstrap, topic, [(0, None, b"m%d" % i, [], base + i * 1000) for i in range(10)]
    )

    def offsets(*args):
        return [m["offset"] for m in consume_json(kbroker.bootstrap, topic, "-p", "0", *args)]

    assert offsets("-o", f"s@{base + 2500}") == [3, 4, 5, 6, 7, 8, 9]
    assert offsets("-o", f"s@{base}") == list(range(10))
    assert offsets("-o", f"s@{base + 9001}") == []
    assert offsets("-o", f"s@{base + 2000}", "-o", f"e@{base + 5000}") == [2, 3, 4]
    assert query(kbroker.bootstrap, topic, 0, base + 2500) == 3
    assert query(kbroker.bootstrap, topic, 0, base - 10) == 0
    assert query(kbroker.bootstrap, topic, 0, base + 9000) == 9
    assert query(kbroker.bootstrap, topic, 0, base + 9001) == -1
    assert query(kbroker.bootstrap, topic, 0, -2) == 0  # beginning
    assert query(kbroker.bootstrap, topic, 0, -1) == 10  # end
    assert query(kbroker.bootstrap, topic, 1, -1) == 0  # an empty partition


# --- fetch edge cases ------------------------------------------------------------------


def test_offset_out_of_range_and_relative_offsets(kbroker):
    topic = topic_name("kc-oor")
    confluent_produce(
        kbroker.bootstrap, topic, [(0, None, b"m%d" % i, [], now_ms()) for i in range(10)]
    )
    got = consume_json(
        kbroker.bootstrap, topic, "-p", "0", "-o", "100", "-X", "auto.offset.reset=earliest"
    )
    assert [m["offset"] for m in got] == list(range(10))
    got = consume_json(
        kbroker.bootstrap, topic, "-p", "0", "-o", "100", "-X", "auto.offset.reset=latest"
    )
    assert got == []
    r = kcat(
        kbroker.bootstrap,
        "-C",
        "-t",
        topic,
        "-p",
        "0",
        "-o",
        "100",
        "-e",
        "-X",
        "auto.offset.reset=error",
        check=False,
    )
    assert b"Offset out of range" in r.stderr and r.stdout == b""
    got = consume_json(kbroker.bootstrap, topic, "-p", "0", "-o", "-3")
    assert [(m["offset"], m["payload"]) for m in got] == [(7, "m7"), (8, "m8"), (9, "m9")]
    got = consume_json(kbroker.bootstrap, topic, "-p", "0", "-o", "4", "-c", "2")
    assert [m["offset"] for m in got] == [4, 5]


def test_long_poll_delivers_promptly(kbroker):
    topic = topic_name("kc-longpoll")
    confluent_produce(kbroker.bootstrap, topic, [(0, None, b"old", [], now_ms())])
    proc = subprocess.Popen(
        [
            "kcat",
            "-b",
            kbroker.bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "end",
            "-u",
            "-J",
            "-X",
            "fetch.wait.max.ms=30000",
            "-c",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        p = Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 0})
        p.list_topics(topic, timeout=10)
        time.sleep(2.0)  # kcat is connected and parked in a Fetch at the end
        assert proc.poll() is None
        p.produce(topic, value=b"wake", partition=0)
        assert p.flush(10) == 0
        # The parked fetch (30 s wait) is woken by the append, not by its timeout.
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "kcat's parked fetch was not woken by the append"
        line = os.read(proc.stdout.fileno(), 65536)
        m = json.loads(line.decode().splitlines()[0])
        assert (m["offset"], m["payload"]) == (1, "wake")
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_partition_fetch_bytes_smaller_than_a_batch(kbroker):
    topic = topic_name("kc-smallfetch")
    values = [f"{i:04d}" + "w" * 996 for i in range(40)]
    # kcat sends what it holds when it exits: the 40 lines go as one batch unless reading
    # them takes longer than linger.ms (a loaded host); batches of several records are enough
    kcat(
        kbroker.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-X",
        "linger.ms=5000",
        input="\n".join(values).encode() + b"\n",
    )
    batches = stored_batches(kbroker.data_dir, topic, 0)
    assert sum(b.records for b in batches) == 40 and max(b.records for b in batches) > 1, (
        batches
    )  # a batch > fetch size
    got = consume_json(
        kbroker.bootstrap,
        topic,
        "-p",
        "0",
        "-o",
        "beginning",
        "-X",
        "max.partition.fetch.bytes=1024",
        "-X",
        "fetch.max.bytes=1024",
        "-X",
        "message.max.bytes=1000",
    )
    assert [(m["offset"], m["payload"]) for m in got] == list(enumerate(values))


# --- DeleteRecords ---------------------------------------------------------------------


def test_consume_after_delete_records(kbroker):
    topic = topic_name("kc-delrec")
    confluent_produce(
        kbroker.bootstrap, topic, [(0, None, b"m%d" % i, [], now_ms()) for i in range(10)]
    )
    a = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    [f] = a.delete_records([TopicPartition(topic, 0, 6)]).values()
    assert f.result(15).low_watermark == 6
    assert query(kbroker.bootstrap, topic, 0, -2) == 6
    got = consume_json(kbroker.bootstrap, topic, "-p", "0", "-o", "beginning")
    assert [m["offset"] for m in got] == [6, 7, 8, 9]
    got = consume_json(
        kbroker.bootstrap, topic, "-p", "0", "-o", "2", "-X", "auto.offset.reset=earliest"
    )
    assert [m["offset"] for m in got] == [6, 7, 8, 9]


# --- consumer group --------------------------------------------------------------------


def test_balanced_consumer_commits(kbroker):
    topic = topic_name("kc-group")
    group = topic_name("kc-g")
    confluent_produce(
        kbroker.bootstrap, topic, [(i % 3, None, b"m%d" % i, [], now_ms()) for i in range(12)]
    )
    r = kcat(
        kbroker.bootstrap,
        "-G",
        group,
        "-e",
        "-J",
        "-X",
        "auto.offset.reset=earliest",
        topic,
        timeout=60,
    )
    msgs = [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]
    assert sorted(m["payload"] for m in msgs) == sorted(f"m{i}" for i in range(12))
    # The group committed its position: a second run sees only the new records.
    confluent_produce(kbroker.bootstrap, topic, [(0, None, b"new", [], now_ms())])
    r = kcat(
        kbroker.bootstrap,
        "-G",
        group,
        "-e",
        "-J",
        "-X",
        "auto.offset.reset=earliest",
        topic,
        timeout=60,
    )
    msgs = [json.loads(line) for line in r.stdout.decode().splitlines() if line.strip()]
    assert [(m["partition"], m["offset"], m["payload"]) for m in msgs] == [(0, 4, "new")]


# --- restart ---------------------------------------------------------------------------


def test_restart_keeps_everything_and_continues_offsets(broker_factory):
    b = broker_factory({"num.partitions": "2"})
    topic = topic_name("kc-restart")
    for p in range(2):
        kcat(
            b.bootstrap,
            "-P",
            "-t",
            topic,
            "-p",
            str(p),
            "-K",
            ":",
            "-z",
            "lz4",
            input=b"".join(b"k%d:v%d-%d\n" % (i, p, i) for i in range(10)),
        )
    b.restart()
    got = by_partition(consume_json(b.bootstrap, topic, "-o", "beginning"))
    for p in range(2):
        assert [(m["offset"], m["key"], m["payload"]) for m in got[p]] == [
            (i, f"k{i}", f"v{p}-{i}") for i in range(10)
        ]
    kcat(b.bootstrap, "-P", "-t", topic, "-p", "1", input=b"after\n")
    got = by_partition(consume_json(b.bootstrap, topic, "-o", "beginning"))
    assert [len(got[0]), len(got[1])] == [10, 11]
    assert (got[1][-1]["offset"], got[1][-1]["payload"]) == (10, "after")
    assert query(b.bootstrap, topic, 1, -1) == 11
