"""Client quota bench (issue 36): a producer limited by ``producer_byte_rate`` to R MB/s,
and an unlimited neighbour on the same broker.

    python benches/client_quota_bench.py [--runs 3] [--rate-mb 2] [--seconds 41]
        [--size 10000] [--json out.json] [--keep]

One broker (``python -m broker_py``, loopback, Kafka's default quota windows: 11 x 1 s)
serves every run. Each producer is a process of its own (confluent-kafka 2.16,
``acks=1``, ``linger.ms=5``, records of ``--size`` bytes, as fast as librdkafka takes
them) that counts the bytes acknowledged per second of its run. Per run, on a new
one-partition topic:

1. ``alone``: the neighbour (client id ``neighbour``) for ``--seconds`` with no quota set
   anywhere: its MB/s;
2. ``limited``: ``producer_byte_rate`` = R set for client id ``limited`` (AlterClientQuotas),
   then the limited producer and the neighbour together for ``--seconds``: the limited
   one's MB/s over the whole run and over its last ``seconds - 11`` (after the windows'
   start-up allowance), its throttle events (``throttle_cb``), and the neighbour's MB/s,
   as a ratio to its ``alone`` figure; the quota is removed after;
3. ``alone again``: the neighbour alone once more; the ratio is to the mean of both
   ``alone`` figures, so a machine getting busier or quieter meanwhile shows.

Kafka's rate is measured over the windows' span (at least ``samples - 1`` windows), so a
client that sends as fast as it can gets a start-up allowance of about ``(samples - 1) x
window x R`` at once, and the same again whenever its oldest window expires while it was
held back: its rate is R over whole spans of 11 s, in bursts. The "after 11 s" figure
leaves out the first span.

MB is 10^6 bytes. The load average is sampled before and after every run. The neighbour
writes a few hundred MB/s, so each topic keeps at most ``RETENTION_BYTES`` in 64 MiB
segments (the broker checks retention every second) and is deleted after its run: the
bench's disk use stays under a gigabyte.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import REPO_ROOT, BrokerProc  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "python"))

MB = 1_000_000
RETENTION_BYTES = 256 << 20
SEGMENT_BYTES = 64 << 20
MIN_FREE_BYTES = 5 << 30  # the bench stops rather than fill the disk
WARMUP_S = 11  # the windows' span: the start-up allowance is spent by then


def run_producer(bootstrap: str, topic: str, client_id: str, seconds: str, size: str) -> None:
    """A producer process: as fast as it can for ``seconds``; prints its per-second acked
    bytes and throttle events as JSON."""
    from confluent_kafka import Producer

    throttles: list[float] = []
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": 1,
        "linger.ms": 5,
        "queue.buffering.max.kbytes": 4096,
        "throttle_cb": lambda event: throttles.append(event.throttle_time),
    }
    p = Producer(conf)
    start = time.monotonic()
    per_second = [0] * (int(seconds) + 1)

    def delivered(err: object, msg: object) -> None:
        if err is None:
            i = int(time.monotonic() - start)
            if i < len(per_second):
                per_second[i] += len(msg.value())  # type: ignore[attr-defined]

    value = b"x" * int(size)
    end = start + float(seconds)
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.purge(in_queue=True)
    p.flush(10)
    print(json.dumps({"per_second": per_second[: int(seconds)], "throttles": len(throttles)}))


def _spawn(bootstrap: str, topic: str, client_id: str, seconds: int, size: int):
    return subprocess.Popen(
        [sys.executable, __file__, "produce", bootstrap, topic, client_id, str(seconds), str(size)],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "python"), str(REPO_ROOT)]),
        },
    )


def _result(proc: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if shutil.disk_usage(tempfile.gettempdir()).free < MIN_FREE_BYTES:
            proc.kill()
            raise SystemExit("stopped: less than 5 GB left on the temporary directory's disk")
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("stopped: a producer did not finish in time")
        time.sleep(0.5)
    out, _ = proc.communicate()
    return json.loads(out.strip().splitlines()[-1])


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"retention.bytes": str(RETENTION_BYTES), "segment.bytes": str(SEGMENT_BYTES)}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def _delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)


def _alter(bootstrap: str, client_id: str, rate: float | None) -> None:
    from logstore.protocol.messages.client_quotas import AlterClientQuotasRequest as R
    from tests.integration.clients import wire_call

    op = R.OpData(key="producer_byte_rate", value=rate or 0.0, remove=rate is None)
    body = R(
        entries=[
            R.EntryData(
                entity=[R.EntityData(entity_type="client-id", entity_name=client_id)], ops=[op]
            )
        ],
        validate_only=False,
    )
    got = wire_call(bootstrap, body, 1)
    assert got.entries[0].error_code == 0, got.entries[0].error_message


@dataclass
class RunResult:
    run: int
    quota_mb_s: float
    limited_mb_s: float
    limited_steady_mb_s: float
    limited_throttles: int
    neighbour_alone_mb_s: float
    neighbour_beside_mb_s: float
    neighbour_ratio: float
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)


def one_run(args: argparse.Namespace, bootstrap: str, run: int) -> RunResult:
    load_before = list(os.getloadavg())
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    seconds, timeout = args.seconds, args.seconds + 60
    alone = _result(_spawn(bootstrap, topic, "neighbour", seconds, args.size), timeout)
    rate = args.rate_mb * MB
    _alter(bootstrap, "limited", rate)
    try:
        limited_p = _spawn(bootstrap, topic, "limited", seconds, args.size)
        neighbour_p = _spawn(bootstrap, topic, "neighbour", seconds, args.size)
        limited = _result(limited_p, timeout)
        beside = _result(neighbour_p, timeout)
    finally:
        _alter(bootstrap, "limited", None)
    again = _result(_spawn(bootstrap, topic, "neighbour", seconds, args.size), timeout)
    _delete_topic(bootstrap, topic)
    steady = limited["per_second"][WARMUP_S:]
    alone_mb_s = (sum(alone["per_second"]) + sum(again["per_second"])) / 2 / seconds / MB
    beside_mb_s = sum(beside["per_second"]) / seconds / MB
    return RunResult(
        run,
        args.rate_mb,
        sum(limited["per_second"]) / seconds / MB,
        sum(steady) / max(1, len(steady)) / MB,
        limited["throttles"],
        alone_mb_s,
        beside_mb_s,
        beside_mb_s / alone_mb_s if alone_mb_s else 0.0,
        load_before,
        list(os.getloadavg()),
    )


def print_table(results: list[RunResult]) -> None:
    print(
        "run | quota MB/s | limited MB/s (whole / after 11 s) | throttle events"
        " | neighbour alone MB/s | neighbour beside MB/s | beside/alone | load 1m before/after"
    )
    for r in results:
        print(
            f"{r.run} | {r.quota_mb_s:.2f} | {r.limited_mb_s:.3f} / {r.limited_steady_mb_s:.3f}"
            f" | {r.limited_throttles} | {r.neighbour_alone_mb_s:.1f}"
            f" | {r.neighbour_beside_mb_s:.1f} | {r.neighbour_ratio:.2f}"
            f" | {r.load_before[0]:.2f}/{r.load_after[0]:.2f}"
        )
    if len(results) > 1:
        whole = [r.limited_mb_s / r.quota_mb_s for r in results]
        ratios = [r.neighbour_ratio for r in results]
        print(
            f"limited/quota median {statistics.median(whole):.3f}"
            f" (min {min(whole):.3f}, max {max(whole):.3f});"
            f" neighbour beside/alone median {statistics.median(ratios):.2f}"
            f" (min {min(ratios):.2f}, max {max(ratios):.2f})"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "produce":
        run_producer(*sys.argv[2:7])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate-mb", type=float, default=2.0)
    parser.add_argument("--seconds", type=int, default=41)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="quota-bench-"))
    broker = BrokerProc(
        workdir, {"log.retention.check.interval.ms": "1000", "log.segment.delete.delay.ms": "0"}
    )
    broker.start()
    results: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            results.append(one_run(args, broker.bootstrap, run))
            print_table(results[-1:])
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
