"""Idempotent produce: no duplicates and no gaps when the producer must retry.

End to end: a confluent-kafka producer (enable.idempotence, acks=all) talks to the
broker through a loopback proxy (``tcp_proxy.TcpProxy``). The broker advertises the
proxy's port, so every client connection goes through it. A few times during the run
the proxy forwards a Produce request, waits for the broker's answer, drops that answer
and cuts the connection: the broker has written the batch, the producer does not know
it and sends it again. Reading everything back must give each message exactly once, in
order, at the offset its delivery report named.

Unit level: ``ProducerStateManager`` over a real ``logstore.Log``: duplicates, sequence
gaps, fencing by epoch, and state that survives a snapshot + reopen and an unclean
stop (rebuilt by replaying the log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import logstore
from broker_py.cluster.partition import Partition
from broker_py.log.producer_state import ProducerStateManager
from broker_py.log.unified_log import UnifiedLog
from logstore.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from tests.support.processes import REPO_ROOT, repo_env

from .tcp_proxy import TcpProxy

TOPIC = "idem"
PARTITIONS = 3
MESSAGES = int(os.environ.get("LOGSTORE_IDEM_MESSAGES", "12000"))
CUTS = 4


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0):
    """{partition: [(offset, value), ...]} read from offset 0 up to the high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "idem-check",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        got = 0
        deadline = time.monotonic() + timeout
        hw = None
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value()))
                got += 1
            if got >= expected:
                if hw is None:
                    hw = {
                        p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                        for p in range(partitions)
                    }
                if all((out[p][-1][0] + 1 if out[p] else 0) >= hw[p] for p in range(partitions)):
                    break
        return out
    finally:
        c.close()


