"""SIGKILL the broker under load; nothing it acknowledged may be lost.

A confluent-kafka producer (acks=all, idempotent, so retries keep order) produces
continuously from a thread of the test process; its delivery callbacks record every
acknowledged (partition, offset, value). At a random moment the broker gets SIGKILL,
then starts again on the same port and data directory while the producer keeps going.
After a few rounds everything is read back: every acknowledged message must be at its
acknowledged offset with its value, each partition in produce order without
duplicates, and messages acknowledged after a restart follow the earlier ones.

Also: committed consumer-group offsets survive a SIGKILL.
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

TOPIC = "crash"
PARTITIONS = 3
ROUNDS = int(os.environ.get("LOGSTORE_CRASH_ROUNDS", "3"))


class ProducerThread:
    """Produces ``<seq>`` values round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 500,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 20,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
                "queue.buffering.max.messages": 200000,
            }
        )
        self.acked: dict[int, tuple[int, int, int]] = {}  # seq -> (partition, offset, ack order)
        self.errors: list[str] = []
        self.produced = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crash-producer", daemon=True)

    def _on_delivery(self, err, msg) -> None:
        seq = int(msg.value())
        if err is not None:
            self.errors.append(f"seq {seq}: {err}")
        else:
            with self._lock:
                self.acked[seq] = (msg.partition(), msg.offset(), len(self.acked))

    def _run(self) -> None:
        p = self.producer
        deadline = time.monotonic() + 120
        while not self._stop.is_set() and time.monotonic() < deadline:
            for _ in range(200):
                seq = self.produced
                try:
                    p.produce(
                        TOPIC,
                        value=b"%d" % seq,
                        partition=seq % PARTITIONS,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    break
                self.produced += 1
            p.poll(0.005)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, at_least: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acked_count() >= at_least:
                return True
            time.sleep(0.01)
        return False


def read_partitions(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, from offset 0 to the high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        hw = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(
            (out[p][-1][0] + 1 if out[p] else 0) < hw[p] for p in range(partitions)
        ):
            for m in c.consume(num_messages=10000, timeout=0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value()))
        return out
    finally:
        c.close()


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_restart_during_acks_all_produce_loses_nothing_acknowledged(broker, how):
    """SIGKILL (state rebuilt by recovery + log replay) and, for comparison, SIGTERM (a
    clean stop: producer state from the snapshot) in the middle of the stream."""
    from confluent_kafka.admin import AdminClient, NewTopic

    rng = random.Random(int(os.environ.get("LOGSTORE_CRASH_SEED", str(time.time_ns()))))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)

    producer = ProducerThread(broker.bootstrap)
    producer.start()
    acked_before_kill: list[int] = []
    try:
        assert producer.wait_acked(1000, 30), "producer never got going"
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.2, 1.5))
            if how == "sigkill":
                broker.kill()
            else:
                assert broker.stop() == 0, broker.log_text()[-3000:]
            acked_before_kill.append(producer.acked_count())
            time.sleep(rng.uniform(0.0, 0.5))
            broker.start()
            # the producer goes on against the restarted broker
            assert producer.wait_acked(acked_before_kill[-1] + 2000, 60), (
                f"no progress after restart: {producer.acked_count()} acked, "
                f"errors {producer.errors[:5]}"
            )
    finally:
        producer.stop()
    remaining = producer.producer.flush(90)
    assert remaining == 0, f"{remaining} messages never delivered after the restarts"
    assert not producer.errors, producer.errors[:10]

    acked = producer.acked
    assert len(acked) == producer.produced
    data = read_partitions(broker.bootstrap, TOPIC, PARTITIONS)

    for part in range(PARTITIONS):
        records = data[part]
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(records))), (
            f"partition {part}: offsets are not contiguous from 0"
        )
        stored = {o: v for o, v in records}
        mine = sorted((off, seq) for seq, (p, off, _) in acked.items() if p == part)
        for off, seq in mine:
            assert off in stored, (
                f"partition {part}: acknowledged seq {seq} at offset {off} is missing "
                f"(log end {len(records)})"
            )
            assert stored[off] == b"%d" % seq, (
                f"partition {part} offset {off}: {stored[off]!r}, acknowledged {seq}"
            )
        # produce order, no duplicates, nothing that was not produced
        seqs = [int(v) for _, v in records]
        assert seqs == sorted(seqs), f"partition {part}: records out of produce order"
        assert len(set(seqs)) == len(seqs), (
            f"partition {part}: {len(seqs) - len(set(seqs))} duplicates"
        )
        assert all(s % PARTITIONS == part for s in seqs)
    # what was acknowledged after each restart follows what was acknowledged before the kill
    for k, cut in enumerate(acked_before_kill):
        for part in range(PARTITIONS):
            before = [off for p, off, order in acked.values() if p == part and order < cut]
            after = [off for p, off, order in acked.values() if p == part and order >= cut]
            if before and after:
                assert max(before) < min(after), (
                    f"kill {k}, partition {part}: offsets after the restart do not follow"
                )
    total = sum(len(r) for r in data.values())
    print(
        f"crash ({how}): {ROUNDS} kills, acked before each kill {acked_before_kill}, "
        f"{total} records in the end"
    )
    assert total == producer.produced, (
        f"{total} records stored, {producer.produced} produced and acknowledged"
    )
    if how == "sigkill":
        assert broker.log_text().count("recovered") >= 1, (
            "the broker never reported a recovery after SIGKILL"
        )
    assert "Traceback" not in broker.log_text(), broker.log_text()[-4000:]