def test_idempotent_producer_retries_cut_connections_without_duplicates_or_gaps(broker_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with TcpProxy() as proxy:
        b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
        proxy.set_target(("127.0.0.1", b.port))
        via_proxy = f"127.0.0.1:{proxy.port}"

        admin = AdminClient({"bootstrap.servers": via_proxy})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)

        acked: dict[bytes, tuple[int, int]] = {}
        errors: list[str] = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(f"{msg.value()!r}: {err}")
            else:
                acked[msg.value()] = (msg.partition(), msg.offset())

        p = Producer(
            {
                "bootstrap.servers": via_proxy,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 200,
                "max.in.flight.requests.per.connection": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 20,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
            }
        )
        expected: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
        cut_points = {MESSAGES * (k + 1) // (CUTS + 1) for k in range(CUTS)}
        deadline = time.monotonic() + 90
        for i in range(MESSAGES):
            part = i % PARTITIONS
            value = b"m-%06d" % i
            expected[part].append(value)
            while True:
                try:
                    p.produce(TOPIC, value=value, partition=part, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
            if i in cut_points:
                # Arm one cut and keep producing until the proxy has made it.
                want = proxy.cuts + 1
                proxy.cut_after_produce()
                while proxy.cuts < want and time.monotonic() < deadline:
                    p.poll(0.005)
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.002)  # spread the run so several cuts hit live traffic
        assert p.flush(90) == 0, f"{len(p)} messages never delivered"
        proxy.disarm()

        assert proxy.cuts >= CUTS, f"only {proxy.cuts} of {CUTS} connection cuts happened"
        assert not errors, errors[:10]
        assert len(acked) == MESSAGES

        records = _consume_all(via_proxy, TOPIC, PARTITIONS, MESSAGES)
        for part in range(PARTITIONS):
            got = records[part]
            values = [v for _, v in got]
            dupes = len(values) - len(set(values))
            assert dupes == 0, f"partition {part}: {dupes} duplicated messages"
            first_difference = next(
                (k for k, (x, y) in enumerate(zip(values, expected[part])) if x != y),
                min(len(values), len(expected[part])),
            )
            assert values == expected[part], (
                f"partition {part}: {len(values)} messages read, {len(expected[part])} produced; "
                f"first difference at index {first_difference}"
            )
            assert [o for o, _ in got] == list(range(len(got))), (
                f"partition {part}: offsets are not 0..n-1"
            )
            for offset, value in got:
                assert acked[value] == (part, offset), (
                    f"{value!r} acknowledged at {acked[value]}, stored at {(part, offset)}"
                )
        assert "Traceback" not in b.log_text(), b.log_text()[-4000:]


# ---------------------------------------------------------------------------
# ProducerStateManager over a real Log
# ---------------------------------------------------------------------------

PID = 4000


def batch(pid: int, epoch: int, seq: int, n: int = 4, tag: str = "v") -> bytes:
    return logstore.encode_batch(
        [(None, f"{tag}-{seq + i}".encode()) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def produce(plog: logstore.Log, state: ProducerStateManager, data: bytes) -> tuple[int, int, bool]:
    """What the Produce handler does for one idempotent batch: (first, last, duplicate)."""
    (b,) = logstore.decode_batches(data, records=False)
    dup = state.check(b)
    if dup is not None:
        return dup.first_offset, dup.last_offset, True
    first, last = plog.append(data)
    state.record(b, first, last)
    return first, last, False


@pytest.fixture
def plog(tmp_path):
    log = logstore.Log.open(str(tmp_path / "idem-0"))
    yield log
    if not log.closed:
        log.close()


def test_duplicate_batch_gets_original_offsets(plog):
    state = ProducerStateManager(plog)
    placed = [produce(plog, state, batch(PID, 0, seq)) for seq in range(0, 24, 4)]  # 6 batches
    assert [(first, last) for first, last, _ in placed] == [(i * 4, i * 4 + 3) for i in range(6)]
    end = plog.log_end_offset
    # The last five batches are remembered: each retry is answered with its offsets.
    for k in range(1, 6):
        first, last, dup = produce(plog, state, batch(PID, 0, k * 4))
        assert dup and (first, last) == (k * 4, k * 4 + 3)
    assert plog.log_end_offset == end  # nothing written again
    # The oldest fell out of the window: not a known duplicate, and out of sequence.
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 0, 0))
    # The next sequence goes on normally.
    assert produce(plog, state, batch(PID, 0, 24)) == (24, 27, False)


def test_duplicate_through_the_produce_handler(plog):
    """The leader's append (the Produce handler's path) answers a retry with the original
    base offset."""
    part = Partition("idem", 0, UnifiedLog("idem", 0, plog), local_broker_id=0)
    part.make_leader(0, [0], [0])
    assert part.append_records_to_leader(batch(PID, 0, 0), 1, 1)[0] == 0
    assert part.append_records_to_leader(batch(PID, 0, 4), 1, 1)[0] == 4
    assert part.append_records_to_leader(batch(PID, 0, 4), 1, 1)[0] == 4
    assert part.append_records_to_leader(batch(PID, 0, 0), 1, 1)[0] == 0
    assert plog.log_end_offset == 8
    values = [r.value for b in logstore.decode_batches(plog.read(0, 1 << 20)) for r in b.records]
    assert values == [f"v-{i}".encode() for i in range(8)]


def test_idle_producers_expire_and_may_then_start_at_any_sequence(plog):
    state = ProducerStateManager(plog)
    t0 = 1_700_000_000_000

    def at(pid: int, seq: int, ts: int) -> bytes:
        return logstore.encode_batch(
            [(None, b"v", [], ts)], producer_id=pid, producer_epoch=0, base_sequence=seq
        )

    produce(plog, state, at(1, 0, t0))
    produce(plog, state, at(2, 0, t0 + 5_000))
    assert state.remove_expired(t0 + 9_999, expiration_ms=10_000) == 0
    assert (
        state.remove_expired(t0 + 10_000, expiration_ms=10_000) == 1
    )  # producer 1, by its last batch
    assert set(state.producers) == {2}
    # A forgotten producer is a new one: its next sequence is taken as it comes.
    assert produce(plog, state, at(1, 7, t0 + 20_000))[2] is False
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, at(2, 5, t0 + 20_000))  # producer 2 is still known


def test_the_broker_expires_idle_producers_on_its_interval(broker_factory):
    from confluent_kafka import Producer

    b = broker_factory(
        {"producer.id.expiration.ms": "1000", "producer.id.expiration.check.interval.ms": "200"}
    )
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    reports = []
    p.produce(
        "expiring",
        b"v",
        partition=0,
        on_delivery=lambda err, msg: reports.append((err, msg.offset())),
    )
    assert p.flush(30) == 0
    deadline = time.monotonic() + 15
    while "expired 1 idle producer ids" not in b.log_text():
        assert time.monotonic() < deadline, b.log_text()[-2000:]
        time.sleep(0.1)
    # The producer goes on after being forgotten: its next sequence is accepted.
    p.produce(
        "expiring",
        b"w",
        partition=0,
        on_delivery=lambda err, msg: reports.append((err, msg.offset())),
    )
    assert p.flush(30) == 0
    assert reports == [(None, 0), (None, 1)], reports


def test_out_of_order_sequence_is_refused(plog):
    state = ProducerStateManager(plog)
    produce(plog, state, batch(PID, 0, 0))
    produce(plog, state, batch(PID, 0, 4))
    end = plog.log_end_offset
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 0, 12))  # gap: 8 is next
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 0, 2))  # overlaps, not a remembered batch
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 0, 4, n=2))  # same start, different end
    assert plog.log_end_offset == end
    assert produce(plog, state, batch(PID, 0, 8)) == (8, 11, False)


def test_older_epoch_is_fenced(plog):
    state = ProducerStateManager(plog)
    produce(plog, state, batch(PID, 0, 0))
    produce(plog, state, batch(PID, 0, 4))
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 1, 8))  # a new epoch starts at sequence 0
    assert produce(plog, state, batch(PID, 1, 0)) == (8, 11, False)
    end = plog.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        produce(plog, state, batch(PID, 0, 8))
    with pytest.raises(InvalidProducerEpochError):
        produce(plog, state, batch(PID, 0, 4))  # even a former duplicate
    assert plog.log_end_offset == end
    assert state.last_epoch(PID) == 1


def _check_restored(
    plog: logstore.Log, state: ProducerStateManager, last_seq_first: int, last_first_offset: int
):
    """PID (epoch 1) and PID+1 (epoch 0) continue where they were."""
    end = plog.log_end_offset
    # the last batch of each producer is a duplicate with its original offsets
    first, last, dup = produce(plog, state, batch(PID, 1, last_seq_first))
    assert dup and (first, last) == (last_first_offset, last_first_offset + 3)
    assert plog.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID, 1, last_seq_first + 8))
    with pytest.raises(InvalidProducerEpochError):
        produce(plog, state, batch(PID, 0, last_seq_first + 4))
    assert plog.log_end_offset == end
    assert produce(plog, state, batch(PID, 1, last_seq_first + 4)) == (end, end + 3, False)
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(plog, state, batch(PID + 1, 0, 12))  # PID+1 goes on at 8, not 12
    assert produce(plog, state, batch(PID + 1, 0, 8)) == (end + 4, end + 7, False)


def _fill(plog: logstore.Log, state: ProducerStateManager) -> tuple[int, int]:
    """PID: epoch 0 seqs 0,4 then epoch 1 seqs 0,4,8; PID+1 epoch 0 seqs 0,4.

    Returns (first sequence, first offset) of PID's last batch."""
    produce(plog, state, batch(PID, 0, 0))
    produce(plog, state, batch(PID + 1, 0, 0))
    produce(plog, state, batch(PID, 0, 4))
    produce(plog, state, batch(PID, 1, 0))
    produce(plog, state, batch(PID + 1, 0, 4))
    produce(plog, state, batch(PID, 1, 4))
    first, _, _ = produce(plog, state, batch(PID, 1, 8))
    return 8, first