def test_sigkill_keeps_committed_group_offsets(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "crash-offsets"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    def consumer(group: str):
        return Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    c = consumer("g-crash")
    try:
        c.commit(
            offsets=[TopicPartition(topic, 0, 17), TopicPartition(topic, 1, 42)], asynchronous=False
        )
        # a second commit overwrites the first
        c.commit(
            offsets=[TopicPartition(topic, 0, 23, metadata="after-crash?")], asynchronous=False
        )
    finally:
        c.close()
    c = consumer("g-other")
    try:
        c.commit(offsets=[TopicPartition(topic, 1, 5)], asynchronous=False)
    finally:
        c.close()

    broker.kill()
    broker.start()

    c = consumer("g-crash")
    try:
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 23), (1, 42)]
        assert got[0].metadata == "after-crash?"
        # and a member of the group starts from there
        c.assign([TopicPartition(topic, 0, 23)])
        m = None
        deadline = time.monotonic() + 20
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        assert m is not None and m.error() is None and m.offset() == 23 and m.value() == b"46"
    finally:
        c.close()
    c = consumer("g-other")
    try:
        got = c.committed([TopicPartition(topic, 1)], timeout=30)
        assert got[0].offset == 5
    finally:
        c.close()
    assert "Traceback" not in broker.log_text(), broker.log_text()[-4000:]


def test_sigkill_during_a_log_dir_move_keeps_the_partition_whole(broker_factory, tmp_path):
    """SIGKILL while AlterReplicaLogDirs copies a partition to another log dir: the
    restarted broker serves it whole from one dir and leaves no copy behind."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from logstore.protocol.messages.log_dirs import AlterReplicaLogDirsRequest
    from tests.integration.clients import wire_call

    dirs = [str(tmp_path / "dir-a"), str(tmp_path / "dir-b")]
    b = broker_factory({"log.dirs": ",".join(dirs), "log.segment.bytes": str(1 << 20)})
    topic = "crash-move"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 200_000,
        }
    )
    count, payload = 100_000, b"x" * 1000
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=b"%d:" % i + payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    here = next(d for d in dirs if os.path.isdir(os.path.join(d, f"{topic}-0")))
    there = next(d for d in dirs if d != here)

    move = AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                path=there,
                topics=[
                    AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=topic, partitions=[0])
                ],
            )
        ]
    )
    (result,) = wire_call(b.bootstrap, move, 2).results
    assert [x.error_code for x in result.partitions] == [0]
    deadline = time.monotonic() + 10
    while not any(n.endswith("-future") for n in os.listdir(there)):
        assert time.monotonic() < deadline and not os.path.isdir(
            os.path.join(there, f"{topic}-0")
        ), "the copy was not seen"
        time.sleep(0.001)
    b.kill()

    b.start()
    left = [(d, n) for d in dirs for n in os.listdir(d) if n.startswith(f"{topic}-0")]
    assert left == [(here, f"{topic}-0")], left
    got = read_partitions(b.bootstrap, topic, 1)[0]
    assert [o for o, _ in got] == list(range(count))
    assert all(v.startswith(b"%d:" % o) for o, v in got)