def test_state_survives_snapshot_and_reopen(tmp_path):
    path = str(tmp_path / "idem-0")
    plog = logstore.Log.open(path)
    state = ProducerStateManager(plog)
    seq, first = _fill(plog, state)
    snap = state.write_snapshot()
    assert os.path.basename(snap) == f"{plog.log_end_offset:020d}.snapshot"
    plog.close()

    plog = logstore.Log.open(path)
    try:
        assert not plog.recovered
        restored = ProducerStateManager(plog)
        assert restored.last_epoch(PID) == 1 and restored.last_epoch(PID + 1) == 0
        _check_restored(plog, restored, seq, first)
    finally:
        plog.close()


_UNCLEAN_WRITER = r"""
import json, os, sys
import logstore
from broker_py.log.producer_state import ProducerStateManager
path, specs, snapshot_after = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
plog = logstore.Log.open(path)
state = ProducerStateManager(plog)
placed = []
for i, (pid, epoch, seq) in enumerate(specs):
    data = logstore.encode_batch([(None, f"v-{seq + k}".encode()) for k in range(4)],
                                 producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    (b,) = logstore.decode_batches(data, records=False)
    assert state.check(b) is None
    first, last = plog.append(data)
    state.record(b, first, last)
    placed.append(first)
    if i + 1 == snapshot_after:
        state.write_snapshot()
print(json.dumps(placed), flush=True)
os._exit(0)  # no close, no flush, no snapshot: an unclean stop
"""


def _unclean_write(
    path: str, specs: list[tuple[int, int, int]], snapshot_after: int = 0
) -> list[int]:
    env = repo_env()
    r = subprocess.run(
        [sys.executable, "-c", _UNCLEAN_WRITER, path, json.dumps(specs), str(snapshot_after)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


SPECS = [
    (PID, 0, 0),
    (PID + 1, 0, 0),
    (PID, 0, 4),
    (PID, 1, 0),
    (PID + 1, 0, 4),
    (PID, 1, 4),
    (PID, 1, 8),
]


def test_state_survives_unclean_stop_by_log_replay(tmp_path):
    path = str(tmp_path / "idem-0")
    placed = _unclean_write(path, SPECS)
    assert not [n for n in os.listdir(path) if n.endswith(".snapshot")]
    plog = logstore.Log.open(path)
    try:
        assert plog.recovered
        assert plog.log_end_offset == 4 * len(SPECS)
        state = ProducerStateManager(plog)
        # Replay rebuilt the window of remembered batches, not only the last one.
        for (pid, epoch, seq), first in zip(SPECS, placed):
            if (pid, epoch) in ((PID, 1), (PID + 1, 0)):
                got_first, got_last, dup = produce(plog, state, batch(pid, epoch, seq))
                assert dup and (got_first, got_last) == (first, first + 3), (pid, epoch, seq)
        _check_restored(plog, state, 8, placed[-1])
    finally:
        plog.close()


def test_state_survives_unclean_stop_with_snapshot_plus_replay(tmp_path):
    """A snapshot in the middle, more batches after it, then an unclean stop."""
    path = str(tmp_path / "idem-0")
    placed = _unclean_write(path, SPECS, snapshot_after=3)
    snaps = [n for n in os.listdir(path) if n.endswith(".snapshot")]
    assert snaps == [f"{12:020d}.snapshot"]
    plog = logstore.Log.open(path)
    try:
        assert plog.recovered
        state = ProducerStateManager(plog)
        _check_restored(plog, state, 8, placed[-1])
        # PID+1's batch after the snapshot is known too
        first, last, dup = produce(plog, state, batch(PID + 1, 0, 4))
        assert dup and (first, last) == (placed[4], placed[4] + 3)
    finally:
        plog.close()
